// The operations the parallel strategies need, behind one interface: the
// strategies never see MPI or NCCL. Buffers are raw pointers to memory the
// backend can read (host memory for MPI here; device memory for NCCL and
// CUDA-aware MPI).
// Ordering with the caller's compute, two kinds of backend:
//   host-ordered (MPI): an operation uses its buffers from the call that posts it
//     until its wait returns, so the caller fences its compute before posting,
//     and the data is there when wait() returns;
//   device-ordered (NCCL): every operation runs on a communication stream (one for
//     a communicator and the parts split from it), after the work the compute
//     stream holds when the operation is launched (no host fence needed), and
//     wait() makes the compute stream wait for it (device side) and returns at
//     once; a host that reads the data fences the compute stream after wait(). Blocking operations return with the data in place.
// Every call counts the bytes this rank sends to *other* ranks, per operation
// name, so the metrics can show (and tests can check) communication volume.
// No Kokkos here: the NCCL backend compiles against the CUDA toolkit alone.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "core/comm_ops.hpp"
#include <vector>

namespace minilst {

// bf16: the 16 bits of kernels/bf16.hpp, moved as they are (sums of bf16 are not
// reduced here: gradients are fp32 under mixed precision).
enum class DType { f32, f64, i64, bf16 };
std::size_t dtype_bytes(DType t);
struct bf16;
template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<bf16>() { return DType::bf16; }
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<std::int64_t>() { return DType::i64; }

// A pending non-blocking transfer; complete it with Communicator::wait.
class Request {
 public:
  virtual ~Request() = default;
};
using RequestPtr = std::unique_ptr<Request>;

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "mpi", "nccl"
  // Whether a posted isend/irecv moves while the caller computes (the ring's
  // overlap); false where transfers start only at their wait.
  virtual bool overlaps_transfers() const = 0;
  // Whether operations are ordered with the compute stream on the device (above).
  virtual bool device_ordered() const = 0;

  // Personalised all-to-all: to peer p send counts[p] elements from send + sdispls[p],
  // receive rcounts[p] elements at recv + rdispls[p] (elements, not bytes).
  virtual void alltoallv(const void* send, const std::vector<std::int64_t>& scounts,
                         const std::vector<std::int64_t>& sdispls, void* recv,
                         const std::vector<std::int64_t>& rcounts, const std::vector<std::int64_t>& rdispls,
                         DType type, CommOp op) = 0;
  // The same, non-blocking (head-chunked Ulysses overlaps a chunk's exchange with the next
  // chunk's attention); the buffers stay in use until wait(). This default runs the
  // blocking one and returns a finished (null) request.
  virtual RequestPtr ialltoallv(const void* send, const std::vector<std::int64_t>& scounts,
                                const std::vector<std::int64_t>& sdispls, void* recv,
                                const std::vector<std::int64_t>& rcounts, const std::vector<std::int64_t>& rdispls,
                                DType type, CommOp op) {
    alltoallv(send, scounts, sdispls, recv, rcounts, rdispls, type, op);
    return nullptr;
  }
  // In-place sum over all ranks.
  virtual void allreduce_sum(void* buf, std::size_t count, DType type, CommOp op) = 0;
  // Non-blocking collectives of equal blocks (ZeRO), complete with wait():
  //   all-gather      recv[p count, (p+1) count) := rank p's send[0, count); send may be
  //                   recv + rank count (in place)
  //   reduce-scatter  recv[0, count) := sum over ranks of their send[rank count, (rank+1) count)
  // Each counts (size - 1) x count elements sent: what a ring algorithm puts on the
  // wire per rank (its block to every other rank; every other rank's partial sum).
  virtual RequestPtr iallgather(const void* send, void* recv, std::size_t count, DType type,
                                CommOp op) = 0;
  virtual RequestPtr ireduce_scatter_sum(const void* send, void* recv, std::size_t count, DType type,
                                         CommOp op) = 0;
  // Non-blocking point to point (ring hops). A backend may hold posted transfers
  // back until launch(tag) or the first wait on the tag (NCCL: the transfers of a
  // hop must start as one group), so both sides post a tag's transfers in the same
  // order and launch it at corresponding points.
  virtual RequestPtr isend(const void* buf, std::size_t count, DType type, int peer, int tag,
                           CommOp op) = 0;
  virtual RequestPtr irecv(void* buf, std::size_t count, DType type, int peer, int tag) = 0;
  virtual void launch(int tag) = 0;  // starts the tag's transfers posted so far
  virtual void wait(RequestPtr& request) = 0;  // completes and clears it (null: no-op)
  // Lets a pending transfer progress without blocking (MPI moves large messages
  // only inside MPI calls unless it has a progress thread); true when complete.
  // The request stays for wait().
  virtual bool test(RequestPtr& request) = 0;
  virtual void barrier() = 0;
  // Ranks with the same color form a new communicator, ordered by key.
  virtual std::unique_ptr<Communicator> split(int color, int key) const = 0;

  // Bytes sent to other ranks per operation name since the last reset.
  const CommBytes& bytes_sent() const { return bytes_; }
  void reset_bytes() { bytes_ = CommBytes{}; }

 protected:
  void count(CommOp op, std::uint64_t bytes) { bytes_[op] += bytes; }

 private:
  CommBytes bytes_{};
};

}  // namespace minilst
