#include "model/model_states.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>

#include "core/host_threads.hpp"
#include "kernels/bf16.hpp"
#include "memory/make_copy_engine.hpp"

namespace minilst {

std::vector<int> unit_acquire_order(int L) {
  std::vector<int> order;
  for (int u = 0; u <= L + 1; ++u) order.push_back(u);  // embedding, layers, head
  for (int l = L - 1; l >= 0; --l) order.push_back(ShardLayout::layer_unit(l));
  return order;
}

std::vector<int> unit_gather_order(int L, bool first_micro_step) {
  auto order = unit_acquire_order(L);
  order.erase(order.begin() + (L + 2));  // the last layer: still in its buffer after the head
  if (!first_micro_step) order.erase(order.begin() + 1);  // the first layer: still there from the backward
  return order;
}

// Initial values: each tensor in chunks of kInitChunk elements, each from its own stream.
constexpr std::size_t kInitChunk = std::size_t(1) << 25;

std::size_t initial_chunks(const TensorSlot& slot) {
  const auto& g = slot.global_shape.empty() ? slot.shape : slot.global_shape;
  const std::size_t n = g.size() == 1 ? g[0] : g[0] * g[1];
  return (n + kInitChunk - 1) / kInitChunk;
}

template <class M>
void draw_initial_chunk(const TensorSlot& slot, std::size_t chunk, const TrainOptions& init, M* dst) {
  const auto& g = slot.global_shape.empty() ? slot.shape : slot.global_shape;
  const std::size_t n = g.size() == 1 ? g[0] : g[0] * g[1], cols = g.size() == 2 ? g[1] : 1;
  const std::uint64_t tensor_seed = init.seed ^ (std::hash<std::string>{}(slot.name) * 0x9E3779B97F4A7C15ull);
  std::mt19937_64 rng(chunk == 0 ? tensor_seed : tensor_seed ^ (chunk * 0xD1B54A32D192ED03ull));
  const bool is_norm = slot.shape.size() == 1;
  const auto ends_with = [&](const char* tail) {
    const std::string t = tail;
    return slot.name.size() >= t.size() && slot.name.compare(slot.name.size() - t.size(), t.size(), t) == 0;
  };
  const bool qk = ends_with("wq") || ends_with("wk");
  const double sd = is_norm ? init.norm_init_noise : qk && init.init_std_qk > 0 ? init.init_std_qk : init.init_std;
  std::normal_distribution<double> normal(0.0, sd);
  const std::size_t k0 = chunk * kInitChunk, k1 = std::min(n, k0 + kInitChunk);
  const std::size_t b = slot.split_begin, w = slot.split_dim < 0 ? 0 : slot.shape[slot.split_dim];
  for (std::size_t k = k0; k < k1; ++k) {
    const double noise = (is_norm && sd == 0.0) ? 0.0 : normal(rng);
    const std::size_t row = k / cols, col = k % cols;
    if (slot.split_dim < 0) dst[k] = M(is_norm ? 1.0 + noise : noise);
    else if (slot.split_dim == 0 && row >= b && row < b + w) dst[(row - b) * cols + col] = M(noise);
    else if (slot.split_dim == 1 && col >= b && col < b + w) dst[row * w + (col - b)] = M(noise);
  }
}
template void draw_initial_chunk<float>(const TensorSlot&, std::size_t, const TrainOptions&, float*);
template void draw_initial_chunk<double>(const TensorSlot&, std::size_t, const TrainOptions&, double*);

namespace {
using HostExec = Kokkos::DefaultHostExecutionSpace;
using Index = Kokkos::IndexType<std::int64_t>;

template <class V>
auto part(const V& v, std::size_t begin, std::size_t n) {
  return Kokkos::subview(v, Kokkos::make_pair(begin, begin + n));
}

// Unit u's initial values, in a padded unit's layout (P s_u elements, zero past the
// unit's parameters; draw_initial_chunk gives the values), its tensors' chunks drawn on all
// of the rank's cores (a Llama-3-8B embedding: 16 chunks).
template <class M>
std::vector<M> initial_unit(const ShardLayout& layout, const std::vector<TensorSlot>& slots, const ModelConfig& cfg,
                            int u, const TrainOptions& init) {
  std::vector<M> out(layout.padded_size(u), M(0));
  const std::size_t begin = layout.units[u].padded_begin;
  struct Chunk {
    std::size_t slot, index;
  };
  std::vector<Chunk> chunks;
  for (std::size_t i = 0; i < slots.size(); ++i)
    if (unit_of_slot(cfg, i) == u)
      for (std::size_t c = 0; c < initial_chunks(slots[i]); ++c) chunks.push_back({i, c});
  on_host_cores(chunks.size(), [&](std::size_t c) {
    const auto& slot = slots[chunks[c].slot];
    draw_initial_chunk(slot, chunks[c].index, init, out.data() + (slot.offset - begin));
  });
  return out;
}

// acc += add, on the device.
template <class V>
void add_into(const V& acc, const V& add) {
  Kokkos::parallel_for("grad_shard_add", Kokkos::RangePolicy<ExecSpace, Index>(0, acc.extent(0)),
                       KOKKOS_LAMBDA(const std::int64_t i) { acc(i) += add(i); });
}

// sum_i g(i)^2 in blocks of 4096 elements, each summed in a vectorised loop, the blocks in double.
template <class Space, class V>
double square_sum(const Space& space, const V& g) {
  using M = typename V::non_const_value_type;
  const std::int64_t n = std::int64_t(g.extent(0)), block = 4096;
  double sum = 0;
  Kokkos::parallel_reduce("grad_norm", Kokkos::RangePolicy<Space, Index>(space, 0, (n + block - 1) / block),
      KOKKOS_LAMBDA(const std::int64_t b, double& acc) {
        const std::int64_t i0 = b * block, i1 = i0 + block < n ? i0 + block : n;
        const M* gp = g.data();
        M s = 0;
#ifdef MINILST_HOST_SIMD
#pragma omp simd reduction(+ : s)
#endif
        for (std::int64_t i = i0; i < i1; ++i) s += gp[i] * gp[i];
        acc += double(s);
      }, sum);
  return sum;
}

// dst (any memory) := src[0, n) converted to dst's type.
template <class V, class S>
void copy_from_host(const V& dst, const S* src) {
  using D = typename V::non_const_value_type;
  std::vector<D> converted(dst.extent(0));
  for (std::size_t i = 0; i < converted.size(); ++i) converted[i] = D(src[i]);
  Kokkos::deep_copy(dst, Kokkos::View<const D*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(converted.data(),
                                                                                            converted.size()));
}
}  // namespace

template <class T>
ModelStates<T>::ModelStates(const ModelConfig& model, const ZeroOptions& zero, const TrainOptions& init,
                            Communicator* world, PhaseTimers* timers, const TensorGroup& tp)
    : model_(model), cfg_(tp.split() ? local_model(model, tp.slice()) : model), tp_(tp), zero_(zero), world_(world),
      timers_(timers), layout_(shard_layout(cfg_, zero.ranks, zero.stage > 0)), slots_(parameter_layout(cfg_, layout_)),
      order_(unit_acquire_order(cfg_.layers)) {
  const ModelConfig& cfg = cfg_;
  if (tp_.split()) {  // the model's shapes and this rank's part of each: its initial values
    const auto split = parameter_layout(model_, tp_.slice());
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      slots_[i].global_shape = split[i].global_shape;
      slots_[i].split_dim = split[i].split_dim;
      slots_[i].split_begin = split[i].split_begin;
    }
  }
  if (zero_.stage < 0 || zero_.stage > 3) throw std::invalid_argument("ModelStates: ZeRO stage must be 0 to 3");
  if (!world_ && zero_.stage > 0 && zero_.ranks > 1 && !counting_only())
    throw std::invalid_argument("ModelStates: sharding over several ranks needs their communicator");
  if (world_ && zero_.stage > 0 && world_->size() != zero_.ranks)
    throw std::invalid_argument("ModelStates: the communicator's size differs from the sharding's rank count");
  if (zero_.stage > 0 && world_) rank_ = world_->rank();
  const std::size_t n = layout_.shard_total, B = layout_.max_padded_unit;
  // The weights the kernels read.
  if (zero_.stage <= 2) params_.emplace(cfg, layout_, "params", MemCategory::weights);
  else param_shard_ = Tracked<Vec<T>>("params", MemCategory::weights, n);
  // Their gradients.
  if (zero_.stage <= 1) grads_.emplace(cfg, layout_, "grads", MemCategory::gradients);
  else if (!zero_.optimizer_offload) grad_shard_ = Tracked<Vec<M>>("grads", MemCategory::gradients, n);
  // The optimizer's states.
  if (zero_.optimizer_offload) {
    const auto host = MemCategory::host_optimizer;
    host_grads_ = Tracked<HostVec>("host_grads", host, n);
    host_master_ = Tracked<HostVec>("host_master_weights", host, n);
    host_m_ = Tracked<HostVec>("host_adam_m", host, n);
    host_v_ = Tracked<HostVec>("host_adam_v", host, n);
    host_outgoing_ = Tracked<Kokkos::View<T*, compat::HostPinnedSpace>>(uninitialized, "host_weights_outgoing",
                                                                         host, n);
  } else {
    adam_m_ = Tracked<Vec<M>>("adam_m", MemCategory::optimizer, n);
    adam_v_ = Tracked<Vec<M>>("adam_v", MemCategory::optimizer, n);
    if (kMixed) master_ = Tracked<Vec<M>>("master_weights", MemCategory::optimizer, n);
  }
  // Stage 3's gathered units; stage 2's and 3's gradient buckets.
  if (zero_.stage == 3)
    for (auto& g : gathered_) g.buffer = Tracked<Vec<T>>(uninitialized, "weights_gathered", MemCategory::weights, B);
  if (zero_.stage >= 2) {
    for (auto& b : buckets_) {
      b.grads = Tracked<Vec<M>>(uninitialized, "grad_bucket", MemCategory::gradients, B);
      if (zero_.ranks > 1)  // one rank: the bucket is its own sum
        b.recv = Tracked<Vec<M>>(uninitialized, "grad_reduced", MemCategory::comm, layout_.max_shard);
      if (zero_.optimizer_offload)
        b.incoming = Tracked<Kokkos::View<M*, compat::HostPinnedSpace>>(uninitialized, "host_grads_incoming",
                                                                         MemCategory::host_optimizer, layout_.max_shard);
    }
    if (zero_.optimizer_offload && !counting_only()) engine_ = make_copy_engine(0.0);
  }
  if ((zero_.stage >= 2 && zero_.ranks > 1) || tp_.split()) norm_ = Tracked<Vec<double>>("grad_norm", MemCategory::comm, 1);
  if (tp_.split()) {  // the replicated gradients' sums: the whole buffer's at stages 0, 1, a unit's at 2, 3
    std::size_t most = 0;
    for (int u = zero_.stage >= 2 ? 0 : -1; u < (zero_.stage >= 2 ? int(layout_.units.size()) : 0); ++u) {
      const auto rep = replicated(u, 0);
      most = std::max(most, tp_.replicated_scratch(rep.norms, rep.kv));
    }
    if (most > 0) tp_scratch_ = Tracked<Vec<M>>(uninitialized, "tp_grad_sum", MemCategory::comm, most);
  }
  if (!counting_only()) initialise(init);
}

