#include "parallel/nccl_communicator.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace minilst {

namespace {
void nccl_check(ncclResult_t r, const char* call, ncclComm_t comm = nullptr) {
  if (r == ncclSuccess) return;
  std::string msg = std::string(call) + " failed: " + ncclGetErrorString(r);
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0)
  if (comm) {
    const char* last = ncclGetLastError(comm);
    if (last && *last) msg += std::string(" (") + last + ")";
  }
#else
  (void)comm;
#endif
  throw std::runtime_error(msg);
}

void cuda_check(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return;
  throw std::runtime_error(std::string(call) + " failed: " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::i64: return ncclInt64;
    case DType::bf16: return ncclBfloat16;
  }
  throw std::logic_error("NcclCommunicator: unknown DType");
}

std::size_t checked_count(std::int64_t n, const char* what) {
  if (n < 0) throw std::runtime_error(std::string("NcclCommunicator::alltoallv: negative ") + what);
  return std::size_t(n);
}

// ncclGroupStart now; ncclGroupEnd by end(), or on unwinding (result ignored) so
// a failing call inside the group does not leave the group open.
class Group {
 public:
  explicit Group(ncclComm_t comm) : comm_(comm) { nccl_check(ncclGroupStart(), "ncclGroupStart"); }
  ~Group() {
    if (open_) ncclGroupEnd();
  }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  void end() {
    open_ = false;
    nccl_check(ncclGroupEnd(), "ncclGroupEnd", comm_);
  }

 private:
  ncclComm_t comm_;
  bool open_ = true;
};
}  // namespace

struct NcclCommunicator::Batch {
  bool launched = false;
  cudaEvent_t event = nullptr;  // recorded on the communicator's stream after the batch
  Batch() = default;
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;
  ~Batch() {
    if (event) cudaEventDestroy(event);  // no throwing from a destructor; a stream still waiting on it is unaffected
  }
};

class NcclCommunicator::NcclRequest final : public Request {
 public:
  NcclRequest(const NcclCommunicator* c, std::shared_ptr<Batch> b, int t) : owner(c), batch(std::move(b)), tag(t) {}
  const NcclCommunicator* owner;
  std::shared_ptr<Batch> batch;
  int tag;
};

NcclCommunicator::NcclCommunicator(MPI_Comm comm, cudaStream_t compute, bool own)
    : NcclCommunicator(comm, compute, own, nullptr) {}

