#include "memory/activation_store.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/bf16.hpp"

namespace minilst {

StorePlan store_plan(MemoryPolicy policy, int L) {
  switch (policy) {
    case MemoryPolicy::full: return {L + 1, L, false};
    case MemoryPolicy::checkpoint: return {L + 1, 0, false};
    case MemoryPolicy::checkpoint_offload: return {2, 0, true};
    case MemoryPolicy::offload: return {2, 2, true};
    case MemoryPolicy::vanilla: return {L + 1, L, false, /*mlp_saved=*/true, /*whole_sequence=*/true};
  }
  throw std::logic_error("store_plan: unknown policy");
}

std::int64_t offload_host_rows(double alpha, std::int64_t tokens) {
  return std::min<std::int64_t>(tokens, std::llround(alpha * double(tokens)));
}

HostLayerSizes host_layer_sizes(const ActivationShapes& s, std::int64_t rows) {
  const auto S = std::size_t(s.tokens), r = std::size_t(rows);
  return {S * s.hidden, S * s.q_cols, std::size_t(s.stats.rows * s.stats.cols),
          r * s.q_cols, r * s.kv_cols, r * s.kv_cols, r * s.hidden};
}

template <class T>
std::uint64_t ActivationStore<T>::host_bytes(MemoryPolicy policy, int L, const ActivationShapes& shapes,
                                             double alpha) {
  const StorePlan plan = store_plan(policy, L);
  if (!plan.host) return 0;
  const std::int64_t rows = policy == MemoryPolicy::offload ? offload_host_rows(alpha, shapes.tokens) : 0;
  const auto n = host_layer_sizes(shapes, rows);
  std::uint64_t bytes = 0;
  for (int l = 0; l < L; ++l) {  // the layers whose buffers are reused before their backward
    if (plan.x_reused(l, L)) bytes += n.x * sizeof(T);
    if (plan.saved_reused(l, L)) bytes += (n.o + n.q + n.k + n.v + n.y) * sizeof(T) + n.stats * sizeof(A);
  }
  return bytes;
}

template <class T>
typename ActivationStore<T>::LayerCopyBytes ActivationStore<T>::layer_copy_bytes(const ActivationShapes& shapes) {
  const auto n = host_layer_sizes(shapes, shapes.tokens);
  return {double(n.x * sizeof(T)), double(n.o * sizeof(T) + n.stats * sizeof(A)),
          double((n.q + n.k + n.v + n.y) * sizeof(T))};
}

namespace {
// The first `rows` rows of a LayoutRight matrix are one contiguous range.
template <class V>
std::size_t row_bytes(const V& m, std::int64_t rows) {
  return std::size_t(rows) * m.extent(1) * sizeof(typename V::value_type);
}
}  // namespace

template <class T>
ActivationStore<T>::ActivationStore(const ModelOptions& opts, int layers, const ActivationShapes& shapes,
                                    PhaseTimers* timers)
    : policy_(opts.policy), counting_(counting_only()), L_(layers), shapes_(shapes), timers_(timers),
      plan_(store_plan(opts.policy, layers)),
      x_(plan_.x_buffers), x_slot_(plan_.x_buffers), saved_(std::max(1, plan_.saved_buffers)),
      saved_slot_(std::max(1, plan_.saved_buffers)) {
  set_alpha(policy_ == MemoryPolicy::offload ? opts.offload.alpha : 0.0);
  if (plan_.host) {
    if (!counting_) engine_ = make_copy_engine(opts.offload.bandwidth_gbs);
    host_.resize(L_);
  }
}

template <class T>
ActivationStore<T>::~ActivationStore() {
  if (engine_) engine_->wait_all();  // no copy may outlive its buffers
}

template <class T>
void ActivationStore<T>::set_alpha(double alpha) {
  if (!(alpha >= 0.0 && alpha <= 1.0)) throw std::invalid_argument("offload alpha must be in [0, 1]");
  if (engine_) engine_->wait_all();  // a larger alpha regrows the pinned buffers copies may still read
  alpha_ = alpha;
  host_rows_ = policy_ == MemoryPolicy::offload ? offload_host_rows(alpha, shapes_.tokens) : 0;
}

template <class T>
CopyEngine::Counters ActivationStore<T>::take_counters() {
  if (!engine_) return {};
  engine_->wait_all();  // the compute may have ordered itself after copies the host has not seen end
  return engine_->take_counters();
}

template <class T>
void ActivationStore<T>::block_on(CopyEngine::Ticket ticket, bool backward) {
  if (ticket == 0 || engine_->done(ticket)) return;
  if (time_forward_ && !backward) compat::fence("offload: the forward's compute before timing its copy wait");
  Kokkos::Timer t;  // after that fence: only the copy's wait counts
  ScopedPhase wait(timers_, Phase::offload_wait);
  if (backward) {
    ScopedPhase prefetch(timers_, Phase::prefetch_wait);
    engine_->order_compute_after(ticket);
  } else if (time_forward_) {  // on the host, so that the wait can be left out of the forward's time
    engine_->wait(ticket);
    forward_wait_seconds_ += t.seconds();
  } else {
    engine_->order_compute_after(ticket);
  }
}

template <class T>
void ActivationStore<T>::timed_copies_out(const char* why) const {
  if (time_forward_) fence(why);
}

template <class T>
CopyEngine::Ticket ActivationStore<T>::copy(void* dst, const void* src, std::size_t bytes, CopyEngine::Direction d) {
  return bytes && engine_ ? engine_->submit(dst, src, bytes, d) : 0;
}

template <class T>
void ActivationStore<T>::fence(const char* why) const {
  if (!counting_) compat::fence(why);
}

template <class T>
Mat<T> ActivationStore<T>::x_view(int l) {
  auto& buf = x_[x_index(l)];
  if (buf.bytes() == 0) buf = Tracked<Mat<T>>(uninitialized, "x" + std::to_string(x_index(l)), MemCategory::activations,
                                              shapes_.tokens, shapes_.hidden);
  return buf.view();
}

template <class T>
typename ActivationStore<T>::SavedSet& ActivationStore<T>::saved_set(int l) {
  auto& s = saved_[saved_index(l)];
  if (!s.allocated()) {
    const auto act = MemCategory::activations;
    const std::string n = std::to_string(saved_index(l));
    const std::int64_t S = shapes_.tokens;
    s.q = Tracked<Mat<T>>(uninitialized, "q" + n, act, S, shapes_.q_cols);
    s.k = Tracked<Mat<T>>(uninitialized, "k" + n, act, S, shapes_.kv_cols);
    s.v = Tracked<Mat<T>>(uninitialized, "v" + n, act, S, shapes_.kv_cols);
    s.o = Tracked<Mat<T>>(uninitialized, "o" + n, act, S, shapes_.q_cols);
    s.stats = Tracked<Mat<A>>(uninitialized, "lse" + n, act, shapes_.stats.rows, shapes_.stats.cols);
    s.y = Tracked<Mat<T>>(uninitialized, "y" + n, act, S, shapes_.hidden);
    if (plan_.mlp_saved) {
      s.mlp_in = Tracked<Mat<T>>(uninitialized, "mlp_in" + n, act, S, shapes_.hidden);
      s.mlp_gate = Tracked<Mat<T>>(uninitialized, "mlp_gate" + n, act, S, shapes_.intermediate);
      s.mlp_up = Tracked<Mat<T>>(uninitialized, "mlp_up" + n, act, S, shapes_.intermediate);
      s.mlp_act = Tracked<Mat<T>>(uninitialized, "mlp_act" + n, act, S, shapes_.intermediate);
    }
  }
  return s;
}

template <class T>
LayerActivations<T> ActivationStore<T>::views(int l) {
  auto& s = saved_set(l);
  return {x_view(l),       s.q.view(),        s.k.view(),      s.v.view(),      s.o.view(),      s.stats.view(),
          s.y.view(),      plan_.mlp_saved,   s.mlp_in.view(), s.mlp_gate.view(), s.mlp_up.view(), s.mlp_act.view()};
}

template <class T>
typename ActivationStore<T>::HostLayer& ActivationStore<T>::host(int l, bool x_only) {
  auto& h = host_.at(l);
  const auto cat = MemCategory::host_offload;
  const std::string n = std::to_string(l);
  const auto size = host_layer_sizes(shapes_, host_rows_);
  using HostT = Kokkos::View<T*, compat::HostPinnedSpace>;
  if (h.x.bytes() == 0) h.x = Tracked<HostT>(uninitialized, "host_x" + n, cat, size.x);
  if (x_only || h.rows >= host_rows_) return h;
  // o and stats whole; q, k, v, y for host_rows tokens (grown if alpha grew)
  if (h.o.bytes() == 0) {
    h.o = Tracked<HostT>(uninitialized, "host_o" + n, cat, size.o);
    h.stats = Tracked<Kokkos::View<A*, compat::HostPinnedSpace>>(uninitialized, "host_lse" + n, cat, size.stats);
  }
  h.q = Tracked<HostT>(uninitialized, "host_q" + n, cat, size.q);
  h.k = Tracked<HostT>(uninitialized, "host_k" + n, cat, size.k);
  h.v = Tracked<HostT>(uninitialized, "host_v" + n, cat, size.v);
  h.y = Tracked<HostT>(uninitialized, "host_y" + n, cat, size.y);
  h.rows = host_rows_;
  return h;
}

// ---- forward ----

template <class T>
Mat<T> ActivationStore<T>::input(int l) {
  auto& slot = x_slot_[x_index(l)];
  if (slot.layer != l) {  // the buffer changes hands: wait until the copy out of it is done
    if (engine_) block_on(slot.pending, false);
    slot = {l, true, 0};
  }
  return x_view(l);
}

template <class T>
LayerActivations<T> ActivationStore<T>::forward_begin(int l) {
  if (l == 0 && time_forward_) {
    fence("activation store: forward starts");
    forward_timer_.reset();
    forward_wait_seconds_ = 0;
  }
  if (plan_.host && plan_.x_reused(l, L_)) {  // x_l is complete: on its way to host
    timed_copies_out("activation store: x ready");
    auto& slot = x_slot_[x_index(l)];
    slot.pending = copy(host(l, true).x.view().data(), x_view(l).data(), row_bytes(x_view(l), shapes_.tokens),
                        CopyEngine::Direction::to_host);
  }
  auto& slot = saved_slot_[saved_index(l)];
  if (slot.layer != l) {
    if (engine_) block_on(slot.pending, false);
    slot = {l, true, 0};
  }
  return views(l);
}

template <class T>
void ActivationStore<T>::to_host_saved(int l) {
  timed_copies_out("activation store: layer saved");
  auto& h = host(l, false);
  const auto& s = saved_set(l);
  const auto out = CopyEngine::Direction::to_host;
  const std::int64_t r = host_rows_, S = shapes_.tokens;
  CopyEngine::Ticket t = 0;
  for (auto ticket : {copy(h.o.view().data(), s.o.view().data(), row_bytes(s.o.view(), S), out),
                      copy(h.stats.view().data(), s.stats.view().data(),
                           row_bytes(s.stats.view(), shapes_.stats.rows), out),
                      copy(h.q.view().data(), s.q.view().data(), row_bytes(s.q.view(), r), out),
                      copy(h.k.view().data(), s.k.view().data(), row_bytes(s.k.view(), r), out),
                      copy(h.v.view().data(), s.v.view().data(), row_bytes(s.v.view(), r), out),
                      copy(h.y.view().data(), s.y.view().data(), row_bytes(s.y.view(), r), out)})
    t = std::max(t, ticket);
  saved_slot_[saved_index(l)].pending = t;
}

template <class T>
void ActivationStore<T>::forward_end(int l) {
  if (plan_.saved_buffers == 0) {  // transient: recomputed before the backward
    saved_[0] = SavedSet();
    saved_slot_[0] = Slot();
  } else if (plan_.host && plan_.saved_reused(l, L_)) {
    to_host_saved(l);
  }
  if (l == L_ - 1 && time_forward_) {
    fence("activation store: forward done");
    forward_layer_seconds_ = std::max(0.0, forward_timer_.seconds() - forward_wait_seconds_) / L_;
  }
}

template <class T>
void ActivationStore<T>::head_end() {
  if (L_ < plan_.x_buffers) {  // no layer shares x_L's buffer
    x_[x_index(L_)] = Tracked<Mat<T>>();
    x_slot_[x_index(L_)] = Slot();
  }
}

// ---- backward ----

template <class T>
void ActivationStore<T>::fetch(int l) {
  const auto in = CopyEngine::Direction::to_device;
  auto& xs = x_slot_[x_index(l)];
  if (xs.layer != l) {  // x_l's buffer was reused: x_l is in host memory
    if (!plan_.host) throw std::logic_error("activation store: layer input lost without host memory");
    const Mat<T> x = x_view(l);
    xs = {l, true, copy(x.data(), host(l, true).x.view().data(), row_bytes(x, shapes_.tokens), in)};
  }
  if (plan_.saved_buffers == 0) return;  // transient sets are recomputed, not fetched
  auto& ss = saved_slot_[saved_index(l)];
  if (ss.layer == l) return;
  const auto& h = host(l, false);
  const auto& s = saved_set(l);
  const std::int64_t r = host_rows_, S = shapes_.tokens;
  CopyEngine::Ticket t = 0;
  for (auto ticket : {copy(s.o.view().data(), h.o.view().data(), row_bytes(s.o.view(), S), in),
                      copy(s.stats.view().data(), h.stats.view().data(), row_bytes(s.stats.view(), shapes_.stats.rows), in),
                      copy(s.q.view().data(), h.q.view().data(), row_bytes(s.q.view(), r), in),
                      copy(s.k.view().data(), h.k.view().data(), row_bytes(s.k.view(), r), in),
                      copy(s.v.view().data(), h.v.view().data(), row_bytes(s.v.view(), r), in),
                      copy(s.y.view().data(), h.y.view().data(), row_bytes(s.y.view(), r), in)})
    t = std::max(t, ticket);
  ss = {l, r == S, t};
}

template <class T>
LayerActivations<T> ActivationStore<T>::backward_begin(int l, const LayerRecompute<T>& redo) {
  fetch(l);  // nothing to do when it was prefetched or never left
  auto& xs = x_slot_[x_index(l)];
  auto& ss = saved_slot_[saved_index(l)];
  if (engine_) {
    block_on(xs.pending, true);
    block_on(ss.pending, true);
  }
  if (l > 0) fetch(l - 1);  // layer l-1 comes back while layer l's backward runs
  const auto a = views(l);
  if (plan_.saved_buffers == 0) {
    ScopedPhase phase(timers_, Phase::recompute);
    redo.attention_block(l, a);
    ss = {l, true, 0};
  } else if (!ss.complete) {
    ScopedPhase phase(timers_, Phase::recompute);
    redo.token_rows(l, a, Range{host_rows_, shapes_.tokens});
    ss.complete = true;
  }
  return a;
}

template <class T>
void ActivationStore<T>::backward_end(int l) {
  const auto release = [&](auto& buffer, Slot& slot) {
    if (engine_) engine_->order_compute_after(slot.pending);  // ordered by backward_begin already: a safety net
    buffer = std::decay_t<decltype(buffer)>();
    slot = Slot();
  };
  if (plan_.saved_buffers == 0 || l < plan_.saved_buffers) release(saved_[saved_index(l)], saved_slot_[saved_index(l)]);
  if (l < plan_.x_buffers) release(x_[x_index(l)], x_slot_[x_index(l)]);  // no lower layer shares it
}

template class ActivationStore<float>;
template class ActivationStore<double>;
template class ActivationStore<bf16>;

}  // namespace minilst
