#include "memory/activation_store.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/bf16.hpp"
#include "memory/make_copy_engine.hpp"

namespace minilst {

namespace {

// A table row's columns, resolved against the run's shapes (ActivationShapes).
enum class Width {                    // (n: the residual rows, S: the blocks'; n = S but under tensor parallelism)
  hidden,        // [n, d]
  block_hidden,  // [S, d]
  heads,         // [S, H h]
  kept_heads,    // the saved layout's q ([S, H h] when local)
  kept_kv,       // the saved layout's k, v ([S, G h] when local)
  intermediate,  // [S, I]
  stats          // the attention strategy's statistics
};
// A table row's family as listed; the store resolves it against the layout and the plan (family_of).
enum class Listed {
  input, whole, rows,
  layout,  // the row family in the local layout, the kept family in a strategy's own
  kept,    // only in a strategy's own layout (local: o_kept is o itself)
  mlp      // the row family where the plan keeps the MLP's tensors, else none
};

template <class T>
struct SavedTensor {
  const char* name;  // the device buffer's label (+ its index) and the host copy's ("host_" + name + layer)
  Listed family;
  Width width;
  Mat<T> LayerActivations<T>::*value = nullptr;           // the member it fills: T elements,
  Mat<accum_t<T>> LayerActivations<T>::*accum = nullptr;  // or the accumulation type's
  std::size_t element_bytes() const { return accum ? sizeof(accum_t<T>) : sizeof(T); }
};

// The saved tensors, one row each: adding a tensor is one row here and its member in LayerActivations.
template <class T>
const std::vector<SavedTensor<T>>& saved_tensors() {
  using LA = LayerActivations<T>;
  static const std::vector<SavedTensor<T>> table = {
      // name      family          columns              member (accumulation type: the second)
      {"x",        Listed::input,  Width::hidden,       &LA::x},
      {"q",        Listed::layout, Width::kept_heads,   &LA::q},
      {"k",        Listed::layout, Width::kept_kv,      &LA::k},
      {"v",        Listed::layout, Width::kept_kv,      &LA::v},
      {"o",        Listed::whole,  Width::heads,        &LA::o},
      {"o_kept",   Listed::kept,   Width::kept_heads,   &LA::o_kept},
      {"stats",    Listed::whole,  Width::stats,        nullptr, &LA::stats},
      {"y",        Listed::rows,   Width::hidden,       &LA::y},
      {"mlp_in",   Listed::mlp,    Width::block_hidden, &LA::mlp_in},
      {"mlp_gate", Listed::mlp,    Width::intermediate, &LA::mlp_gate},
      {"mlp_up",   Listed::mlp,    Width::intermediate, &LA::mlp_up},
      {"mlp_act",  Listed::mlp,    Width::intermediate, &LA::mlp_act},
  };
  return table;
}

std::optional<Family> resolve(Listed f, bool local, bool mlp_saved) {
  switch (f) {
    case Listed::input: return Family::input;
    case Listed::whole: return Family::whole;
    case Listed::rows: return Family::rows;
    case Listed::layout: return local ? Family::rows : Family::kept;
    case Listed::kept: return local ? std::nullopt : std::optional<Family>(Family::kept);
    case Listed::mlp: return mlp_saved ? std::optional<Family>(Family::rows) : std::nullopt;
  }
  throw std::logic_error("activation store: unknown family");
}

Extent2 extent(Width w, const ActivationShapes& s) {
  switch (w) {
    case Width::hidden: return {s.tokens, s.hidden};
    case Width::block_hidden: return {s.block_tokens, s.hidden};
    case Width::heads: return {s.block_tokens, s.q_cols};
    case Width::kept_heads: return s.saved.q;
    case Width::kept_kv: return s.saved.kv;
    case Width::intermediate: return {s.block_tokens, s.intermediate};
    case Width::stats: return s.stats;
  }
  throw std::logic_error("activation store: unknown width");
}

// A row tensor's row segments: its e.rows / n blocks of n rows each (1 for [n, d] tensors;
// under tensor parallelism T for the blocks' [T n, w] ones, rank t's rows at block t). MEMO's
// token rows [0, h) of the residual stream are rows [j n, j n + h) of each segment j.
std::int64_t row_segments(const Extent2& e, const ActivationShapes& s) {
  if (s.tokens <= 0 || e.rows % s.tokens != 0)
    throw std::logic_error("activation store: a row tensor's rows are not a multiple of the residual rows");
  return e.rows / s.tokens;
}

// The families a layer's saved sets are allocated, copied and released in (the layer input apart).
constexpr std::array<Family, 3> kSavedFamilies = {Family::kept, Family::whole, Family::rows};

// Bytes of one layer's tensors per family, the row family's for `rows` token rows.
template <class T>
std::array<std::uint64_t, kFamilies.size()> family_bytes(const ActivationShapes& s, std::int64_t rows, bool mlp_saved) {
  std::array<std::uint64_t, kFamilies.size()> bytes{};
  for (const auto& t : saved_tensors<T>()) {
    const auto f = resolve(t.family, s.saved.local, mlp_saved);
    if (!f) continue;
    const Extent2 e = extent(t.width, s);
    const std::int64_t r = *f == Family::rows ? rows * row_segments(e, s) : e.rows;
    bytes[std::size_t(*f)] += std::uint64_t(r) * std::uint64_t(e.cols) * t.element_bytes();
  }
  return bytes;
}

}  // namespace

StoreBuffers store_buffers(MemoryPolicy policy, int L, double alpha, std::int64_t tokens, int mlp_chunks) {
  StoreBuffers p;
  const auto buffers = [&p](int x, int saved, int rows) {  // the kept tensors go with the whole ones
    p.x_buffers = x;
    p.saved_buffers = p.kept_buffers = saved;
    p.row_buffers = rows;
  };
  switch (policy) {
    case MemoryPolicy::full: buffers(L + 1, L, L); break;
    case MemoryPolicy::checkpoint: buffers(L + 1, 0, 0); break;
    case MemoryPolicy::hf_checkpoint:  // and the blocks whole, with Hugging Face's loss
      buffers(L + 1, 0, 0);
      p.whole_sequence = p.hf_head = true;
      break;
    case MemoryPolicy::checkpoint_offload:
      buffers(2, 0, 0);
      p.host = true;
      break;
    case MemoryPolicy::offload: {  // no host rows: nothing of the row set survives its layer
      const bool rows = offload_host_rows(alpha, tokens) > 0;
      buffers(2, 2, rows ? 2 : 0);
      p.kept_buffers = alpha > 0 ? 2 : 0;  // alpha 0: MEMO's swap set is x, o and stats alone
      p.host = true;
      p.mlp_saved = rows && mlp_chunks == 1;  // with mini-sequences the MLP recomputes its chunks
      break;
    }
    case MemoryPolicy::vanilla:
      buffers(L + 1, L, L);
      p.mlp_saved = p.whole_sequence = true;
      break;
    default: throw std::logic_error("store_buffers: unknown policy");
  }
  return p;
}

std::int64_t offload_host_rows(double alpha, std::int64_t tokens) {
  return std::min<std::int64_t>(tokens, std::llround(alpha * double(tokens)));
}

TokenRecompute token_recompute(const StoreBuffers& plan, int L, std::int64_t host_rows, std::int64_t tokens,
                               bool local) {
  TokenRecompute r;
  if (plan.recompute_attention()) return r;
  r.kept_layers = !local && plan.kept_buffers == 0 ? L : 0;
  r.rows = plan.row_buffers == 0 ? tokens : tokens - host_rows;
  for (int l = 0; l < L && r.rows > 0; ++l) r.layers += plan.row_buffers == 0 || plan.reused(Family::rows, l, L);
  return r;
}

template <class T>
std::uint64_t ActivationStore<T>::host_bytes(MemoryPolicy policy, int L, const ActivationShapes& shapes, double alpha,
                                             int mlp_chunks) {
  const std::int64_t rows = policy == MemoryPolicy::offload ? offload_host_rows(alpha, shapes.tokens) : 0;
  const StoreBuffers plan = store_buffers(policy, L, alpha, shapes.tokens, effective_chunks(shapes.tokens, mlp_chunks));
  if (!plan.host) return 0;
  const auto layer = family_bytes<T>(shapes, rows, plan.mlp_saved);
  std::uint64_t bytes = 0;
  for (int l = 0; l < L; ++l)  // the layers whose buffers are reused before their backward
    for (const Family f : kFamilies)
      if (plan.reused(f, l, L)) bytes += layer[std::size_t(f)];
  return bytes;
}

template <class T>
typename ActivationStore<T>::LayerCopyBytes ActivationStore<T>::layer_copy_bytes(const ActivationShapes& shapes,
                                                                                  int mlp_chunks) {
  // offload's swap set at alpha > 0, every token
  const auto plan = store_buffers(MemoryPolicy::offload, 1, 1.0, shapes.tokens, effective_chunks(shapes.tokens, mlp_chunks));
  const auto b = family_bytes<T>(shapes, shapes.tokens, plan.mlp_saved);
  const auto at = [&b](Family f) { return double(b[std::size_t(f)]); };
  return {at(Family::input), at(Family::whole) + at(Family::kept), at(Family::rows)};
}

template <class T>
ActivationStore<T>::ActivationStore(const ModelOptions& opts, int layers, const ActivationShapes& shapes,
                                    PhaseTimers* timers)
    : policy_(opts.policy), counting_(counting_only()), L_(layers), shapes_(shapes),
      mlp_chunks_(effective_chunks(shapes.tokens, opts.mlp_chunks)), timers_(timers) {
  set_alpha(policy_ == MemoryPolicy::offload ? opts.offload.alpha : 0.0);  // the plan and the saved families' buffers
  reset_family(Family::input);
  if (plan_.host) {
    if (!counting_) engine_ = make_copy_engine(opts.offload.bandwidth_gbs);
    host_.resize(L_);
  }
}

template <class T>
ActivationStore<T>::~ActivationStore() {
  // No copy may outlive its buffers. A failed wait (a device fault already being
  // reported) must not throw from here: that would end the run in std::terminate.
  try {
    if (engine_) engine_->wait_all();
  } catch (...) {
  }
}

template <class T>
void ActivationStore<T>::set_alpha(double alpha) {
  if (!(alpha >= 0.0 && alpha <= 1.0)) throw std::invalid_argument("offload alpha must be in [0, 1]");
  if (engine_) engine_->wait_all();  // a larger alpha regrows the pinned buffers copies may still read
  alpha_ = alpha;
  host_rows_ = policy_ == MemoryPolicy::offload ? offload_host_rows(alpha, shapes_.tokens) : 0;
  plan_ = store_buffers(policy_, L_, alpha_, shapes_.tokens, mlp_chunks_);  // between steps: every saved set was released
  for (const Family f : kSavedFamilies) reset_family(f);
}

template <class T>
void ActivationStore<T>::reset_family(Family f) {
  auto& fb = family(f);
  const std::size_t n = std::size_t(std::max(1, plan_.buffers(f)));
  fb.sets.clear();
  fb.sets.resize(n);
  fb.slots.assign(n, Slot());
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
std::optional<Family> ActivationStore<T>::family_of(std::size_t tensor) const {
  return resolve(saved_tensors<T>()[tensor].family, shapes_.saved.local, plan_.mlp_saved);
}

template <class T>
typename ActivationStore<T>::Set& ActivationStore<T>::set(Family f, int l) {
  auto& s = family(f).sets[std::size_t(index(f, l))];
  if (s.allocated) return s;
  const auto& table = saved_tensors<T>();
  const std::string n = std::to_string(index(f, l));
  s.tensors.clear();
  s.tensors.resize(table.size());
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (family_of(i) != f) continue;
    const auto& t = table[i];
    const Extent2 e = extent(t.width, shapes_);
    auto& b = s.tensors[i];
    if (t.accum) b.accum = Tracked<Mat<A>>(uninitialized, t.name + n, MemCategory::activations, e.rows, e.cols);
    else b.value = Tracked<Mat<T>>(uninitialized, t.name + n, MemCategory::activations, e.rows, e.cols);
  }
  s.allocated = true;
  return s;
}

template <class T>
void ActivationStore<T>::bind(Family f, int l, LayerActivations<T>& a) {
  const auto& table = saved_tensors<T>();
  const Set& s = set(f, l);
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (family_of(i) != f) continue;
    if (table[i].accum) a.*table[i].accum = s.tensors[i].accum.view();
    else a.*table[i].value = s.tensors[i].value.view();
  }
}

