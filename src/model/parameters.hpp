// The model's parameters, and everything shaped like them (gradients, AdamW
// moments), as named tensors inside one flat allocation: the optimizer is one
// kernel, the gradient all-reduce one call, the dump one loop.
// Names and shapes follow the tensor dump (docs/metrics.md); W is [in, out] (y = x W).
// Under ZeRO (model_states.hpp) the flat buffer is cut into units, each sharded
// over the ranks (ShardLayout), and a full buffer carries each unit's padding.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/types.hpp"
#include "memory/tracker.hpp"
#include "core/config.hpp"
#include "core/tensor_slice.hpp"

namespace minilst {

struct TensorSlot {
  std::string name;
  std::vector<std::size_t> shape;  // [n] or [rows, cols]: what this rank holds
  std::size_t offset;              // elements from the start of the flat buffer
  // Tensor parallelism: the model's tensor is global_shape; this rank holds its rows
  // (split_dim 0) or columns (1) [split_begin, split_begin + shape[split_dim]), or all of it
  // (split_dim -1: the norms, every tensor when T = 1).
  std::vector<std::size_t> global_shape = {};
  int split_dim = -1;
  std::size_t split_begin = 0;
  std::size_t size() const { return shape.size() == 1 ? shape[0] : shape[0] * shape[1]; }
};

// The parameter list in dump order, with offsets into the flat buffer.
std::vector<TensorSlot> parameter_layout(const ModelConfig& cfg);
// The same for one rank of a tensor-parallel group (core/tensor_slice.hpp): q, k, v, gate and up
// split by columns, o and down by rows, the embedding by rows and the LM head by columns of the
// vocabulary; kv heads replicated where T exceeds them. tensor_slice(cfg, 1, 0): the whole model.
std::vector<TensorSlot> parameter_layout(const ModelConfig& cfg, const TensorSlice& slice);
std::size_t parameter_count(const ModelConfig& cfg);

// The units the parameters are gathered and reduced in (ZeRO): the embedding, each
// layer, the head (final norm + LM head). Unit u of P ranks: its n_u elements cut
// into P shards of s_u = ceil(n_u / P) rounded up to kShardAlign elements (rank r
// holds [r s_u, (r+1) s_u) of the unit, the tail past n_u zero padding). A padded
// full buffer holds unit after unit, each P s_u long (so that a unit's gather and
// reduce-scatter are one collective of equal blocks); the shard buffer holds the
// rank's s_u of every unit, unit after unit. Unsharded (stage 0): P = 1, s_u = n_u.
struct ShardLayout {
  static constexpr std::size_t kShardAlign = 8;  // elements: 16-byte shards in bf16
  struct Unit {
    std::size_t begin, count;  // in the unpadded flat buffer
    std::size_t shard;         // s_u
    std::size_t padded_begin;  // in a padded full buffer (P s_u long)
    std::size_t shard_begin;   // in the shard buffer
  };
  int ranks = 1;
  std::vector<Unit> units;  // embed, layers 0 .. L-1, head
  std::size_t padded_total = 0, shard_total = 0, max_padded_unit = 0, max_shard = 0;
  std::size_t padded_size(int u) const { return std::size_t(ranks) * units[u].shard; }
  static int embed_unit() { return 0; }
  static int layer_unit(int l) { return 1 + l; }
  int head_unit() const { return int(units.size()) - 1; }
};
// sharded = false: one unpadded unit set over 1 rank (the replicated layout).
ShardLayout shard_layout(const ModelConfig& cfg, int ranks, bool sharded);
// The unit holding parameter slot i of parameter_layout (dump order).
int unit_of_slot(const ModelConfig& cfg, std::size_t slot);

template <class T>
struct LayerWeights {
  Vec<T> attn_norm;               // [d]
  Mat<T> wq, wk, wv, wo;          // [d, H*h], [d, G*h], [d, G*h], [H*h, d]
  Vec<T> mlp_norm;                // [d]
  Mat<T> w_gate, w_up, w_down;    // [d, I], [d, I], [I, d]
};

// The named tensors, without storage: what the kernels read and write.
template <class T>
struct ParamViews {
  Mat<T> embed;                            // [V, d]
  std::vector<LayerWeights<T>> layers;     // L
  Vec<T> final_norm;                       // [d]
  Mat<T> lm_head;                          // [d, V]

  // Points unit u's tensors into `unit_base`, the start of a buffer laid out as
  // that unit in a padded full buffer (slots: parameter_layout(cfg, layout)).
  void point_unit(const ShardLayout& layout, const std::vector<TensorSlot>& slots, int unit, T* unit_base);
};

// slots with their offsets in a full buffer of this layout (padding between units).
std::vector<TensorSlot> parameter_layout(const ModelConfig& cfg, const ShardLayout& layout);

template <class T>
class ParamSet : public ParamViews<T> {
 public:
  ParamSet(const ModelConfig& cfg, const std::string& label, MemCategory category);
  // A padded full buffer of `layout` (ZeRO stages 1 and 2: params, grads).
  ParamSet(const ModelConfig& cfg, const ShardLayout& layout, const std::string& label, MemCategory category);

  const Vec<T>& flat() const { return storage_.view(); }
  const std::vector<TensorSlot>& slots() const { return slots_; }
  void zero() const { Kokkos::deep_copy(ExecSpace(), storage_.view(), T(0)); }

 private:
  Tracked<Vec<T>> storage_;
  std::vector<TensorSlot> slots_;
};

}  // namespace minilst