template <class T>
typename ModelStates<T>::Replicated ModelStates<T>::replicated(int u, std::size_t base) const {
  Replicated r;
  if (!tp_.split()) return r;
  const auto ends_with = [](const std::string& name, const char* tail) {
    const std::size_t n = std::char_traits<char>::length(tail);
    return name.size() >= n && name.compare(name.size() - n, n, tail) == 0;
  };
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (u >= 0 && unit_of_slot(cfg_, i) != u) continue;
    const auto& slot = slots_[i];
    const TensorGroup::Span span{slot.offset - base, slot.size()};
    if (slot.shape.size() == 1) r.norms.push_back(span);
    else if (tp_.slice().kv_copies > 1 && (ends_with(slot.name, ".wk") || ends_with(slot.name, ".wv"))) r.kv.push_back(span);
  }
  return r;
}

template <class T>
typename ModelStates<T>::Span ModelStates<T>::span(int u) const {
  const auto& unit = layout_.units[u];
  return {unit.shard_begin, unit.shard, unit.padded_begin + std::size_t(rank_) * unit.shard};
}

template <class T>
void ModelStates<T>::initialise(const TrainOptions& init) {
  // Every rank draws each unit whole (the streams are per tensor, so the values do not
  // depend on the layout) and keeps what it holds: the weights whole or its shard, the
  // master's shard. Drawn in the master's type and rounded, as a bf16 copy of the master is.
  for (int u = 0; u < int(layout_.units.size()); ++u) {
    const auto values = initial_unit<M>(layout_, slots_, cfg_, u, init);
    const Span s = span(u);
    const M* mine = values.data() + (s.full - layout_.units[u].padded_begin);  // this rank's shard of the unit
    if (params_) copy_from_host(part(params_->flat(), layout_.units[u].padded_begin, values.size()), values.data());
    else copy_from_host(part(param_shard_.view(), s.shard, s.count), mine);
    if (zero_.optimizer_offload) copy_from_host(part(host_master_.view(), s.shard, s.count), mine);
    else if (kMixed) copy_from_host(part(master_.view(), s.shard, s.count), mine);
  }
}

