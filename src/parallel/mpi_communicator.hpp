// Communicator over MPI (host buffers; device buffers too where MPI is CUDA-aware,
// which cuda_aware_mpi() reports).
#pragma once

#include <mpi.h>

#include "parallel/communicator.hpp"

namespace minilst {

class MpiCommunicator final : public Communicator {
 public:
  // Wraps comm (not owned when own == false: MPI_COMM_WORLD).
  explicit MpiCommunicator(MPI_Comm comm, bool own = false);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  bool overlaps_transfers() const override { return true; }  // progressed by test() between compute slices
  bool device_ordered() const override { return false; }
  MPI_Comm comm() const { return comm_; }

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
  RequestPtr isend(const void* buf, std::size_t count, DType type, int peer, int tag, CommOp op) override;
  RequestPtr irecv(void* buf, std::size_t count, DType type, int peer, int tag) override;
  void launch(int) override {}  // isend/irecv are under way from the call
  void wait(RequestPtr& request) override;
  bool test(RequestPtr& request) override;
  void barrier() override;
  std::unique_ptr<Communicator> split(int color, int key) const override;

 private:
  MPI_Comm comm_;
  bool own_;
  int rank_ = 0, size_ = 1;
};

// Whether this MPI can take device pointers (Open MPI's MPIX_Query_cuda_support).
bool cuda_aware_mpi();

}  // namespace minilst
