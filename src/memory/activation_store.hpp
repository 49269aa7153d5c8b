// The activation store: the one home of what the forward keeps for the backward.
// Per layer l, on S local tokens (h head dim, H/G query/kv heads), one row each of
// the table in activation_store.cpp (saved_tensors()), which gives every tensor's
// label, family, columns, element type and the LayerActivations member it fills;
// the device buffers, the host copies, what travels and the memory model's and the
// offload controller's sizes all come from that table:
//   x      [S, d]      the layer's input (the residual stream)
//   q      [S, H*h]    after RoPE        k, v  [S, G*h]  (k after RoPE)
//   o      [S, H*h]    attention output  stats           the attention's statistics (log-sum-exp
//   y      [S, d]      x + o Wo                          rows, RSA's P), in the strategy's shape
//   MLP    mlp_in [S, d] = rmsnorm(y), gate, up, act [S, I]   (policies that keep them)
// q, k, v are in the attention strategy's saved layout (attention_strategy.hpp):
// the local one above, or a strategy's own (Ulysses: the group's tokens, this
// member's heads), which then also keeps its o_kept beside the layer's o.
// The layer writes them into the buffers the store hands out (forward_begin) and
// reads them back (backward_begin); it never knows the policy. Four families:
//   input  x                                       (the layer inputs)
//   whole  o, stats                                never recomputed token-wise
//   rows   y; q, k, v in the local layout; the     token rows recomputable from the
//          MLP's where the plan keeps them          same rows of x and o
//   kept   q, k, v, o_kept in a strategy's own     re-derived from x and o only by
//          layout                                   the strategy's exchange
// The policy sets how many device buffers each family has, and what becomes of a
// tensor whose buffer is reused by a later layer before its own backward:
//
//   policy         x      whole  rows    kept    a tensor whose buffer is reused
//   full           L + 1  L      L       L       (none is); the MLP's are recomputed (mini-sequences)
//   checkpoint     L + 1  -      -       -       everything but x: recomputed (the attention block, from x)
//   hf_checkpoint  L + 1  -      -       -       as checkpoint; the LM head is Hugging Face's (lm_head.hpp)
//   checkpoint_    2      -      -       -       x: to host and back; the rest recomputed (ALST)
//     offload
//   offload        2      2      2 (-    2 (-    x, the whole and kept tensors: to host and back; of the
//                                at a=0) at a=0) row tensors the first alpha S tokens too, the other
//                                                tokens recomputed token-wise (MEMO: alpha = 1 recomputes
//                                                nothing, alpha = 0 keeps one transient row set and
//                                                re-derives the kept ones: x, o and stats alone travel)
//   vanilla        L + 1  L      L       L       (none is); the MLP's kept too (no recompute), and the
//                                                blocks run whole: no mini-sequences, the LM head keeps
//                                                the [S, V] logits' gradient beside them
//   (-: transient, one set allocated for a layer's forward and again for its backward)
// The MLP's tensors are in the row family where the MLP runs as one chunk and the
// policy keeps them (vanilla; offload at alpha > 0 with one MLP chunk): kept
// tensors are that chunk's (mlp_block.hpp). With mini-sequences the MLP keeps
// nothing under any policy and recomputes each chunk in its backward, so that
// offload composes with them: no [S, I] tensor exists whole.
//
// Offload's rows are residual rows: h = round(alpha n) of the n rows of x and y. Under tensor
// parallelism the block tensors (q, k, v, the MLP's) hold the group's T n rows rank-major, so
// their token rows [0, h) are the T segments [t n, t n + h); those travel (T h rows) and the
// layer's recompute of the rest is collective (decoder_layer.hpp).
//
// With n buffers, buffer b holds layers b, b+n, b+2n, ... (n = 2: MEMO's two
// "rounding buffers"), so the device keeps two layers whatever L is; x_L (the
// final norm's input) takes buffer L % n. Only tensors whose buffer is reused go
// to host: layers 0..L-3 in full, layer L-2 only its x, layer L-1 nothing.
// Copies run on the copy engine, overlapped with compute: x_l leaves when layer l
// starts, the rest when its forward ends (the engine orders each copy after the
// compute that wrote it); whoever reuses a buffer orders its compute after the
// copy out of it (so every copy out is ordered before the forward ends, and the
// copies back, submitted later, follow them). In the backward, layer l-1 comes
// back into its buffers while layer l's backward runs, and its backward is
// ordered after those copies.
// Ordering is device side on CUDA (the host goes on) and a wait on host builds
// (copy_engine.hpp), except in the forwards that measure the forward's time (see
// forward_layer_seconds), which fence before their copies out and wait on the
// host. Time spent in these calls is the phase offload_wait (prefetch_wait: the
// part in the backward); the phase timer fences the compute instance at its ends,
// so on CUDA too it is the stall the wait causes. Recomputing is the phase recompute.
// In a counting context (memory_context.hpp) the store makes the same requests
// and decisions with no copy engine and no data: `minilst plan`'s replay.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <vector>