// ---- a micro-step's access --------------------------------------------------------

template <class T>
const ParamViews<T>& ModelStates<T>::acquire(int unit) {
  if (zero_.stage < 3) return *params_;
  if (cursor_ >= order_.size()) cursor_ = 0;  // a new micro-step
  if (order_[cursor_] != unit)
    throw std::logic_error("ModelStates::acquire: unit " + std::to_string(unit) + " out of order (expected " +
                           std::to_string(order_[cursor_]) + "): every rank must acquire the units in one order");
  Gathered* mine = gathered_[0].unit == unit ? &gathered_[0] : gathered_[1].unit == unit ? &gathered_[1] : nullptr;
  if (!mine) {  // not prefetched: gather it now into a free buffer, keeping the next unit if it is there
    const int next = cursor_ + 1 < order_.size() ? order_[cursor_ + 1] : -1;
    mine = gathered_[0].in_use || gathered_[0].unit == next ? &gathered_[1] : &gathered_[0];
    if (mine->in_use) throw std::logic_error("ModelStates::acquire: a unit was not released");
    post_gather(*mine, unit);
  }
  wait_gather(*mine);
  mine->in_use = true;
  gathered_views_.point_unit(layout_, slots_, unit, mine->buffer.view().data());
  ++cursor_;
  if (cursor_ < order_.size()) {  // prefetch the next unit into the other buffer, unless it is there already
    const int next = order_[cursor_];
    Gathered& other = mine == &gathered_[0] ? gathered_[1] : gathered_[0];
    if (other.unit != next) {
      if (other.in_use) throw std::logic_error("ModelStates::acquire: a unit was not released");
      post_gather(other, next);
    }
  }
  return gathered_views_;
}

