// Communicator over NCCL (device buffers), for CUDA builds. Compiled only where
// Kokkos has CUDA and CMake finds NCCL (it then defines MINILST_HAVE_NCCL; see
// cmake/MiniLSTNccl.cmake). Every operation is enqueued on one CUDA stream: pass
// the stream of the Kokkos CUDA execution space instance the strategies use
// (`space.cuda_stream()`), or fence that space before each call. The MPI
// communicator is kept for bootstrap, split and barrier. No Kokkos here.
//
// Point to point: NCCL has no tags, pairs the sends and receives between two
// ranks in the order they are launched, and its send/recv kernels block the GPU
// until the peer's matching call runs, so a ring in which every rank launches its
// isend and its irecv each in its own NCCL group on one stream deadlocks (NCCL
// docs: calls that must progress concurrently have to be fused in one
// ncclGroupStart/End). isend/irecv therefore only queue the transfer, per tag;
// waiting on a request launches every transfer of its tag queued since the last
// launch as ONE group, in posting order, then waits for that group. So, per tag,
// both sides must post matching transfers in the same order and wait at
// corresponding points (a ring hop does: isend + irecv, then the waits; the
// ring's K/V and dK/dV streams use different tags and are launched separately).
// Transfers are not launched before their wait: no overlap with compute.
#pragma once

#include <cuda_bf16.h>  // before nccl.h: older NCCL declares ncclBfloat16 only with the CUDA bf16 types
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <map>
#include <memory>
#include <vector>

#include "parallel/communicator.hpp"

namespace minilst {

class NcclCommunicator final : public Communicator {
 public:
  // Collective over comm: rank 0 creates the NCCL id, MPI_Bcast hands it to the
  // others, each calls ncclCommInitRank. The CUDA device must already be set
  // (cudaSetDevice). comm is freed on destruction only when own == true.
  NcclCommunicator(MPI_Comm comm, cudaStream_t stream, bool own = false);
  // Destroys the NCCL communicator. Requests must have been waited: transfers
  // still queued (never launched) are dropped.
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }
  bool overlaps_transfers() const override { return false; }  // launched at the wait (above)
  MPI_Comm mpi_comm() const { return mpi_; }
  ncclComm_t nccl_comm() const { return nccl_; }
  cudaStream_t stream() const { return stream_; }

  // Blocking: returns after the stream has finished the exchange.
  void alltoallv(const void* send, const std::vector<std::int64_t>& scounts, const std::vector<std::int64_t>& sdispls,
                 void* recv, const std::vector<std::int64_t>& rcounts, const std::vector<std::int64_t>& rdispls,
                 DType type, const std::string& op) override;
  void allreduce_sum(void* buf, std::size_t count, DType type, const std::string& op) override;
  // Enqueued on the stream at once (they overlap what runs on other streams); the
  // request's event completes them.
  RequestPtr iallgather(const void* send, void* recv, std::size_t count, DType type, const std::string& op) override;
  RequestPtr ireduce_scatter_sum(const void* send, void* recv, std::size_t count, DType type,
                                 const std::string& op) override;
  // Queued; launched (one NCCL group per tag) by the first wait on the tag.
  RequestPtr isend(const void* buf, std::size_t count, DType type, int peer, int tag, const std::string& op) override;
  RequestPtr irecv(void* buf, std::size_t count, DType type, int peer, int tag) override;
  void wait(RequestPtr& request) override;
  // Transfers are launched by wait (see above), so there is nothing to progress yet.
  bool test(RequestPtr& request) override { return !request; }
  void barrier() override;
  // MPI_Comm_split of the MPI communicator, then a new NCCL communicator on the
  // part (same stream). Collective over this communicator.
  std::unique_ptr<Communicator> split(int color, int key) const override;

 private:
  struct Batch;        // one launch of queued transfers and the event that completes it
  class NcclRequest;   // a queued transfer's handle: its batch
  struct PendingOp {
    bool send;
    void* buf;
    std::size_t count;
    DType type;
    int peer;
  };
  struct Pending {  // a tag's queued transfers and the batch they will form
    std::vector<PendingOp> ops;
    std::shared_ptr<Batch> batch;
  };
  RequestPtr post(const PendingOp& o, int tag);
  RequestPtr launched(const std::string& op, std::uint64_t bytes);  // a collective just enqueued: its event
  void flush(int tag);  // launch the tag's queued transfers as one group, record their event

  MPI_Comm mpi_;
  bool own_;
  cudaStream_t stream_;
  ncclComm_t nccl_ = nullptr;
  int rank_ = 0, size_ = 1;
  std::map<int, Pending> pending_;  // by tag
};

}  // namespace minilst
