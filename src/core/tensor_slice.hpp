// What one rank of a T-way tensor-parallel group holds of the model (Megatron's layout):
//   query heads  H/T consecutive heads from t H/T: the columns of Wq, the rows of Wo
//   kv heads     G/T consecutive heads from t G/T where T divides G; where G divides T the
//                one kv head its query heads read (head t G/T, rounded down): replicated on
//                T/G ranks, whose gradients of Wk, Wv are partial and summed over them
//   MLP          I/T consecutive columns of Wg and Wu from t I/T, the same rows of Wd
//   vocabulary   V/T consecutive rows of the embedding and columns of the LM head from t V/T
// Rank t of T; T = 1 holds everything.
#pragma once

#include <cstdint>
#include <string>

#include "core/config.hpp"

namespace minilst {

struct TensorSlice {
  int ranks = 1, rank = 0;                // T, t
  int q_heads = 0, q_head0 = 0;           // H/T from t H/T
  int kv_heads = 0, kv_head0 = 0;         // G/T from t G/T, or 1 (replicated)
  int kv_copies = 1;                      // the ranks holding each kv head (T/G when replicated)
  int intermediate = 0, intermediate0 = 0;
  int vocab = 0, vocab0 = 0;
};

// Empty when T ranks can split `model`; otherwise a message naming the keys and numbers.
std::string check_tensor_slice(const ModelConfig& model, int T);
// Rank t's part; requires check_tensor_slice(model, T) == "".
TensorSlice tensor_slice(const ModelConfig& model, int T, int t);
// The model one rank computes with: its query and kv heads, MLP width and vocabulary rows, the
// model's head dim and hidden size (the residual stream stays whole).
ModelConfig local_model(const ModelConfig& model, const TensorSlice& slice);

}  // namespace minilst