#include "core/config.hpp"
#include "core/phases.hpp"
#include "core/range.hpp"
#include "core/saved_layout.hpp"
#include "kernels/compat.hpp"
#include "kernels/types.hpp"
#include "memory/copy_engine.hpp"
#include "memory/tracker.hpp"

namespace minilst {

template <class T>
struct LayerActivations {  // views into the store's buffers, one layer (n = S / T rows of x, y)
  Mat<T> x;                // [S, d]
  Mat<T> q, k, v;          // the saved layout's ([S, H*h], [S, G*h], [S, G*h] when local)
  Mat<T> o;                // [S, H*h]
  Mat<T> o_kept;           // the saved layout's o (o itself when local)
  Mat<accum_t<T>> stats;   // the attention strategy's statistics
  Mat<T> y;                // [S, d]
  bool local = true;       // q, k, v are the layer's own (local layout): token rows can be recomputed
  bool mlp_saved = false;  // the store keeps the MLP's tensors (StoreBuffers::mlp_saved):
  Mat<T> mlp_in;           //   [S, d] rmsnorm(y), the MLP's input
  Mat<T> mlp_gate, mlp_up, mlp_act;  // [S, I] b Wg, b Wu, silu(b Wg) * b Wu
};

// What a store may ask the model to redo for layer l before its backward.
template <class T>
class LayerRecompute {
 public:
  virtual ~LayerRecompute() = default;
  // q, k, v, o, stats, y := the attention block of a.x (attention included).
  virtual void attention_block(int layer, const LayerActivations<T>& a) const = 0;
  // Those rows of the row tensors (q, k, v when local, y, the MLP's when kept) :=
  // from the same rows of a.x and a.o (token-wise, no attention).
  virtual void token_rows(int layer, const LayerActivations<T>& a, Range rows) const = 0;
  // The kept tensors (q, k, v, o_kept in the strategy's own layout, not local) :=
  // from a.x and a.o: the projections, then the strategy's exchange; no attention.
  virtual void kept_layout(int layer, const LayerActivations<T>& a) const = 0;
};

// Under tensor parallelism (parallel.tensor = T, model/tensor_group.hpp) x and y hold the
// rank's n = S / T rows of the residual stream and the blocks' tensors (q, k, v, o, the
// MLP's) all S rows of the group with this rank's heads and MLP columns: `tokens` is n,
// `block_tokens` S (equal at T = 1), and the model's widths are one rank's (local_model).
struct ActivationShapes {
  std::int64_t tokens = 0, hidden = 0, q_cols = 0, kv_cols = 0;  // n, d, H*h, G*h
  std::int64_t intermediate = 0;                                 // I (the MLP's tensors)
  Extent2 stats;                                                 // the attention strategy's
  SavedLayout saved;                                             // its q, k, v (and o_kept)
  std::int64_t block_tokens = 0;                                 // S: the rows of o and the MLP's tensors
};
// c: one rank's model; tokens: the rows its attention runs on (S, the sequence piece);
// tensor_ranks: T. saved: the strategy's saved_layout (the local one when left out).
inline ActivationShapes activation_shapes(const ModelConfig& c, std::int64_t tokens, Extent2 stats,
                                          std::optional<SavedLayout> saved = std::nullopt, int tensor_ranks = 1) {
  const std::int64_t h = c.head_dim(), Hh = c.heads * h, Gh = c.kv_heads * h;
  return {tokens / tensor_ranks, c.hidden, Hh, Gh, c.intermediate, stats,
          saved.value_or(SavedLayout{{tokens, Hh}, {tokens, Gh}, true}), tokens};
}

// The families of saved tensors (see the top of this file).
enum class Family { input, whole, rows, kept };
constexpr std::array<Family, 4> kFamilies = {Family::input, Family::whole, Family::rows, Family::kept};

// The buffer counts and host traffic of a policy (see the table above): the one
// place that says what each policy keeps.
struct StoreBuffers {
  int x_buffers = 0;      // device buffers of layer inputs
  int saved_buffers = 0;  // device buffers of the whole tensors (o, stats); 0 = transient
  int row_buffers = 0;    // device buffers of the row tensors (q, k, v, y, ...); 0 = transient
  int kept_buffers = 0;   // device buffers of the kept tensors (a strategy's q, k, v, o_kept); 0 = transient
  bool host = false;      // reused tensors go to host memory
  bool mlp_saved = false;       // the row set holds the MLP's tensors (the MLP as one chunk, no MLP recompute)
  bool whole_sequence = false;  // no mini-sequences; the LM head keeps the logits' gradient too (or hf_head's)
  bool hf_head = false;         // the LM head is Hugging Face's (bf16 logits, fp32 upcast and gradient)
  int buffers(Family f) const {
    return f == Family::input ? x_buffers : f == Family::whole ? saved_buffers : f == Family::rows ? row_buffers : kept_buffers;
  }
  // Layer l's tensors of family f lose their buffer to a later layer before l's backward.
  bool reused(Family f, int l, int L) const {
    if (f == Family::input) return l + x_buffers <= L;  // x_L shares the buffers too
    const int n = buffers(f);
    return n > 0 && l + n <= L - 1;
  }
  bool recompute_attention() const { return saved_buffers == 0; }  // the attention block runs again
  // The kept tensors are transient while the attention is not recomputed: the backward
  // re-derives them through the strategy's exchange (offload at alpha 0: four more
  // all-to-alls per layer under Ulysses, the forward's q, k, v and o_kept).
  bool rederive_kept() const { return saved_buffers > 0 && kept_buffers == 0; }
};
// alpha, tokens: offload's token fraction and the rank's tokens. No token rows in host
// memory (round(alpha S) = 0) leaves one transient row set; alpha = 0 one transient
// kept set too (decided by alpha, the same on every rank: re-deriving it is collective).
// mlp_chunks: the MLP's mini-sequences on these tokens (effective_chunks); only a
// one-chunk MLP keeps its tensors.
StoreBuffers store_buffers(MemoryPolicy policy, int layers, double alpha = 1.0, std::int64_t tokens = 1, int mlp_chunks = 1);
inline bool uses_host_memory(MemoryPolicy p) {
  return p == MemoryPolicy::checkpoint_offload || p == MemoryPolicy::offload;
}
// Tokens of the row tensors (q, k, v, y, the MLP's) that offload keeps in host memory: round(alpha S).
std::int64_t offload_host_rows(double alpha, std::int64_t tokens);
// What the backward redoes token-wise in a micro-step (ActivationStore::backward_begin; none
// where the attention block is recomputed): `layers` layers redo `rows` residual rows each
// (every row of every layer where no row set is kept), and `kept_layers` layers re-derive a
// strategy's kept set (not local, at alpha 0). host_rows: offload_host_rows; tokens: n.
struct TokenRecompute {
  int layers = 0;
  std::int64_t rows = 0;
  int kept_layers = 0;
};
TokenRecompute token_recompute(const StoreBuffers& plan, int layers, std::int64_t host_rows, std::int64_t tokens,
                               bool local);

template <class T>
class ActivationStore {
 public:
  using A = accum_t<T>;
  ActivationStore(const ModelOptions& opts, int layers, const ActivationShapes& shapes, PhaseTimers* timers);
  ~ActivationStore();
  ActivationStore(const ActivationStore&) = delete;
  ActivationStore& operator=(const ActivationStore&) = delete;