NcclCommunicator::NcclCommunicator(MPI_Comm comm, cudaStream_t compute, bool own, SharedStream stream)
    : mpi_(comm), own_(own), compute_(compute), shared_stream_(std::move(stream)) {
  try {
    MPI_Comm_rank(mpi_, &rank_);
    MPI_Comm_size(mpi_, &size_);
    ncclUniqueId id{};
    if (rank_ == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    MPI_Bcast(&id, int(sizeof(ncclUniqueId)), MPI_BYTE, 0, mpi_);
    nccl_check(ncclCommInitRank(&nccl_, size_, id, rank_), "ncclCommInitRank");
    if (!shared_stream_) {  // non-blocking: never implicitly ordered with the legacy default stream
      cudaStream_t created = nullptr;
      cuda_check(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
      shared_stream_ = SharedStream(created, [](cudaStream_t s) { cudaStreamDestroy(s); });
    }
    stream_ = shared_stream_.get();
    cuda_check(cudaEventCreateWithFlags(&compute_ready_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  } catch (...) {
    release();  // the destructor does not run for a failed constructor
    throw;
  }
}

NcclCommunicator::~NcclCommunicator() {
  pending_.clear();  // never-launched transfers are dropped (see the header)
  if (stream_) cudaStreamSynchronize(stream_);  // no throwing from a destructor
  release();
}

void NcclCommunicator::release() noexcept {
  if (compute_ready_) cudaEventDestroy(compute_ready_);
  shared_stream_.reset();  // the stream goes with its last communicator
  if (nccl_) ncclCommDestroy(nccl_);
  if (own_) MPI_Comm_free(&mpi_);
}

void NcclCommunicator::after_compute() {
  // A later record does not change a wait already enqueued, so one event serves every launch.
  cuda_check(cudaEventRecord(compute_ready_, compute_), "cudaEventRecord");
  cuda_check(cudaStreamWaitEvent(stream_, compute_ready_, 0), "cudaStreamWaitEvent");
}

void NcclCommunicator::complete(Batch& batch) {
  batch.launched = true;
  cuda_check(cudaEventCreateWithFlags(&batch.event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  cuda_check(cudaEventRecord(batch.event, stream_), "cudaEventRecord");
}

void NcclCommunicator::launch(int tag) {
  auto it = pending_.find(tag);
  if (it == pending_.end()) return;
  Pending p = std::move(it->second);
  pending_.erase(it);
  after_compute();
  Group group(nccl_);
  for (const PendingOp& o : p.ops) {
    if (o.send)
      nccl_check(ncclSend(o.buf, o.count, nccl_type(o.type), o.peer, nccl_, stream_), "ncclSend", nccl_);
    else
      nccl_check(ncclRecv(o.buf, o.count, nccl_type(o.type), o.peer, nccl_, stream_), "ncclRecv", nccl_);
  }
  group.end();
  complete(*p.batch);
}

RequestPtr NcclCommunicator::post(const PendingOp& o, int tag) {
  if (o.peer < 0 || o.peer >= size_)
    throw std::runtime_error(std::string("NcclCommunicator::") + (o.send ? "isend" : "irecv") + ": peer " +
                             std::to_string(o.peer) + " out of range");
  Pending& p = pending_[tag];
  if (!p.batch) p.batch = std::make_shared<Batch>();
  p.ops.push_back(o);
  return std::make_unique<NcclRequest>(this, p.batch, tag);
}

NcclCommunicator::NcclRequest& NcclCommunicator::request_of(const RequestPtr& request, const char* call) const {
  auto* r = dynamic_cast<NcclRequest*>(request.get());
  if (!r || r->owner != this)
    throw std::logic_error(std::string("NcclCommunicator::") + call + ": not a request of this communicator");
  return *r;
}

std::uint64_t NcclCommunicator::enqueue_alltoallv(const void* send, const std::vector<std::int64_t>& scounts,
                                                  const std::vector<std::int64_t>& sdispls, void* recv,
                                                  const std::vector<std::int64_t>& rcounts,
                                                  const std::vector<std::int64_t>& rdispls, DType type) {
  const std::size_t n = std::size_t(size_);
  if (scounts.size() < n || sdispls.size() < n || rcounts.size() < n || rdispls.size() < n)
    throw std::runtime_error("NcclCommunicator::alltoallv: count/displacement vectors shorter than the communicator");
  const std::size_t eb = dtype_bytes(type);
  const auto* s = static_cast<const char*>(send);
  auto* r = static_cast<char*>(recv);
  const std::size_t self_send = checked_count(scounts[rank_], "send count");
  const std::size_t self_recv = checked_count(rcounts[rank_], "receive count");
  if (self_send != self_recv)
    throw std::runtime_error("NcclCommunicator::alltoallv: send and receive counts to self differ");
  std::uint64_t sent = 0;
  after_compute();
  {
    Group group(nccl_);
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      const std::size_t sc = checked_count(scounts[p], "send count");
      const std::size_t rc = checked_count(rcounts[p], "receive count");
      const std::size_t sd = checked_count(sdispls[p], "send displacement");
      const std::size_t rd = checked_count(rdispls[p], "receive displacement");
      if (sc > 0)
        nccl_check(ncclSend(s + sd * eb, sc, nccl_type(type), p, nccl_, stream_), "ncclSend", nccl_);
      if (rc > 0)
        nccl_check(ncclRecv(r + rd * eb, rc, nccl_type(type), p, nccl_, stream_), "ncclRecv", nccl_);
      sent += std::uint64_t(sc) * eb;
    }
    group.end();
  }
  if (self_send > 0)  // own block: a device copy, no NCCL self-transfer needed
    cuda_check(cudaMemcpyAsync(r + checked_count(rdispls[rank_], "receive displacement") * eb,
                               s + checked_count(sdispls[rank_], "send displacement") * eb, self_send * eb,
                               cudaMemcpyDeviceToDevice, stream_),
               "cudaMemcpyAsync");
  return sent;
}

void NcclCommunicator::alltoallv(const void* send, const std::vector<std::int64_t>& scounts,
                                 const std::vector<std::int64_t>& sdispls, void* recv,
                                 const std::vector<std::int64_t>& rcounts, const std::vector<std::int64_t>& rdispls,
                                 DType type, CommOp op) {
  const std::uint64_t sent = enqueue_alltoallv(send, scounts, sdispls, recv, rcounts, rdispls, type);
  cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  count(op, sent);
}

RequestPtr NcclCommunicator::ialltoallv(const void* send, const std::vector<std::int64_t>& scounts,
                                        const std::vector<std::int64_t>& sdispls, void* recv,
                                        const std::vector<std::int64_t>& rcounts,
                                        const std::vector<std::int64_t>& rdispls, DType type, CommOp op) {
  return launched(op, enqueue_alltoallv(send, scounts, sdispls, recv, rcounts, rdispls, type));
}

void NcclCommunicator::allreduce_sum(void* buf, std::size_t n, DType type, CommOp op) {
  if (type == DType::bf16) throw std::logic_error("NcclCommunicator::allreduce_sum: bf16 is moved, not summed (sum in fp32)");
  if (size_ == 1) return;
  after_compute();
  nccl_check(ncclAllReduce(buf, buf, n, nccl_type(type), ncclSum, nccl_, stream_), "ncclAllReduce", nccl_);
  cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  count(op, n * dtype_bytes(type));  // the payload each rank contributes, as the MPI backend counts it
}

RequestPtr NcclCommunicator::launched(CommOp op, std::uint64_t bytes) {
  auto batch = std::make_shared<Batch>();
  complete(*batch);
  count(op, bytes);
  return std::make_unique<NcclRequest>(this, std::move(batch), -1);
}

RequestPtr NcclCommunicator::iallgather(const void* send, void* recv, std::size_t n, DType type,
                                        CommOp op) {
  after_compute();
  nccl_check(ncclAllGather(send, recv, n, nccl_type(type), nccl_, stream_), "ncclAllGather", nccl_);
  return launched(op, std::uint64_t(size_ - 1) * n * dtype_bytes(type));
}

RequestPtr NcclCommunicator::ireduce_scatter_sum(const void* send, void* recv, std::size_t n, DType type,
                                                 CommOp op) {
  if (type == DType::bf16)
    throw std::logic_error("NcclCommunicator::ireduce_scatter_sum: bf16 is moved, not summed (sum in fp32)");
  after_compute();
  nccl_check(ncclReduceScatter(send, recv, n, nccl_type(type), ncclSum, nccl_, stream_), "ncclReduceScatter", nccl_);
  return launched(op, std::uint64_t(size_ - 1) * n * dtype_bytes(type));
}

RequestPtr NcclCommunicator::isend(const void* buf, std::size_t n, DType type, int peer, int tag,
                                   CommOp op) {
  RequestPtr r = post(PendingOp{true, const_cast<void*>(buf), n, type, peer}, tag);
  if (peer != rank_) count(op, n * dtype_bytes(type));
  return r;
}

RequestPtr NcclCommunicator::irecv(void* buf, std::size_t n, DType type, int peer, int tag) {
  return post(PendingOp{false, buf, n, type, peer}, tag);
}

void NcclCommunicator::wait(RequestPtr& request) {
  if (!request) return;
  NcclRequest& r = request_of(request, "wait");
  if (!r.batch->launched) {
    auto it = pending_.find(r.tag);
    if (it == pending_.end() || it->second.batch != r.batch)
      throw std::runtime_error("NcclCommunicator::wait: the transfer's launch failed earlier");
    launch(r.tag);
  }
  if (!r.batch->event) throw std::runtime_error("NcclCommunicator::wait: the transfer's launch failed earlier");
  cuda_check(cudaStreamWaitEvent(compute_, r.batch->event, 0), "cudaStreamWaitEvent");
  request.reset();  // the last request of a batch destroys its event
}

bool NcclCommunicator::test(RequestPtr& request) {
  if (!request) return true;
  const NcclRequest& r = request_of(request, "test");
  if (!r.batch->event) return false;  // not launched yet
  const cudaError_t state = cudaEventQuery(r.batch->event);
  if (state == cudaErrorNotReady) return false;
  cuda_check(state, "cudaEventQuery");
  return true;
}

void NcclCommunicator::barrier() {
  cuda_check(cudaStreamSynchronize(compute_), "cudaStreamSynchronize");
  cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  MPI_Barrier(mpi_);
}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key) const {
  MPI_Comm sub;
  MPI_Comm_split(mpi_, color, key, &sub);
  if (sub == MPI_COMM_NULL)
    throw std::runtime_error("NcclCommunicator::split: this rank is in no part (color MPI_UNDEFINED)");
  return std::unique_ptr<Communicator>(new NcclCommunicator(sub, compute_, true, shared_stream_));
}

}  // namespace minilst