template <class T>
Mat<T> ActivationStore<T>::x_view(int l) {
  LayerActivations<T> a;
  bind(Family::input, l, a);
  return a.x;
}

template <class T>
LayerActivations<T> ActivationStore<T>::views(int l) {
  LayerActivations<T> a;
  for (const Family f : kSavedFamilies) bind(f, l, a);
  bind(Family::input, l, a);
  a.local = shapes_.saved.local;
  if (a.local) a.o_kept = a.o;
  a.mlp_saved = plan_.mlp_saved;
  return a;
}

template <class T>
std::vector<typename ActivationStore<T>::CopyPair> ActivationStore<T>::copies(Family f, int l) {
  const auto& table = saved_tensors<T>();
  auto& h = host_.at(l);
  if (h.tensors.empty()) h.tensors.resize(table.size());
  const bool rows = f == Family::rows;  // the first host_rows token rows of each segment; the other families whole
  const bool grow = rows && h.rows < host_rows_;  // (grown if alpha grew)
  const Set& s = set(f, l);
  std::vector<CopyPair> pairs;
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (family_of(i) != f) continue;
    const auto& t = table[i];
    const Extent2 e = extent(t.width, shapes_);
    const std::int64_t segments = rows ? row_segments(e, shapes_) : 1;  // segment j: device rows [j n, j n + h)
    const std::size_t row_bytes = std::size_t(e.cols) * t.element_bytes(),
                      segment_rows = std::size_t(rows ? host_rows_ : e.rows);
    auto& hb = h.tensors[i];
    if (grow || (!rows && hb.bytes() == 0)) {
      const std::string label = std::string("host_") + t.name + std::to_string(l);
      const std::size_t elements = std::size_t(segments) * segment_rows * std::size_t(e.cols);
      if (t.accum) hb.accum = decltype(hb.accum)(uninitialized, label, MemCategory::host_offload, elements);
      else hb.value = decltype(hb.value)(uninitialized, label, MemCategory::host_offload, elements);
    }
    for (std::int64_t j = 0; j < segments; ++j)
      pairs.push_back({static_cast<char*>(s.tensors[i].data()) + std::size_t(j * shapes_.tokens) * row_bytes,
                       static_cast<char*>(hb.data()) + std::size_t(j) * segment_rows * row_bytes,
                       segment_rows * row_bytes});
  }
  if (grow) h.rows = host_rows_;
  return pairs;
}

