#include "parallel/mpi_communicator.hpp"

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <limits>
#include <stdexcept>

namespace minilst {

std::size_t dtype_bytes(DType t) { return t == DType::bf16 ? 2 : t == DType::f32 ? 4 : 8; }

namespace {
MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i64: return MPI_INT64_T;
    case DType::bf16: return MPI_UINT16_T;  // moved, never summed
  }
  return MPI_BYTE;
}

int checked_count(std::int64_t n) {
  if (n < 0 || n > std::numeric_limits<int>::max())
    throw std::runtime_error("MPI message of " + std::to_string(n) + " elements exceeds the int count limit");
  return int(n);
}

class MpiRequest final : public Request {
 public:
  MPI_Request request = MPI_REQUEST_NULL;
  std::vector<int> counts;  // a non-blocking all-to-all's counts and displacements, alive until it completes
};

// An all-to-all's int counts and displacements (send counts, send displacements, receive
// counts, receive displacements: size ints each), and the bytes it sends to others.
std::uint64_t alltoall_counts(std::vector<int>& out, int size, int rank, const std::vector<std::int64_t>& scounts,
                              const std::vector<std::int64_t>& sdispls, const std::vector<std::int64_t>& rcounts,
                              const std::vector<std::int64_t>& rdispls, DType type) {
  out.assign(std::size_t(4 * size), 0);
  std::uint64_t sent = 0;
  for (int p = 0; p < size; ++p) {
    out[p] = checked_count(scounts[p]);
    out[size + p] = checked_count(sdispls[p]);
    out[2 * size + p] = checked_count(rcounts[p]);
    out[3 * size + p] = checked_count(rdispls[p]);
    if (p != rank) sent += std::uint64_t(scounts[p]) * dtype_bytes(type);
  }
  return sent;
}
}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, bool own) : comm_(comm), own_(own) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiCommunicator::~MpiCommunicator() {
  if (own_) MPI_Comm_free(&comm_);
}

void MpiCommunicator::alltoallv(const void* send, const std::vector<std::int64_t>& scounts,
                                const std::vector<std::int64_t>& sdispls, void* recv,
                                const std::vector<std::int64_t>& rcounts, const std::vector<std::int64_t>& rdispls,
                                DType type, CommOp op) {
  std::vector<int> c;
  const std::uint64_t sent = alltoall_counts(c, size_, rank_, scounts, sdispls, rcounts, rdispls, type);
  const int n = size_;
  MPI_Alltoallv(send, c.data(), c.data() + n, mpi_type(type), recv, c.data() + 2 * n, c.data() + 3 * n, mpi_type(type),
                comm_);
  count(op, sent);
}

RequestPtr MpiCommunicator::ialltoallv(const void* send, const std::vector<std::int64_t>& scounts,
                                       const std::vector<std::int64_t>& sdispls, void* recv,
                                       const std::vector<std::int64_t>& rcounts,
                                       const std::vector<std::int64_t>& rdispls, DType type, CommOp op) {
  auto r = std::make_unique<MpiRequest>();
  auto& c = r->counts;
  const std::uint64_t sent = alltoall_counts(c, size_, rank_, scounts, sdispls, rcounts, rdispls, type);
  const int n = size_;
  MPI_Ialltoallv(send, c.data(), c.data() + n, mpi_type(type), recv, c.data() + 2 * n, c.data() + 3 * n,
                 mpi_type(type), comm_, &r->request);
  count(op, sent);
  return r;
}

void MpiCommunicator::allreduce_sum(void* buf, std::size_t n, DType type, CommOp op) {
  if (type == DType::bf16) throw std::logic_error("MpiCommunicator::allreduce_sum: bf16 is moved, not summed (sum in fp32)");
  if (size_ == 1) return;
  MPI_Allreduce(MPI_IN_PLACE, buf, checked_count(std::int64_t(n)), mpi_type(type), MPI_SUM, comm_);
  count(op, n * dtype_bytes(type));  // the payload each rank contributes
}

RequestPtr MpiCommunicator::iallgather(const void* send, void* recv, std::size_t n, DType type,
                                       CommOp op) {
  auto r = std::make_unique<MpiRequest>();
  const int c = checked_count(std::int64_t(n));
  checked_count(std::int64_t(n) * size_);  // the receive buffer's extent, too
  const bool in_place = send == static_cast<const char*>(recv) + std::size_t(rank_) * n * dtype_bytes(type);
  MPI_Iallgather(in_place ? MPI_IN_PLACE : send, c, mpi_type(type), recv, c, mpi_type(type), comm_, &r->request);
  count(op, std::uint64_t(size_ - 1) * n * dtype_bytes(type));
  return r;
}

RequestPtr MpiCommunicator::ireduce_scatter_sum(const void* send, void* recv, std::size_t n, DType type,
                                                CommOp op) {
  if (type == DType::bf16)
    throw std::logic_error("MpiCommunicator::ireduce_scatter_sum: bf16 is moved, not summed (sum in fp32)");
  auto r = std::make_unique<MpiRequest>();
  checked_count(std::int64_t(n) * size_);
  MPI_Ireduce_scatter_block(send, recv, checked_count(std::int64_t(n)), mpi_type(type), MPI_SUM, comm_, &r->request);
  count(op, std::uint64_t(size_ - 1) * n * dtype_bytes(type));
  return r;
}

RequestPtr MpiCommunicator::isend(const void* buf, std::size_t n, DType type, int peer, int tag,
                                  CommOp op) {
  auto r = std::make_unique<MpiRequest>();
  MPI_Isend(buf, checked_count(std::int64_t(n)), mpi_type(type), peer, tag, comm_, &r->request);
  if (peer != rank_) count(op, n * dtype_bytes(type));
  return r;
}

RequestPtr MpiCommunicator::irecv(void* buf, std::size_t n, DType type, int peer, int tag) {
  auto r = std::make_unique<MpiRequest>();
  MPI_Irecv(buf, checked_count(std::int64_t(n)), mpi_type(type), peer, tag, comm_, &r->request);
  return r;
}

void MpiCommunicator::wait(RequestPtr& request) {
  if (!request) return;
  auto* r = dynamic_cast<MpiRequest*>(request.get());
  if (!r) throw std::logic_error("MpiCommunicator::wait: not an MPI request");
  MPI_Wait(&r->request, MPI_STATUS_IGNORE);
  request.reset();
}

bool MpiCommunicator::test(RequestPtr& request) {
  if (!request) return true;
  auto* r = dynamic_cast<MpiRequest*>(request.get());
  if (!r) throw std::logic_error("MpiCommunicator::test: not an MPI request");
  int done = 0;
  MPI_Test(&r->request, &done, MPI_STATUS_IGNORE);
  return done != 0;  // the request stays for wait(), which then returns at once
}

void MpiCommunicator::barrier() { MPI_Barrier(comm_); }

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) const {
  MPI_Comm sub;
  MPI_Comm_split(comm_, color, key, &sub);
  return std::make_unique<MpiCommunicator>(sub, true);
}

bool cuda_aware_mpi() {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() == 1;
#else
  return false;
#endif
}

}  // namespace minilst
