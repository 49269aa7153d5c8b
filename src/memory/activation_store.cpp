#include "memory/activation_store.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/bf16.hpp"
#include "memory/make_copy_engine.hpp"

namespace minilst {

StorePlan store_plan(MemoryPolicy policy, int L, std::int64_t host_rows) {
  StorePlan p;
  switch (policy) {
    case MemoryPolicy::full: p = {L + 1, L, L}; break;
    case MemoryPolicy::checkpoint: p = {L + 1, 0, 0}; break;
    case MemoryPolicy::hf_checkpoint:  // and the blocks whole, with Hugging Face's loss
      p = {L + 1, 0, 0};
      p.whole_sequence = p.hf_head = true;
      break;
    case MemoryPolicy::checkpoint_offload: p = {2, 0, 0, /*host=*/true}; break;
    case MemoryPolicy::offload:  // no host rows: nothing of the row set survives its layer
      p = {2, 2, host_rows > 0 ? 2 : 0, /*host=*/true, /*mlp_saved=*/host_rows > 0};
      break;
    case MemoryPolicy::vanilla: p = {L + 1, L, L, false, /*mlp_saved=*/true, /*whole_sequence=*/true}; break;
    default: throw std::logic_error("store_plan: unknown policy");
  }
  return p;
}

std::int64_t offload_host_rows(double alpha, std::int64_t tokens) {
  return std::min<std::int64_t>(tokens, std::llround(alpha * double(tokens)));
}

HostLayerSizes host_layer_sizes(const ActivationShapes& s, std::int64_t rows, bool mlp) {
  const auto S = std::size_t(s.tokens), r = std::size_t(rows), d = std::size_t(s.hidden),
             I = std::size_t(s.intermediate);
  const auto whole = [](Extent2 e) { return std::size_t(e.rows * e.cols); };
  HostLayerSizes n;
  n.x = S * d;
  n.o = S * std::size_t(s.q_cols);
  n.stats = whole(s.stats);
  if (s.saved.local) {
    n.q = r * s.q_cols;
    n.k = n.v = r * s.kv_cols;
  } else {
    n.q = n.o_kept = whole(s.saved.q);
    n.k = n.v = whole(s.saved.kv);
  }
  n.y = r * d;
  if (mlp) {
    n.mlp_in = r * d;
    n.mlp_gate = n.mlp_up = n.mlp_act = r * I;
  }
  return n;
}

namespace {
// Elements of a layer's whole tensors and of its row tensors (HostLayerSizes split by family).
struct FamilyElements {
  std::size_t whole = 0, stats = 0, rows = 0;
};
FamilyElements family_elements(const ActivationShapes& s, const HostLayerSizes& n) {
  const std::size_t qkv = n.q + n.k + n.v;
  return {n.o + n.o_kept + (s.saved.local ? 0 : qkv), n.stats,
          (s.saved.local ? qkv : 0) + n.y + n.mlp_in + n.mlp_gate + n.mlp_up + n.mlp_act};
}
}  // namespace

template <class T>
std::uint64_t ActivationStore<T>::host_bytes(MemoryPolicy policy, int L, const ActivationShapes& shapes,
                                             double alpha) {
  const std::int64_t rows = policy == MemoryPolicy::offload ? offload_host_rows(alpha, shapes.tokens) : 0;
  const StorePlan plan = store_plan(policy, L, rows);
  if (!plan.host) return 0;
  const auto n = host_layer_sizes(shapes, rows, plan.mlp_saved);
  const auto f = family_elements(shapes, n);
  std::uint64_t bytes = 0;
  for (int l = 0; l < L; ++l) {  // the layers whose buffers are reused before their backward
    if (plan.x_reused(l, L)) bytes += n.x * sizeof(T);
    if (plan.saved_reused(l, L)) bytes += f.whole * sizeof(T) + f.stats * sizeof(A);
    if (plan.rows_reused(l, L)) bytes += f.rows * sizeof(T);
  }
  return bytes;
}

template <class T>
typename ActivationStore<T>::LayerCopyBytes ActivationStore<T>::layer_copy_bytes(const ActivationShapes& shapes) {
  const auto n = host_layer_sizes(shapes, shapes.tokens, /*mlp=*/true);  // offload's swap set, every token
  const auto f = family_elements(shapes, n);
  return {double(n.x * sizeof(T)), double(f.whole * sizeof(T) + f.stats * sizeof(A)), double(f.rows * sizeof(T))};
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
  set_alpha(policy_ == MemoryPolicy::offload ? opts.offload.alpha : 0.0);  // sets the row buffers
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
  plan_ = store_plan(policy_, L_, host_rows_);  // between steps: every row set was released
  rows_.clear();
  rows_.resize(std::size_t(std::max(1, plan_.row_buffers)));
  row_slot_.assign(rows_.size(), Slot());
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
    const SavedLayout& kept = shapes_.saved;
    if (!kept.local) {
      s.q = Tracked<Mat<T>>(uninitialized, "q" + n, act, kept.q.rows, kept.q.cols);
      s.k = Tracked<Mat<T>>(uninitialized, "k" + n, act, kept.kv.rows, kept.kv.cols);
      s.v = Tracked<Mat<T>>(uninitialized, "v" + n, act, kept.kv.rows, kept.kv.cols);
      s.o_kept = Tracked<Mat<T>>(uninitialized, "o_kept" + n, act, kept.q.rows, kept.q.cols);
    }
    s.o = Tracked<Mat<T>>(uninitialized, "o" + n, act, shapes_.tokens, shapes_.q_cols);
    s.stats = Tracked<Mat<A>>(uninitialized, "stats" + n, act, shapes_.stats.rows, shapes_.stats.cols);
  }
  return s;
}