template <class T>
void ModelStates<T>::release(int unit) {
  for (auto& g : gathered_)
    if (g.unit == unit) g.in_use = false;
}

template <class T>
void ModelStates<T>::post_gather(Gathered& g, int unit) {
  ScopedPhase phase(timers_, Phase::param_gather);
  g.unit = unit;
  const Span s = span(unit);
  const T* send = param_shard_.view().data() + s.shard;
  if (world_ && zero_.ranks > 1) {
    compat::fence("gather buffer free");  // the unit that used it last has finished reading it
    g.request = world_->iallgather(send, g.buffer.view().data(), s.count, dtype_of<T>(), CommOp::allgather);
    g.posted = clock_.seconds();
  } else {
    Kokkos::deep_copy(ExecSpace(), part(g.buffer.view(), 0, s.count), part(param_shard_.view(), s.shard, s.count));
  }
}

template <class T>
void ModelStates<T>::wait_gather(Gathered& g) {
  if (g.request) wait(g.request, g.posted, Phase::param_gather, Phase::param_gather_overlap);
}

template <class T>
void ModelStates<T>::wait(RequestPtr& request, double posted, Phase exposed, Phase window) {
  if (timers_) timers_->add(window, clock_.seconds() - posted);  // the time it had while the rank computed
  ScopedPhase phase(timers_, exposed);
  world_->wait(request);
}

