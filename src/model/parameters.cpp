#include "model/parameters.hpp"

#include <algorithm>

#include "kernels/bf16.hpp"

namespace minilst {

std::vector<TensorSlot> parameter_layout(const ModelConfig& c) { return parameter_layout(c, tensor_slice(c, 1, 0)); }

std::vector<TensorSlot> parameter_layout(const ModelConfig& c, const TensorSlice& t) {
  const std::size_t d = c.hidden, h = c.head_dim(), hq = std::size_t(c.heads) * h, hk = std::size_t(c.kv_heads) * h,
                    I = c.intermediate, V = c.vocab;
  std::vector<TensorSlot> slots;
  std::size_t offset = 0;
  // global: the model's shape; split along dim (-1: none) from begin, `width` of it held here
  auto add = [&](std::string name, std::vector<std::size_t> global, int dim = -1, std::size_t begin = 0,
                 std::size_t width = 0) {
    std::vector<std::size_t> shape = global;
    if (dim >= 0) shape[dim] = width;
    slots.push_back({std::move(name), std::move(shape), offset, std::move(global), dim, begin});
    offset += slots.back().size();
  };
  const std::size_t q0 = std::size_t(t.q_head0) * h, qn = std::size_t(t.q_heads) * h;
  const std::size_t k0 = std::size_t(t.kv_head0) * h, kn = std::size_t(t.kv_heads) * h;
  const bool split = t.ranks > 1;
  const int cols = split ? 1 : -1, rows = split ? 0 : -1;
  add("embed", {V, d}, rows, std::size_t(t.vocab0), std::size_t(t.vocab));
  for (int l = 0; l < c.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    add(p + "attn_norm", {d});
    add(p + "wq", {d, hq}, cols, q0, qn);
    add(p + "wk", {d, hk}, cols, k0, kn);
    add(p + "wv", {d, hk}, cols, k0, kn);
    add(p + "wo", {hq, d}, rows, q0, qn);
    add(p + "mlp_norm", {d});
    add(p + "w_gate", {d, I}, cols, std::size_t(t.intermediate0), std::size_t(t.intermediate));
    add(p + "w_up", {d, I}, cols, std::size_t(t.intermediate0), std::size_t(t.intermediate));
    add(p + "w_down", {I, d}, rows, std::size_t(t.intermediate0), std::size_t(t.intermediate));
  }
  add("final_norm", {d});
  add("lm_head", {d, V}, cols, std::size_t(t.vocab0), std::size_t(t.vocab));
  return slots;
}

std::size_t parameter_count(const ModelConfig& cfg) {
  const auto slots = parameter_layout(cfg);
  return slots.back().offset + slots.back().size();
}

namespace {
constexpr std::size_t kSlotsPerLayer = 9;  // attn_norm, wq, wk, wv, wo, mlp_norm, w_gate, w_up, w_down
}

int unit_of_slot(const ModelConfig& cfg, std::size_t slot) {
  if (slot == 0) return ShardLayout::embed_unit();
  const std::size_t layer = (slot - 1) / kSlotsPerLayer;
  return layer < std::size_t(cfg.layers) ? ShardLayout::layer_unit(int(layer)) : cfg.layers + 1;
}

ShardLayout shard_layout(const ModelConfig& cfg, int ranks, bool sharded) {
  ShardLayout sl;
  sl.ranks = sharded ? ranks : 1;
  const auto slots = parameter_layout(cfg);
  sl.units.resize(std::size_t(cfg.layers) + 2);
  for (auto& u : sl.units) u = {0, 0, 0, 0, 0};
  for (std::size_t i = 0; i < slots.size(); ++i) {
    auto& u = sl.units[unit_of_slot(cfg, i)];
    if (u.count == 0) u.begin = slots[i].offset;  // units are contiguous runs of slots
    u.count += slots[i].size();
  }
  const std::size_t P = std::size_t(sl.ranks), A = ShardLayout::kShardAlign;
  for (auto& u : sl.units) {
    u.shard = sharded ? (u.count + P - 1) / P : u.count;
    if (sharded) u.shard = (u.shard + A - 1) / A * A;
    u.padded_begin = sl.padded_total;
    u.shard_begin = sl.shard_total;
    sl.padded_total += P * u.shard;
    sl.shard_total += u.shard;
    sl.max_padded_unit = std::max(sl.max_padded_unit, P * u.shard);
    sl.max_shard = std::max(sl.max_shard, u.shard);
  }
  return sl;
}

std::vector<TensorSlot> parameter_layout(const ModelConfig& cfg, const ShardLayout& layout) {
  auto slots = parameter_layout(cfg);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const auto& u = layout.units[unit_of_slot(cfg, i)];
    slots[i].offset = u.padded_begin + (slots[i].offset - u.begin);
  }
  return slots;
}

template <class T>
void ParamViews<T>::point_unit(const ShardLayout& layout, const std::vector<TensorSlot>& slots, int unit,
                               T* unit_base) {
  const int L = int(layout.units.size()) - 2;
  const std::size_t begin = layout.units[unit].padded_begin;
  const auto vec = [&](std::size_t i) { return Vec<T>(unit_base + (slots[i].offset - begin), slots[i].shape[0]); };
  const auto mat = [&](std::size_t i) {
    return Mat<T>(unit_base + (slots[i].offset - begin), slots[i].shape[0], slots[i].shape[1]);
  };
  if (unit == ShardLayout::embed_unit()) {
    embed = mat(0);
  } else if (unit == layout.head_unit()) {
    final_norm = vec(slots.size() - 2);
    lm_head = mat(slots.size() - 1);
  } else {
    const std::size_t i = 1 + std::size_t(unit - 1) * kSlotsPerLayer;  // slots in LayerWeights' order
    if (layers.size() != std::size_t(L)) layers.resize(L);
    auto& w = layers[unit - 1];
    w.attn_norm = vec(i);
    w.wq = mat(i + 1);
    w.wk = mat(i + 2);
    w.wv = mat(i + 3);
    w.wo = mat(i + 4);
    w.mlp_norm = vec(i + 5);
    w.w_gate = mat(i + 6);
    w.w_up = mat(i + 7);
    w.w_down = mat(i + 8);
  }
}

template <class T>
ParamSet<T>::ParamSet(const ModelConfig& cfg, const std::string& label, MemCategory category)
    : ParamSet(cfg, shard_layout(cfg, 1, false), label, category) {}

template <class T>
ParamSet<T>::ParamSet(const ModelConfig& cfg, const ShardLayout& layout, const std::string& label,
                      MemCategory category)
    : storage_(label, category, layout.padded_total), slots_(parameter_layout(cfg, layout)) {
  T* base = storage_.view().data();
  if (base == nullptr) return;  // a replay's buffer (memory_context.hpp): a size, no tensors
  for (int u = 0; u < int(layout.units.size()); ++u)
    this->point_unit(layout, slots_, u, base + layout.units[u].padded_begin);
}

template struct ParamViews<float>;
template struct ParamViews<double>;
template struct ParamViews<bf16>;
template class ParamSet<float>;
template class ParamSet<double>;
template class ParamSet<bf16>;  // the weight copy of mixed precision (initialised from its fp32 master)

}  // namespace minilst