template <class T>
typename ActivationStore<T>::RowSet& ActivationStore<T>::row_set(int l) {
  auto& s = rows_[row_index(l)];
  if (!s.allocated()) {
    const auto act = MemCategory::activations;
    const std::string n = std::to_string(row_index(l));
    const std::int64_t S = shapes_.tokens;
    if (shapes_.saved.local) {
      s.q = Tracked<Mat<T>>(uninitialized, "q" + n, act, S, shapes_.q_cols);
      s.k = Tracked<Mat<T>>(uninitialized, "k" + n, act, S, shapes_.kv_cols);
      s.v = Tracked<Mat<T>>(uninitialized, "v" + n, act, S, shapes_.kv_cols);
    }
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
  auto& r = row_set(l);
  const bool local = shapes_.saved.local;
  LayerActivations<T> a;
  a.x = x_view(l);
  a.q = local ? r.q.view() : s.q.view();
  a.k = local ? r.k.view() : s.k.view();
  a.v = local ? r.v.view() : s.v.view();
  a.o = s.o.view();
  a.o_kept = local ? s.o.view() : s.o_kept.view();
  a.stats = s.stats.view();
  a.y = r.y.view();
  a.local = local;
  a.mlp_saved = plan_.mlp_saved;
  a.mlp_in = r.mlp_in.view();
  a.mlp_gate = r.mlp_gate.view();
  a.mlp_up = r.mlp_up.view();
  a.mlp_act = r.mlp_act.view();
  return a;
}

template <class T>
typename ActivationStore<T>::HostLayer& ActivationStore<T>::host(int l, bool x_only) {
  auto& h = host_.at(l);
  const auto cat = MemCategory::host_offload;
  const std::string n = std::to_string(l);
  const auto size = host_layer_sizes(shapes_, host_rows_, plan_.mlp_saved);
  const bool local = shapes_.saved.local;
  const auto make = [&](HostView& v, const char* name, std::size_t elements) {
    v = HostView(uninitialized, std::string("host_") + name + n, cat, elements);
  };
  if (h.x.bytes() == 0) make(h.x, "x", size.x);
  if (x_only || h.rows >= host_rows_) return h;
  if (h.o.bytes() == 0) {  // the whole tensors, once
    make(h.o, "o", size.o);
    h.stats = Tracked<Kokkos::View<A*, compat::HostPinnedSpace>>(uninitialized, "host_stats" + n, cat, size.stats);
    if (!local) {
      make(h.q, "q", size.q);
      make(h.k, "k", size.k);
      make(h.v, "v", size.v);
      make(h.o_kept, "o_kept", size.o_kept);
    }
  }
  // the row tensors for host_rows tokens (grown if alpha grew)
  if (local) {
    make(h.q, "q", size.q);
    make(h.k, "k", size.k);
    make(h.v, "v", size.v);
  }
  make(h.y, "y", size.y);
  if (plan_.mlp_saved) {
    make(h.mlp_in, "mlp_in", size.mlp_in);
    make(h.mlp_gate, "mlp_gate", size.mlp_gate);
    make(h.mlp_up, "mlp_up", size.mlp_up);
    make(h.mlp_act, "mlp_act", size.mlp_act);
  }
  h.rows = host_rows_;
  return h;
}

template <class T>
std::vector<typename ActivationStore<T>::CopyPair> ActivationStore<T>::whole_copies(int l) {
  auto& h = host(l, false);
  auto& s = saved_set(l);
  const auto all = [](const auto& device, const auto& host) {
    return CopyPair{device.view().data(), host.view().data(), device.bytes()};
  };
  std::vector<CopyPair> pairs{all(s.o, h.o), all(s.stats, h.stats)};
  if (!shapes_.saved.local)
    for (const auto& p : {all(s.q, h.q), all(s.k, h.k), all(s.v, h.v), all(s.o_kept, h.o_kept)}) pairs.push_back(p);
  return pairs;
}

template <class T>
std::vector<typename ActivationStore<T>::CopyPair> ActivationStore<T>::row_copies(int l) {
  auto& h = host(l, false);
  auto& s = row_set(l);
  const std::int64_t r = host_rows_;
  const auto first_rows = [r](const Tracked<Mat<T>>& device, const HostView& host) {
    return CopyPair{device.view().data(), host.view().data(), row_bytes(device.view(), r)};
  };
  std::vector<CopyPair> pairs{first_rows(s.y, h.y)};
  if (shapes_.saved.local)
    for (const auto& p : {first_rows(s.q, h.q), first_rows(s.k, h.k), first_rows(s.v, h.v)}) pairs.push_back(p);
  if (plan_.mlp_saved)
    for (const auto& p : {first_rows(s.mlp_in, h.mlp_in), first_rows(s.mlp_gate, h.mlp_gate),
                          first_rows(s.mlp_up, h.mlp_up), first_rows(s.mlp_act, h.mlp_act)})
      pairs.push_back(p);
  return pairs;
}

template <class T>
CopyEngine::Ticket ActivationStore<T>::copy_all(const std::vector<CopyPair>& pairs, CopyEngine::Direction d) {
  CopyEngine::Ticket t = 0;
  const bool out = d == CopyEngine::Direction::to_host;
  for (const auto& p : pairs) t = std::max(t, copy(out ? p.host : p.device, out ? p.device : p.host, p.bytes, d));
  return t;
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
  for (Slot* slot : {&saved_slot_[saved_index(l)], &row_slot_[row_index(l)]}) {
    if (slot->layer == l) continue;
    if (engine_) block_on(slot->pending, false);  // the buffer changes hands once its copy out is done
    *slot = {l, true, 0};
  }
  return views(l);
}

template <class T>
void ActivationStore<T>::to_host_saved(int l) {
  timed_copies_out("activation store: layer saved");
  saved_slot_[saved_index(l)].pending = copy_all(whole_copies(l), CopyEngine::Direction::to_host);
}

template <class T>
void ActivationStore<T>::to_host_rows(int l) {
  timed_copies_out("activation store: layer saved");
  row_slot_[row_index(l)].pending = copy_all(row_copies(l), CopyEngine::Direction::to_host);
}

template <class T>
void ActivationStore<T>::forward_end(int l) {
  if (plan_.saved_buffers == 0) {  // transient: recomputed before the backward
    saved_[0] = SavedSet();
    saved_slot_[0] = Slot();
  } else if (plan_.host && plan_.saved_reused(l, L_)) {
    to_host_saved(l);
  }
  if (plan_.row_buffers == 0) {
    rows_[0] = RowSet();
    row_slot_[0] = Slot();
  } else if (plan_.host && plan_.rows_reused(l, L_)) {
    to_host_rows(l);
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
  // Transient sets are recomputed, not fetched.
  auto& ss = saved_slot_[saved_index(l)];
  if (plan_.saved_buffers > 0 && ss.layer != l) ss = {l, true, copy_all(whole_copies(l), in)};
  auto& rs = row_slot_[row_index(l)];
  if (plan_.row_buffers > 0 && rs.layer != l) rs = {l, host_rows_ == shapes_.tokens, copy_all(row_copies(l), in)};
}

template <class T>
LayerActivations<T> ActivationStore<T>::backward_begin(int l, const LayerRecompute<T>& redo) {
  fetch(l);  // nothing to do when it was prefetched or never left
  auto& xs = x_slot_[x_index(l)];
  auto& ss = saved_slot_[saved_index(l)];
  auto& rs = row_slot_[row_index(l)];
  if (engine_)
    for (const Slot* slot : {&xs, &ss, &rs}) block_on(slot->pending, true);
  if (l > 0) fetch(l - 1);  // layer l-1 comes back while layer l's backward runs
  const auto a = views(l);
  if (plan_.recompute_attention()) {
    ScopedPhase phase(timers_, Phase::recompute);
    redo.attention_block(l, a);
    ss = rs = {l, true, 0};
  } else if (plan_.row_buffers == 0 || !rs.complete) {  // transient rows: all of them; else those not fetched
    ScopedPhase phase(timers_, Phase::recompute);
    redo.token_rows(l, a, Range{plan_.row_buffers == 0 ? 0 : host_rows_, shapes_.tokens});
    rs = {l, true, 0};
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
  if (plan_.row_buffers == 0 || l < plan_.row_buffers) release(rows_[row_index(l)], row_slot_[row_index(l)]);
  if (l < plan_.x_buffers) release(x_[x_index(l)], x_slot_[x_index(l)]);  // no lower layer shares it
}

template class ActivationStore<float>;
template class ActivationStore<double>;
template class ActivationStore<bf16>;

}  // namespace minilst