template <class T>
const ParamViews<master_t<T>>& ModelStates<T>::gradients(int unit) {
  if (zero_.stage < 2) return *grads_;
  Bucket& b = buckets_[next_bucket_];
  next_bucket_ = 1 - next_bucket_;
  drain(b);  // its previous unit's reduce-scatter
  if (zero_.ranks == 1) land(b);  // one rank: the copy to the host reads the bucket itself
  b.unit = unit;
  Kokkos::deep_copy(ExecSpace(), part(b.grads.view(), 0, layout_.padded_size(unit)), M(0));
  bucket_views_.point_unit(layout_, slots_, unit, b.grads.view().data());
  return bucket_views_;
}

template <class T>
void ModelStates<T>::gradients_done(int unit) {
  if (zero_.stage < 2) return;
  Bucket& b = buckets_[1 - next_bucket_];  // the bucket gradients() handed out last
  if (b.unit != unit) throw std::logic_error("ModelStates::gradients_done: not the unit being computed");
  const std::size_t s = layout_.units[unit].shard;
  land(b);  // its receive buffer is free again (offload)
  if (tp_.split()) {
    const auto rep = replicated(unit, layout_.units[unit].padded_begin);
    tp_.sum_replicated(b.grads.view(), rep.norms, rep.kv, tp_scratch_.view());
  }
  if (world_ && zero_.ranks > 1) {
    ScopedPhase phase(timers_, Phase::grad_reduce);  // fences: the bucket is complete
    compat::fence("gradient bucket ready");
    b.request = world_->ireduce_scatter_sum(b.grads.view().data(), b.recv.view().data(), s, dtype_of<M>(),
                                            CommOp::reduce_scatter);
    b.posted = clock_.seconds();
  }
}

template <class T>
void ModelStates<T>::drain(Bucket& b) {
  if (b.unit < 0) return;
  if (b.request) wait(b.request, b.posted, Phase::grad_reduce, Phase::grad_reduce_overlap);
  const Span s = span(b.unit);
  const auto recv = part(zero_.ranks > 1 ? b.recv.view() : b.grads.view(), 0, s.count);
  if (zero_.optimizer_offload) {  // to the host as it is produced (the copy engine), added there by land()
    land(b);
    // The engine orders the copy after the compute (and the reduce-scatter waited above) that produced recv.
    b.copy = engine_->submit(b.incoming.view().data(), recv.data(), s.count * sizeof(M), CopyEngine::Direction::to_host);
    b.copied_unit = b.unit;
  } else {
    add_into(part(grad_shard_.view(), s.shard, s.count), recv);
  }
  b.unit = -1;
}

template <class T>
void ModelStates<T>::land(Bucket& b) {
  if (b.copied_unit < 0) return;
  engine_->wait(b.copy);  // on the host: the host adds it
  const Span s = span(b.copied_unit);
  const auto in = part(b.incoming.view(), 0, s.count);
  const auto acc = part(host_grads_.view(), s.shard, s.count);
  Kokkos::parallel_for("grad_shard_add_host", Kokkos::RangePolicy<HostExec, Index>(0, s.count),
                       [=](const std::int64_t i) { acc(i) += in(i); });
  HostExec().fence();
  b.copied_unit = -1;
}

