#include "model/tensor_group.hpp"

#include <algorithm>
#include <stdexcept>

#include "kernels/bf16.hpp"
#include "kernels/compat.hpp"

namespace minilst {

namespace {
using Index = Kokkos::IndexType<std::int64_t>;
}

const TensorGroup& TensorGroup::none() {
  static const TensorGroup group;
  return group;
}

TensorGroup::TensorGroup(Communicator* comm, const TensorSlice& slice, PhaseTimers* timers)
    : comm_(comm), slice_(slice), timers_(timers) {
  if (comm_ && comm_->size() != slice.ranks)
    throw std::logic_error("TensorGroup: the communicator's size differs from parallel.tensor");
  if (comm_ && slice.kv_copies > 1) kv_copies_ = comm_->split(slice.rank / slice.kv_copies, slice.rank);
}

std::vector<Range> TensorGroup::block_segments(Range r, std::int64_t n) const {
  const std::int64_t T = size();
  if (T == 1) return {r};
  if (r.begin == 0 && r.end == n) return {Range{0, T * n}};
  std::vector<Range> out;
  for (std::int64_t t = 0; t < T; ++t) out.push_back({t * n + r.begin, t * n + r.end});
  return out;
}

template <class T>
void TensorGroup::gather(const Mat<T>& whole, const Mat<const T>& part) const {
  if (!comm_) return;  // a replay
  ScopedPhase phase(timers_, Phase::tensor_comm);
  compat::fence("tensor parallel: part ready");
  auto request = comm_->iallgather(part.data(), whole.data(), part.size(), dtype_of<T>(), CommOp::tp_allgather);
  comm_->wait(request);
}

template <class T>
void TensorGroup::reduce_scatter(const Mat<T>& part, const Mat<const T>& whole, bool accumulate) const {
  using A = accum_t<T>;
  const std::int64_t n = part.extent(0), w = part.extent(1), Tn = whole.extent(0);
  const Tracked<Mat<T>> recv(uninitialized, "tp_reduce_recv", MemCategory::comm, Tn, w);  // [T n, w]: rank r's block r
  if (!comm_) return;
  ScopedPhase phase(timers_, Phase::tensor_comm);
  const int R = size();
  const std::int64_t block = n * w;
  std::vector<std::int64_t> counts(R, block), displs(R);
  for (int r = 0; r < R; ++r) displs[r] = r * block;
  compat::fence("tensor parallel: partial sums ready");
  comm_->alltoallv(whole.data(), counts, displs, recv.view().data(), counts, displs, dtype_of<T>(),
                   CommOp::tp_reduce_scatter);
  const auto in = recv.view();
  Kokkos::parallel_for("tp_reduce_sum", Kokkos::RangePolicy<ExecSpace, Index>(0, block),
                       KOKKOS_LAMBDA(const std::int64_t k) {
                         const std::int64_t i = k / w, j = k % w;
                         A s = A(in(i, j));
                         for (int r = 1; r < R; ++r) s += A(in(r * n + i, j));
                         part(i, j) = accumulate ? T(A(part(i, j)) + s) : T(s);
                       });
}

namespace {
std::size_t total(const std::vector<TensorGroup::Span>& spans) {
  std::size_t n = 0;
  for (const auto& s : spans) n += s.count;
  return n;
}

// The spans of grads summed over comm's ranks through scratch ([R, n]: every rank's spans, packed;
// summed in rank order, unpacked into grads).
template <class M>
void sum_over(Communicator& comm, const Vec<M>& grads, const std::vector<TensorGroup::Span>& spans,
              const Vec<M>& scratch) {
  const std::size_t n = total(spans);
  const int R = comm.size(), me = comm.rank();
  if (n == 0 || R == 1) return;
  std::size_t at = 0;
  for (const auto& s : spans) {
    Kokkos::deep_copy(ExecSpace(), Kokkos::subview(scratch, Kokkos::make_pair(me * n + at, me * n + at + s.count)),
                      Kokkos::subview(grads, Kokkos::make_pair(s.begin, s.begin + s.count)));
    at += s.count;
  }
  compat::fence("tensor parallel: replicated gradients packed");
  auto request = comm.iallgather(scratch.data() + me * n, scratch.data(), n, dtype_of<M>(), CommOp::tp_grad_sum);
  comm.wait(request);
  at = 0;
  for (const auto& s : spans) {
    const auto g = Kokkos::subview(grads, Kokkos::make_pair(s.begin, s.begin + s.count));
    const std::size_t off = at;
    Kokkos::parallel_for("tp_grad_sum", Kokkos::RangePolicy<ExecSpace, Index>(0, std::int64_t(s.count)),
                         KOKKOS_LAMBDA(const std::int64_t i) {
                           M sum = scratch(off + i);
                           for (int r = 1; r < R; ++r) sum += scratch(r * n + off + i);
                           g(i) = sum;
                         });
    at += s.count;
  }
}
}  // namespace

std::size_t TensorGroup::replicated_scratch(const std::vector<Span>& norms, const std::vector<Span>& kv) const {
  return std::max(std::size_t(size()) * total(norms), std::size_t(slice_.kv_copies) * total(kv));
}

template <class M>
void TensorGroup::sum_replicated(const Vec<M>& grads, const std::vector<Span>& norms, const std::vector<Span>& kv,
                                 const Vec<M>& scratch) const {
  if (!comm_) return;  // one rank, or a replay
  ScopedPhase phase(timers_, Phase::tensor_comm);
  sum_over(*comm_, grads, norms, scratch);
  if (kv_copies_) sum_over(*kv_copies_, grads, kv, scratch);
}

double TensorGroup::sum(double x, const Vec<double>& buf) const {
  if (!comm_) return x;
  Kokkos::deep_copy(buf, x);
  comm_->allreduce_sum(buf.data(), 1, DType::f64, CommOp::grad_norm);
  const auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), buf);
  return h(0);
}

std::vector<double> TensorGroup::gather_host(const std::vector<double>& mine) const {
  if (!comm_) return mine;
  const std::size_t n = mine.size();
  Vec<double> all("tp_dump_staging", n * std::size_t(size()));
  const auto part = Kokkos::subview(all, Kokkos::make_pair(std::size_t(rank()) * n, std::size_t(rank() + 1) * n));
  Kokkos::deep_copy(part, Kokkos::View<const double*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(mine.data(), n));
  compat::fence("tensor parallel: dump staged");
  auto request = comm_->iallgather(part.data(), all.data(), n, DType::f64, CommOp::tensor_dump);
  comm_->wait(request);
  std::vector<double> out(all.extent(0));
  Kokkos::deep_copy(Kokkos::View<double*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(out.data(), out.size()), all);
  return out;
}

#define MINILST_TENSOR_GROUP(T)                                                       \
  template void TensorGroup::gather<T>(const Mat<T>&, const Mat<const T>&) const;     \
  template void TensorGroup::reduce_scatter<T>(const Mat<T>&, const Mat<const T>&, bool) const;
MINILST_TENSOR_GROUP(float)
MINILST_TENSOR_GROUP(double)
MINILST_TENSOR_GROUP(bf16)
#undef MINILST_TENSOR_GROUP
template void TensorGroup::sum_replicated<float>(const Vec<float>&, const std::vector<Span>&, const std::vector<Span>&,
                                                 const Vec<float>&) const;
template void TensorGroup::sum_replicated<double>(const Vec<double>&, const std::vector<Span>&,
                                                  const std::vector<Span>&, const Vec<double>&) const;

}  // namespace minilst