template <class T>
CopyEngine::Ticket ActivationStore<T>::copy_all(const std::vector<CopyPair>& pairs, CopyEngine::Direction d) {
  CopyEngine::Ticket t = 0;
  const bool out = d == CopyEngine::Direction::to_host;
  for (const auto& p : pairs) t = std::max(t, copy(out ? p.host : p.device, out ? p.device : p.host, p.bytes, d));
  return t;
}

template <class T>
void ActivationStore<T>::release(Family f, int l) {
  auto& s = slot(f, l);
  if (engine_) engine_->order_compute_after(s.pending);  // ordered by backward_begin already: a safety net
  family(f).sets[std::size_t(index(f, l))] = Set();
  s = Slot();
}

// ---- forward ----

template <class T>
Mat<T> ActivationStore<T>::input(int l) {
  auto& s = slot(Family::input, l);
  if (s.layer != l) {  // the buffer changes hands: wait until the copy out of it is done
    if (engine_) block_on(s.pending, false);
    s = {l, true, 0};
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
  if (plan_.host && plan_.reused(Family::input, l, L_)) {  // x_l is complete: on its way to host
    timed_copies_out("activation store: x ready");
    slot(Family::input, l).pending = copy_all(copies(Family::input, l), CopyEngine::Direction::to_host);
  }
  for (const Family f : kSavedFamilies) {
    auto& s = slot(f, l);
    if (s.layer == l) continue;
    if (engine_) block_on(s.pending, false);  // the buffer changes hands once its copy out is done
    s = {l, true, 0};
  }
  return views(l);
}

template <class T>
void ActivationStore<T>::forward_end(int l) {
  for (const Family f : kSavedFamilies) {
    if (plan_.buffers(f) == 0) {  // transient: recomputed before the backward
      family(f).sets[0] = Set();
      family(f).slots[0] = Slot();
    } else if (plan_.host && plan_.reused(f, l, L_)) {
      const auto pairs = copies(f, l);
      if (pairs.empty()) continue;  // a family without tensors in this layout
      timed_copies_out("activation store: layer saved");
      slot(f, l).pending = copy_all(pairs, CopyEngine::Direction::to_host);
    }
  }
  if (l == L_ - 1 && time_forward_) {
    fence("activation store: forward done");
    forward_layer_seconds_ = std::max(0.0, forward_timer_.seconds() - forward_wait_seconds_) / L_;
  }
}

template <class T>
void ActivationStore<T>::head_end() {
  if (L_ < plan_.x_buffers) {  // no layer shares x_L's buffer
    family(Family::input).sets[std::size_t(index(Family::input, L_))] = Set();
    slot(Family::input, L_) = Slot();
  }
}

// ---- backward ----

template <class T>
void ActivationStore<T>::fetch(int l) {
  const auto in = CopyEngine::Direction::to_device;
  auto& xs = slot(Family::input, l);
  if (xs.layer != l) {  // x_l's buffer was reused: x_l is in host memory
    if (!plan_.host) throw std::logic_error("activation store: layer input lost without host memory");
    xs = {l, true, copy_all(copies(Family::input, l), in)};
  }
  for (const Family f : kSavedFamilies) {  // transient sets are recomputed, not fetched
    auto& s = slot(f, l);
    if (plan_.buffers(f) > 0 && s.layer != l)
      s = {l, f != Family::rows || host_rows_ == shapes_.tokens, copy_all(copies(f, l), in)};
  }
}

template <class T>
LayerActivations<T> ActivationStore<T>::backward_begin(int l, const LayerRecompute<T>& redo) {
  fetch(l);  // nothing to do when it was prefetched or never left
  if (engine_)
    for (const Family f : kFamilies) block_on(slot(f, l).pending, true);
  if (l > 0) fetch(l - 1);  // layer l-1 comes back while layer l's backward runs
  const auto a = views(l);
  if (plan_.recompute_attention()) {
    ScopedPhase phase(timers_, Phase::recompute);
    redo.attention_block(l, a);
    for (const Family f : kSavedFamilies) slot(f, l) = {l, true, 0};
    return a;
  }
  if (!a.local && plan_.kept_buffers == 0) {  // the strategy's layout again, from x and o (no attention)
    ScopedPhase phase(timers_, Phase::recompute);
    redo.kept_layout(l, a);
    slot(Family::kept, l) = {l, true, 0};
  }
  auto& rs = slot(Family::rows, l);
  if (plan_.row_buffers == 0 || !rs.complete) {  // transient rows: all of them; else those not fetched
    ScopedPhase phase(timers_, Phase::recompute);
    redo.token_rows(l, a, Range{plan_.row_buffers == 0 ? 0 : host_rows_, shapes_.tokens});
    rs = {l, true, 0};
  }
  return a;
}

template <class T>
void ActivationStore<T>::backward_end(int l) {
  for (const Family f : kSavedFamilies)
    if (plan_.buffers(f) == 0 || l < plan_.buffers(f)) release(f, l);
  if (l < plan_.x_buffers) release(Family::input, l);  // no lower layer shares it
}

template class ActivationStore<float>;
template class ActivationStore<double>;
template class ActivationStore<bf16>;

}  // namespace minilst