template <class T>
void ModelStates<T>::progress() {
  if (!world_) return;
  for (auto& g : gathered_)
    if (g.request) world_->test(g.request);
  for (auto& b : buckets_)
    if (b.request) world_->test(b.request);
}

// ---- the step -----------------------------------------------------------------------

template <class T>
void ModelStates<T>::zero_gradients() {
  if (grads_) grads_->zero();
  else if (zero_.optimizer_offload) Kokkos::deep_copy(host_grads_.view(), M(0));
  else Kokkos::deep_copy(ExecSpace(), grad_shard_.view(), M(0));
  cursor_ = 0;
}

template <class T>
void ModelStates<T>::reduce_gradients() {
  if (zero_.stage >= 2) {
    for (Bucket* b : {&buckets_[next_bucket_], &buckets_[1 - next_bucket_]}) drain(*b);  // the older one first
    for (Bucket* b : {&buckets_[next_bucket_], &buckets_[1 - next_bucket_]}) land(*b);
    return;
  }
  if (tp_.split()) {
    const auto rep = replicated(-1, 0);
    tp_.sum_replicated(grads_->flat(), rep.norms, rep.kv, tp_scratch_.view());
  }
  if (world_ && world_->size() > 1) {
    ScopedPhase phase(timers_, Phase::grad_reduce);
    compat::fence("gradients ready");
    world_->allreduce_sum(grads_->flat().data(), grads_->flat().extent(0), dtype_of<M>(), CommOp::allreduce);
  }
  if (zero_.optimizer_offload) gradients_to_host();
}

template <class T>
void ModelStates<T>::gradients_to_host() {  // stages 0, 1: the rank's shard of the whole gradient
  for (int u = 0; u < int(layout_.units.size()); ++u) {
    const Span s = span(u);
    Kokkos::deep_copy(part(host_grads_.view(), s.shard, s.count), part(grads_->flat(), s.full, s.count));
  }
}

template <class T>
double ModelStates<T>::grad_norm() {
  // This rank's sum of squares; under tensor parallelism a tensor that c ranks of the group
  // hold alike counts 1/c here, so that the group's sum counts it once.
  const auto weighted = [&](auto space, const auto& g, auto where) {
    double sum = square_sum(space, g);
    const auto rep = replicated(-1, 0);
    for (const auto* spans : {&rep.norms, &rep.kv}) {
      const double copies = spans == &rep.norms ? tp_.size() : tp_.slice().kv_copies;
      for (const auto& sp : *spans)
        for (const auto& [begin, count] : where(sp))
          sum -= (1.0 - 1.0 / copies) * square_sum(space, part(g, begin, count));
    }
    return sum;
  };
  double sum = 0;
  if (grads_) {  // whole on every rank
    sum = weighted(ExecSpace(), grads_->flat(), [](const TensorGroup::Span& sp) {
      return std::vector<std::pair<std::size_t, std::size_t>>{{sp.begin, sp.count}};
    });
  } else {
    const auto in_shard = [&](const TensorGroup::Span& sp) {  // the span's elements in this rank's shards
      std::vector<std::pair<std::size_t, std::size_t>> out;
      for (const auto& u : layout_.units) {
        const std::size_t b0 = u.padded_begin + std::size_t(rank_) * u.shard, b1 = b0 + u.shard;
        const std::size_t lo = std::max(b0, sp.begin), hi = std::min(b1, sp.begin + sp.count);
        if (lo < hi) out.push_back({u.shard_begin + (lo - b0), hi - lo});
      }
      return out;
    };
    sum = zero_.optimizer_offload ? weighted(HostExec(), host_grads_.view(), in_shard)
                                  : weighted(ExecSpace(), grad_shard_.view(), in_shard);
    if (world_ && zero_.ranks > 1) {  // the shards' sums, over the ranks
      Kokkos::deep_copy(norm_.view(), sum);
      world_->allreduce_sum(norm_.view().data(), 1, dtype_of<double>(), CommOp::grad_norm);
      auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), norm_.view());
      sum = h(0);
    }
  }
  if (tp_.split()) sum = tp_.sum(sum, norm_.view());
  return std::sqrt(sum);
}

