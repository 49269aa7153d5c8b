// Communicator over NCCL (device buffers), for CUDA builds. Compiled only where
// Kokkos has CUDA and CMake finds NCCL (it then defines MINILST_HAVE_NCCL; see
// cmake/MiniLSTNccl.cmake). The MPI communicator is kept for bootstrap, split and
// barrier. No Kokkos here.
//
// Streams (device-ordered, see communicator.hpp). The caller passes its compute
// stream (the stream of the Kokkos CUDA execution space instance the strategies
// use, `space.cuda_stream()`). Every NCCL operation runs on a stream of the
// communicator's own (non-blocking, created once), in call order, and first makes
// that stream wait (cudaStreamWaitEvent) for what the compute stream holds at the
// operation's launch, so what it sends is ready without a host fence:
//   blocking (alltoallv, allreduce_sum): return after the stream has finished;
//   non-blocking (iallgather, ireduce_scatter_sum, isend/irecv): an event recorded
//   after the operation completes it; wait() makes the compute stream wait on that
//   event and returns at once, test() asks the event.
//
// Point to point: NCCL has no tags, pairs the sends and receives between two
// ranks in the order they are launched, and its send/recv kernels block the GPU
// until the peer's matching call runs, so a ring in which every rank launches its
// isend and its irecv each in its own NCCL group deadlocks (NCCL docs: calls that
// must progress concurrently have to be fused in one ncclGroupStart/End).
// isend/irecv therefore only queue the transfer, per tag; launch(tag) launches
// every transfer of the tag queued since its last launch as ONE group, in posting
// order (RingHop::start calls it right after posting a hop, so the hop moves while
// the compute stream computes); a wait on a transfer not launched yet launches its
// tag first. So, per tag, both sides must post matching transfers in the same
// order and launch at corresponding points (a ring hop does: irecv + isend, then
// launch; the ring's K/V and dK/dV streams use different tags).
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
  NcclCommunicator(MPI_Comm comm, cudaStream_t compute, bool own = false);
  // Waits for the communicator's stream, then destroys the NCCL communicator.
  // Requests must have been waited: transfers still queued (never launched) are
  // dropped.
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }
  bool overlaps_transfers() const override { return true; }  // launched at a hop's start, on stream_
  bool device_ordered() const override { return true; }
  MPI_Comm mpi_comm() const { return mpi_; }
  ncclComm_t nccl_comm() const { return nccl_; }
  cudaStream_t stream() const { return compute_; }  // the compute stream given at construction

  void alltoallv(const void* send, const std::vector<std::int64_t>& scounts, const std::vector<std::int64_t>& sdispls,
                 void* recv, const std::vector<std::int64_t>& rcounts, const std::vector<std::int64_t>& rdispls,
                 DType type, CommOp op) override;
  RequestPtr ialltoallv(const void* send, const std::vector<std::int64_t>& scounts,
                        const std::vector<std::int64_t>& sdispls, void* recv, const std::vector<std::int64_t>& rcounts,
                        const std::vector<std::int64_t>& rdispls, DType type, CommOp op) override;
  void allreduce_sum(void* buf, std::size_t count, DType type, CommOp op) override;
  RequestPtr iallgather(const void* send, void* recv, std::size_t count, DType type, CommOp op) override;
  RequestPtr ireduce_scatter_sum(const void* send, void* recv, std::size_t count, DType type,
                                 CommOp op) override;
  // Queued; launched (one NCCL group per tag) by launch(tag) or the first wait on the tag.
  RequestPtr isend(const void* buf, std::size_t count, DType type, int peer, int tag, CommOp op) override;
  RequestPtr irecv(void* buf, std::size_t count, DType type, int peer, int tag) override;
  void launch(int tag) override;
  void wait(RequestPtr& request) override;
  bool test(RequestPtr& request) override;
  // Waits for the compute stream and the communicator's stream, then MPI_Barrier.
  void barrier() override;
  // MPI_Comm_split of the MPI communicator, then a new NCCL communicator on the
  // part (the same compute stream and communication stream). Collective over this communicator.
  std::unique_ptr<Communicator> split(int color, int key) const override;

 private:
  struct Batch;        // one launch of queued transfers, or one collective, and the event that completes it
  class NcclRequest;   // a non-blocking operation's handle: its batch
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
  NcclRequest& request_of(const RequestPtr& request, const char* call) const;
  void after_compute();          // stream_ waits (device side) for the work compute_ holds now
  void complete(Batch& batch);   // records the batch's event after what stream_ holds now
  RequestPtr launched(CommOp op, std::uint64_t bytes);
  // An all-to-all's sends, receives and own-block copy enqueued on stream_; the bytes sent to others.
  std::uint64_t enqueue_alltoallv(const void* send, const std::vector<std::int64_t>& scounts,
                                  const std::vector<std::int64_t>& sdispls, void* recv,
                                  const std::vector<std::int64_t>& rcounts, const std::vector<std::int64_t>& rdispls,
                                  DType type);  // a collective just enqueued: its event
  void release() noexcept;       // frees what the constructor made (the destructor's, and a failed constructor's)
  using SharedStream = std::shared_ptr<CUstream_st>;
  // A part made by split(): it shares its parent's communication stream.
  NcclCommunicator(MPI_Comm comm, cudaStream_t compute, bool own, SharedStream stream);

  MPI_Comm mpi_;
  bool own_;
  cudaStream_t compute_;  // the caller's
  // One communication stream for a communicator and every part split from it, so
  // that NCCL kernels of different communicators (ZeRO's world, the ring, Ulysses)
  // run in program order, the same on every rank, never concurrently (NCCL's caveat
  // on concurrent communicators); they still overlap the compute stream.
  SharedStream shared_stream_;
  cudaStream_t stream_ = nullptr;  // shared_stream_.get()
  cudaEvent_t compute_ready_ = nullptr;   // recorded on compute_ at each launch, waited on by stream_
  ncclComm_t nccl_ = nullptr;
  int rank_ = 0, size_ = 1;
  std::map<int, Pending> pending_;  // by tag
};

}  // namespace minilst
