// The model's parameters, and everything shaped like them (gradients, AdamW
// moments), as named tensors inside one flat allocation: the optimizer is one
// kernel, the gradient all-reduce one call, the dump one loop.
// Names and shapes follow the tensor dump (docs/metrics.md); W is [in, out] (y = x W).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/types.hpp"
#include "memory/tracker.hpp"
#include "core/config.hpp"

namespace minilst {

struct TensorSlot {
  std::string name;
  std::vector<std::size_t> shape;  // [n] or [rows, cols]
  std::size_t offset;              // elements from the start of the flat buffer
  std::size_t size() const { return shape.size() == 1 ? shape[0] : shape[0] * shape[1]; }
};

// The parameter list in dump order, with offsets into the flat buffer.
std::vector<TensorSlot> parameter_layout(const ModelConfig& cfg);
std::size_t parameter_count(const ModelConfig& cfg);

template <class T>
struct LayerWeights {
  Vec<T> attn_norm;               // [d]
  Mat<T> wq, wk, wv, wo;          // [d, H*h], [d, G*h], [d, G*h], [H*h, d]
  Vec<T> mlp_norm;                // [d]
  Mat<T> w_gate, w_up, w_down;    // [d, I], [d, I], [I, d]
};

template <class T>
class ParamSet {
 public:
  ParamSet(const ModelConfig& cfg, const std::string& label, MemCategory category);

  Mat<T> embed;                            // [V, d]
  std::vector<LayerWeights<T>> layers;     // L
  Vec<T> final_norm;                       // [d]
  Mat<T> lm_head;                          // [d, V]

  const Vec<T>& flat() const { return storage_.view(); }
  const std::vector<TensorSlot>& slots() const { return slots_; }
  void zero() const { Kokkos::deep_copy(ExecSpace(), storage_.view(), T(0)); }

 private:
  Tracked<Vec<T>> storage_;
  std::vector<TensorSlot> slots_;
};

// Seeded initialisation: normal(0, init_std) for matrices; norm weights are
// 1 + normal(0, norm_noise) (norm_noise = 0 gives the usual ones; verification
// decks perturb them so a dropped weight cannot go unnoticed). Each tensor draws
// from its own stream seeded by (seed, name): independent of layout and order.
template <class T>
void init_parameters(const ParamSet<T>& p, std::uint64_t seed, double init_std, double norm_noise);

}  // namespace minilst