template <class T>
void ModelStates<T>::apply_optimizer(const kernels::AdamWHyper& hp, long step) {
  {
    ScopedPhase phase(timers_, Phase::optimizer);
    if (zero_.optimizer_offload) {  // on host threads, then the updated weights back to the device
      kernels::adamw_update_on(HostExec(), host_master_.view(), host_grads_.view(), host_m_.view(), host_v_.view(),
                               step, hp, host_outgoing_.view());
      HostExec().fence();
      for (int u = 0; u < int(layout_.units.size()); ++u) {
        const Span s = span(u);
        const auto out = part(host_outgoing_.view(), s.shard, s.count);
        if (params_) Kokkos::deep_copy(part(params_->flat(), s.full, s.count), out);
        else Kokkos::deep_copy(part(param_shard_.view(), s.shard, s.count), out);
      }
    } else if (zero_.stage == 0) {  // everything whole: one kernel
      const Vec<M> g = grads_->flat();
      if constexpr (kMixed) kernels::adamw_update_on(ExecSpace(), master_.view(), g, adam_m_.view(), adam_v_.view(), step, hp, params_->flat());
      else kernels::adamw_update_on(ExecSpace(), params_->flat(), g, adam_m_.view(), adam_v_.view(), step, hp, Vec<T>());
    } else {  // the rank's shard of every unit
      for (int u = 0; u < int(layout_.units.size()); ++u) {
        const Span s = span(u);
        const auto g = grads_ ? part(grads_->flat(), s.full, s.count) : part(grad_shard_.view(), s.shard, s.count);
        const auto m = part(adam_m_.view(), s.shard, s.count), v = part(adam_v_.view(), s.shard, s.count);
        const auto w = params_ ? part(params_->flat(), s.full, s.count) : part(param_shard_.view(), s.shard, s.count);
        if constexpr (kMixed) kernels::adamw_update_on(ExecSpace(), part(master_.view(), s.shard, s.count), g, m, v, step, hp, w);
        else kernels::adamw_update_on(ExecSpace(), w, g, m, v, step, hp, Vec<T>());
      }
    }
  }
  if (zero_.stage == 1 || zero_.stage == 2) gather_weights_after_update();
  for (auto& g : gathered_) g.unit = -1;  // stage 3: every gathered unit is stale now
}

template <class T>
void ModelStates<T>::gather_weights_after_update() {  // stages 1, 2: every unit, in place
  if (!world_ || zero_.ranks < 2) return;
  ScopedPhase comm(timers_, Phase::comm);  // step-level communication, as the gradient's reduction
  ScopedPhase phase(timers_, Phase::param_gather);
  compat::fence("weights updated");
  std::vector<RequestPtr> requests;
  for (int u = 0; u < int(layout_.units.size()); ++u) {
    const Span s = span(u);
    T* unit = params_->flat().data() + layout_.units[u].padded_begin;
    requests.push_back(world_->iallgather(unit + (s.full - layout_.units[u].padded_begin), unit, s.count,
                                          dtype_of<T>(), CommOp::allgather));
  }
  for (auto& r : requests) world_->wait(r);
}

// ---- whole buffers ------------------------------------------------------------------

template <class T>
template <class V>
std::vector<double> ModelStates<T>::unpad(const V& full) const {
  const auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), full);
  std::vector<double> out;
  out.reserve(parameter_count(cfg_));
  for (const auto& u : layout_.units)
    for (std::size_t i = 0; i < u.count; ++i) out.push_back(double(h(u.padded_begin + i)));
  return out;
}

