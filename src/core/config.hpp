// The model's shape and the per-run options the model code needs, with the
// names of their enums (core/names.hpp).
#pragma once

#include <cstddef>

#include "core/batch.hpp"
#include "core/names.hpp"
#include "kernels/kernel_choice.hpp"

namespace minilst {

struct ModelConfig {
  int hidden = 256;         // d
  int layers = 4;           // L
  int heads = 8;            // H
  int kv_heads = 4;         // G (H % G == 0)
  int intermediate = 688;   // I
  int vocab = 4096;         // V
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  std::int64_t sliding_window = 0;  // keys a query sees at most, itself included (0: none)
  LayerPattern sliding_window_layers;  // the layers that window applies to (default: all)
  // h where `heads` is one tensor-parallel rank's share (core/tensor_slice.hpp: local_model);
  // 0 everywhere else: h = hidden / heads.
  int head_dim_override = 0;
  int head_dim() const { return head_dim_override > 0 ? head_dim_override : hidden / heads; }  // h
};

// The scalar type a run computes in (run.precision). bf16 is mixed precision:
// activations, saved and offloaded tensors, transfers and the weights the kernels
// read in bf16; every accumulation, the gradients, the fp32 master weights and the
// Adam moments in fp32 (kernels/bf16.hpp).
enum class Precision { float32, float64, bf16 };
template <>
struct EnumNames<Precision> {
  static constexpr std::array<std::pair<Precision, const char*>, 3> table{
      {{Precision::float32, "float"}, {Precision::float64, "double"}, {Precision::bf16, "bf16"}}};
};
// Bytes of an activation element (and of the weights the kernels read).
inline std::size_t scalar_bytes(Precision p) { return p == Precision::float64 ? 8 : p == Precision::bf16 ? 2 : 4; }
// Bytes of a gradient, master weight or optimizer moment element.
inline std::size_t master_bytes(Precision p) { return p == Precision::float64 ? 8 : 4; }
// Model-state bytes per parameter: weights, gradients and the two Adam moments, plus
// the fp32 master copy under bf16: 2 + 4 + 4 + 4 + 4 = 18 (as ALST counts), 16 in fp32.
inline std::size_t model_state_bytes(Precision p) {
  return p == Precision::bf16 ? scalar_bytes(p) + 4 * master_bytes(p) : 4 * scalar_bytes(p);
}

// Where the model states live (parallel.zero, memory.optimizer_offload; model/model_states.hpp).
struct ZeroOptions {
  int stage = 0;                   // 0 replicated; 1 AdamW states sharded; 2 + gradients; 3 + weights
  bool optimizer_offload = false;  // AdamW states, master weights, gradient shard in host memory
  int ranks = 1;                   // the ranks the states are sharded over (the whole job)
};

// What the forward keeps for the backward (memory/activation_store.hpp, whose
// store_buffers() is the one place that says what each policy keeps):
//   full                every layer's input and saved tensors on the device
//   checkpoint          every layer's input on the device; the attention block recomputed
//   hf_checkpoint       Hugging Face's activation recomputation, the papers' measured
//                       baseline: checkpoint, and the LM head's whole [S, V] logits in bf16
//                       (the run's type), their fp32 upcast and its gradient; no mini-sequences
//   checkpoint_offload  checkpoint, the layer inputs in host memory (two device buffers)
//   offload             MEMO: inputs, o and lse in host memory, a token fraction alpha of
//                       q, k, v, y and the MLP's tensors too, the other tokens recomputed
//                       (two device buffers; alpha = 1 recomputes nothing)
//   vanilla             the papers' baseline: full, the MLP's [S, I] intermediates kept,
//                       the [S, V] logits and their gradient whole; no mini-sequences
enum class MemoryPolicy { full, checkpoint, hf_checkpoint, checkpoint_offload, offload, vanilla };
template <>
struct EnumNames<MemoryPolicy> {
  static constexpr std::array<std::pair<MemoryPolicy, const char*>, 6> table{
      {{MemoryPolicy::full, "full"},
       {MemoryPolicy::checkpoint, "checkpoint"},
       {MemoryPolicy::hf_checkpoint, "hf_checkpoint"},
       {MemoryPolicy::checkpoint_offload, "checkpoint_offload"},
       {MemoryPolicy::offload, "offload"},
       {MemoryPolicy::vanilla, "vanilla"}}};
};

struct OffloadOptions {
  double alpha = 1.0;          // offload: token fraction of q, k, v, y and the MLP's kept in host memory
  double bandwidth_gbs = 0.0;  // host copy engine: modelled link bandwidth (0 = unthrottled)
};

struct ModelOptions {
  MemoryPolicy policy = MemoryPolicy::full;
  int mlp_chunks = 1;       // mini-sequences of the MLP block (>= 1)
  int lm_head_chunks = 1;   // mini-sequences of the LM head + loss (>= 1)
  OffloadOptions offload;
  KernelChoice kernels;  // a deck's request (autos) until the run resolves it (core/kernel_choice.hpp)
  SequenceMask mask;     // documents and sliding window of the sequence (core/batch.hpp; default: causal)
};

}  // namespace minilst