  // Forward of a micro-step, in this order for l = 0..L-1: input(l) is written
  // (embedding or layer l-1), forward_begin(l), the layer, forward_end(l); then
  // input(L) is read by the LM head, head_end().
  Mat<T> input(int l);                        // x_l, l in [0, L] (waits until no copy reads its buffer)
  LayerActivations<T> forward_begin(int l);   // x_l and the buffers layer l's forward writes
  void forward_end(int l);                    // layer l's forward (MLP included) is complete
  void head_end();                            // the LM head is done with x_L
  // Backward, l = L-1..0: everything layer l's backward reads, restored.
  LayerActivations<T> backward_begin(int l, const LayerRecompute<T>& redo);
  void backward_end(int l);                   // layer l's buffers may go

  const StoreBuffers& plan() const { return plan_; }
  double alpha() const { return alpha_; }
  void set_alpha(double alpha);               // offload: between micro-steps
  std::int64_t host_rows() const { return host_rows_; }
  const CopyEngine* engine() const { return engine_.get(); }
  // Bytes moved and engine busy time since the last call; waits for every copy first.
  CopyEngine::Counters take_counters();
  // Forward compute time per layer in the last micro-step that measured it (waits on
  // the engine excluded). Forwards measure it until stop_timing_forward(): they fence
  // the compute instance at their start and end and wait for copies on the host (a
  // device-side wait would hide inside the compute time). The offload controller
  // stops the timing after the first step, whose measurement alpha auto uses.
  double forward_layer_seconds() const { return forward_layer_seconds_; }
  void stop_timing_forward() { time_forward_ = false; }