template <class T>
template <class V>
std::vector<double> ModelStates<T>::gather_shards(const V& shard, std::size_t max_piece) {
  using E = typename V::non_const_value_type;
  if (layout_.ranks == 1) return unpad(shard);  // unsharded: the shard is the whole
  // A diagnostic outside the step (the tensor dump, tests): the shards travel in pieces
  // of at most max_piece elements per rank, through a small staging buffer that the
  // memory model does not count (P x 1 Mi elements by default).
  const std::size_t P = std::size_t(layout_.ranks), piece = std::max<std::size_t>(1, std::min(max_piece, layout_.max_shard));
  std::vector<double> out(parameter_count(cfg_));
  Vec<E> staging("dump_staging", P * piece);
  for (int u = 0; u < int(layout_.units.size()); ++u) {
    const auto& unit = layout_.units[u];
    for (std::size_t k = 0; k < unit.shard; k += piece) {
      const std::size_t n = std::min(piece, unit.shard - k);  // the same on every rank
      Kokkos::deep_copy(part(staging, std::size_t(rank_) * n, n), part(shard, unit.shard_begin + k, n));
      compat::fence("shard staged");
      auto request =
          world_->iallgather(staging.data() + std::size_t(rank_) * n, staging.data(), n, dtype_of<E>(), CommOp::tensor_dump);
      world_->wait(request);
      const auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), part(staging, 0, P * n));
      for (std::size_t r = 0; r < P; ++r)  // rank r's elements k .. k+n of its shard of the unit
        for (std::size_t i = 0; i < n; ++i) {
          const std::size_t in_unit = r * unit.shard + k + i;
          if (in_unit < unit.count) out[unit.begin + in_unit] = double(h(r * n + i));
        }
    }
  }
  return out;
}

template <class T>
std::vector<double> ModelStates<T>::whole_model(std::vector<double> mine) const {
  if (!tp_.split()) return mine;
  const std::size_t n = mine.size();
  const auto all = tp_.gather_host(mine);  // [T n]: every rank's slice in rank order
  const auto whole = parameter_layout(model_);
  std::vector<double> out(parameter_count(model_));
  for (int t = 0; t < tp_.size(); ++t) {
    const auto slots = parameter_layout(model_, tensor_slice(model_, tp_.size(), t));  // (local offsets)
    for (std::size_t i = 0; i < slots.size(); ++i) {
      const auto& s = slots[i];
      const double* src = all.data() + std::size_t(t) * n + s.offset;
      double* dst = out.data() + whole[i].offset;
      const std::size_t rows = s.shape[0], cols = s.shape.size() == 2 ? s.shape[1] : 1;
      const std::size_t gcols = s.global_shape.size() == 2 ? s.global_shape[1] : 1;
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < cols; ++c) {
          const std::size_t gr = s.split_dim == 0 ? s.split_begin + r : r, gc = s.split_dim == 1 ? s.split_begin + c : c;
          dst[gr * gcols + gc] = src[r * cols + c];
        }
    }
  }
  return out;
}

template <class T>
std::vector<double> ModelStates<T>::gathered_weights(std::size_t piece) {
  if (zero_.optimizer_offload) return whole_model(gather_shards(host_master_.view(), piece));
  if constexpr (kMixed) return whole_model(gather_shards(master_.view(), piece));
  return whole_model(params_ ? unpad(params_->flat()) : gather_shards(param_shard_.view(), piece));
}

template <class T>
std::vector<double> ModelStates<T>::gathered_gradients(std::size_t piece) {
  if (grads_) return whole_model(unpad(grads_->flat()));
  return whole_model(zero_.optimizer_offload ? gather_shards(host_grads_.view(), piece)
                                             : gather_shards(grad_shard_.view(), piece));
}

template <class T>
const ParamSet<T>& ModelStates<T>::params() const {
  if (!params_) throw std::logic_error("ModelStates::params: ZeRO stage 3 keeps no whole weights");
  return *params_;
}

template <class T>
const ParamSet<master_t<T>>& ModelStates<T>::grads() const {
  if (!grads_) throw std::logic_error("ModelStates::grads: ZeRO stages 2 and 3 keep no whole gradient");
  return *grads_;
}

template class ModelStates<float>;
template class ModelStates<double>;
template class ModelStates<bf16>;

}  // namespace minilst