  // Bytes of host memory the policy keeps per rank at this alpha (every layer's host
  // copies, summed), and the bytes one layer copies to host at alpha > 0: x; the whole
  // and kept tensors (o, statistics; a strategy's q, k, v, o_kept); the row tensors of
  // all tokens (MEMO's alpha weighs the last). mlp_chunks: the run's mst.mlp_chunks
  // (a one-chunk MLP's tensors are row tensors under offload).
  static std::uint64_t host_bytes(MemoryPolicy policy, int layers, const ActivationShapes& shapes, double alpha,
                                  int mlp_chunks = 1);
  struct LayerCopyBytes {
    double x = 0, o = 0, rest = 0;  // x; whole and kept; rows
  };
  static LayerCopyBytes layer_copy_bytes(const ActivationShapes& shapes, int mlp_chunks = 1);

 private:
  struct Slot {                         // one device buffer's state
    int layer = -1;                     // whose tensor it holds (-1: none)
    bool complete = false;              // row sets: every row valid (else rows host_rows.. recompute)
    CopyEngine::Ticket pending = 0;     // the last copy into or out of it
  };
  // One tensor's buffer, of T or A elements as its table row says (the other one stays empty).
  template <class ViewT, class ViewA>
  struct Buffer {
    Tracked<ViewT> value;
    Tracked<ViewA> accum;
    std::size_t bytes() const { return value.bytes() + accum.bytes(); }
    void* data() const {
      return value.bytes() ? static_cast<void*>(value.view().data()) : static_cast<void*>(accum.view().data());
    }
  };
  using DeviceBuffer = Buffer<Mat<T>, Mat<A>>;
  using HostBuffer = Buffer<Kokkos::View<T*, compat::HostPinnedSpace>, Kokkos::View<A*, compat::HostPinnedSpace>>;
  struct Set {                          // one device buffer of a family: a slot per table row
    std::vector<DeviceBuffer> tensors;  //   (those of other families stay empty)
    bool allocated = false;
  };
  struct FamilyBuffers {                  // a family's device buffers (one when transient) and their states
    std::vector<Set> sets;
    std::vector<Slot> slots;
  };
  struct HostLayer {                    // one layer's tensors in host memory, a slot per table row
    std::vector<HostBuffer> tensors;
    std::int64_t rows = -1;             // token rows the row copies have room for (-1: none yet)
  };
  struct CopyPair {                     // a device tensor and its host copy (all of it, or its first rows)
    void* device;
    void* host;
    std::size_t bytes;
  };

  FamilyBuffers& family(Family f) { return families_[std::size_t(f)]; }
  int index(Family f, int l) const { return plan_.buffers(f) ? l % plan_.buffers(f) : 0; }
  Slot& slot(Family f, int l) { return family(f).slots[std::size_t(index(f, l))]; }
  void reset_family(Family f);          // no buffer, the plan's count of empty ones
  std::optional<Family> family_of(std::size_t tensor) const;  // a table row's family in this run (none: not kept)
  Set& set(Family f, int l);            // allocates layer l's buffers of the family if needed
  void bind(Family f, int l, LayerActivations<T>& a);  // a's members of the family := views of set(f, l)
  Mat<T> x_view(int l);                 // allocates x_l's buffer if needed
  LayerActivations<T> views(int l);
  std::vector<CopyPair> copies(Family f, int l);  // what travels of layer l's family f (allocates its host copies)
  CopyEngine::Ticket copy_all(const std::vector<CopyPair>& pairs, CopyEngine::Direction d);
  void release(Family f, int l);        // layer l's buffer of the family goes
  void fetch(int l);                    // starts bringing layer l back into its buffers
  void block_on(CopyEngine::Ticket ticket, bool backward);
  void fence(const char* why) const;  // the compute instance (nothing to wait for when counting)
  // Before copies out in a timed forward: a fence, so that a later host wait for
  // them measures the copies, not the compute enqueued before them.
  void timed_copies_out(const char* why) const;
  CopyEngine::Ticket copy(void* dst, const void* src, std::size_t bytes, CopyEngine::Direction d);

  MemoryPolicy policy_;
  bool counting_;                       // a replay (memory_context.hpp): no engine, no fences
  int L_;
  ActivationShapes shapes_;
  int mlp_chunks_;                      // the MLP's effective mini-sequences
  PhaseTimers* timers_;
  StoreBuffers plan_;
  double alpha_ = 1.0;
  std::int64_t host_rows_ = 0;
  std::unique_ptr<CopyEngine> engine_;  // only when the policy uses host memory
  std::array<FamilyBuffers, kFamilies.size()> families_;
  std::vector<HostLayer> host_;         // per layer, allocated on first use, kept across steps
  bool time_forward_ = true;
  Kokkos::Timer forward_timer_;
  double forward_wait_seconds_ = 0, forward_layer_seconds_ = 0;
};

}  // namespace minilst
