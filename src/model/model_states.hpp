// The model states of one rank: the weights the kernels read, their gradients,
// the AdamW moments and the master weights, replicated or sharded over the job's
// ranks (ZeRO, parallel.zero) and on the device or in host memory
// (memory.optimizer_offload). The units and shards are ShardLayout's (parameters.hpp).
//   stage 0  everything whole on every rank; the gradient all-reduced
//   stage 1  master weights and moments: the rank's shard of every unit; the gradient
//            all-reduced; after AdamW each unit's weights are all-gathered
//   stage 2  the gradient too: each unit's is computed into one of two buckets and
//            reduce-scattered as soon as its backward ends, while the next unit computes
//   stage 3  the weights too: a unit is all-gathered into one of two buffers before its
//            forward and again before its backward (the last layer's stays across the
//            head), the next unit's gather posted when this one is acquired
//   offload  master, moments and the gradient shard in host memory, AdamW on host
//            threads, the updated weights copied back to the device
// Per-rank bytes, n parameters over P ranks (W: the weights' bytes, 2 in bf16; G: a
// gradient's, moment's or master's, 4 in bf16; s = shard elements = n/P plus padding;
// B = the largest unit, padded):
//   stage   weights        gradients        optimizer (device, or host with offload)
//   0       W n            G n              2 G n  (+ G n master under bf16)
//   1       W n            G n              2 G s  (+ G s master)
//   2       W n            G s + 2 G B      2 G s  (+ G s)
//   3       W s + 2 W B    G s + 2 G B      2 G s  (+ G s)
// Offload: the optimizer column moves to the host, with a master (G s) always and the
// gradient shard (G s): at stages 2, 3 instead of the device's, at 0, 1 a copy of the
// rank's part of the whole gradient (which stays on the device for the all-reduce);
// plus host staging (from stage 2 two incoming gradient shards of the largest unit, 2 G
// max s_u, one per bucket, filled by the copy engine; W s of updated weights out).
// Tensor parallelism (model/tensor_group.hpp): a rank's states are its slice of the model
// (local_model's parameters, initial values drawn whole and sliced), sharded over the ranks
// holding the same slice (the job's ranks with the same tensor rank: `world` here). The
// gradients of what several ranks of the group hold alike (the norms; kv heads replicated
// where T exceeds them) are summed over those ranks before the reduction over `world`: once a
// step at stages 0, 1 (reduce_gradients), each micro-step's bucket at 2, 3 (gradients_done).
#pragma once

#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/phases.hpp"
#include "kernels/adamw.hpp"
#include "kernels/compat.hpp"
#include "memory/copy_engine.hpp"
#include "model/parameters.hpp"
#include "model/tensor_group.hpp"
#include "parallel/communicator.hpp"

namespace minilst {

struct TrainOptions {
  std::uint64_t seed = 1234;
  double init_std = 0.02;
  double init_std_qk = 0;  // Wq's and Wk's (0: init_std; verify: peaked attention scores)
  double norm_init_noise = 0.0;
  kernels::AdamWHyper adamw;
};

// A parameter's initial values: normal(0, init_std) for matrices; norm weights 1 +
// normal(0, norm_init_noise) (0 gives the usual ones; verification decks perturb them so a
// dropped weight cannot go unnoticed). The model's tensor (its global shape) is drawn in
// chunks of 2^25 elements, each from its own stream: chunk 0 seeded by (seed, name), chunk c
// by (seed, name, c); so the values depend on neither the ZeRO layout, the tensor-parallel
// split, the order nor the thread count. draw_initial_chunk writes chunk c's values that the
// slot holds (its rows or columns under tensor parallelism) into dst, the slot's first element.
std::size_t initial_chunks(const TensorSlot& slot);
template <class M>
void draw_initial_chunk(const TensorSlot& slot, std::size_t chunk, const TrainOptions& init, M* dst);

// The order a micro-step acquires the units in: embedding, layers, head, layers back.
std::vector<int> unit_acquire_order(int layers);
// The units stage 3 gathers in a micro-step, in order: the last layer's weights stay
// in their buffer across the head, and after the first micro-step of a step the first
// layer's stay from the backward into the next forward (the weights change only at AdamW).
std::vector<int> unit_gather_order(int layers, bool first_micro_step = true);

template <class T>
class ModelStates {
 public:
  using M = master_t<T>;
  static constexpr bool kMixed = !std::is_same<T, M>::value;  // bf16: a separate fp32 master

  // model: the whole model; tp: this rank's tensor-parallel group (its slice of the model);
  // world: the ranks holding the same slice, over which the states are sharded (null:
  // one rank; or `minilst plan`'s replay, in a counting memory context, which makes
  // the same buffers and moves nothing). Initialises the weights (seeded, layout-free).
  ModelStates(const ModelConfig& model, const ZeroOptions& zero, const TrainOptions& init, Communicator* world,
              PhaseTimers* timers, const TensorGroup& tp = TensorGroup::none());
  ModelStates(const ModelStates&) = delete;
  ModelStates& operator=(const ModelStates&) = delete;

  // A micro-step's access, unit by unit, in unit_acquire_order (Model::forward_backward):
  const ParamViews<T>& acquire(int unit);   // the unit's weights, readable until release
  void release(int unit);
  const ParamViews<M>& gradients(int unit);  // the unit's gradients accumulate (+=) here ...
  void gradients_done(int unit);             // ... until this: then they are reduced
  void progress();                           // lets posted collectives move (MPI moves them inside calls)

  void zero_gradients();    // before a step's micro-steps
  void reduce_gradients();  // after them: every rank's gradient summed (all-reduce, or the reduce-scatters)
  double grad_norm();       // ||sum of gradients||_2 (collective from stage 2)
  void apply_optimizer(const kernels::AdamWHyper& hp, long step);

  // Collective: the whole model's unpadded buffer (parameter_layout(model)), in double, on
  // every rank (tests, the tensor dump); sharded buffers travel in pieces of at most `piece`
  // elements per rank, tensor-parallel slices are put together.
  static constexpr std::size_t kGatherPiece = std::size_t(1) << 20;
  std::vector<double> gathered_weights(std::size_t piece = kGatherPiece);  // the master under bf16
  std::vector<double> gathered_gradients(std::size_t piece = kGatherPiece);

  // The whole buffers where the stage keeps them (tests perturb the weights); logic_error otherwise.
  const ParamSet<T>& params() const;
  const ParamSet<M>& grads() const;

  const ShardLayout& layout() const { return layout_; }
  const ZeroOptions& zero() const { return zero_; }

 private:
  using HostVec = Kokkos::View<M*, Kokkos::HostSpace>;
  struct Span {                // one unit's shard: the same elements in three buffers
    std::size_t shard, count;  // in the shard buffers; its length
    std::size_t full;          // in a padded full buffer (params at stages <= 2, grads at <= 1)
  };
  struct Gathered {  // stage 3: a unit's weights, gathered
    Tracked<Vec<T>> buffer;
    int unit = -1;
    bool in_use = false;
    RequestPtr request;
    double posted = 0;
  };
  struct Bucket {  // stages 2, 3: a unit's gradient, being reduce-scattered
    Tracked<Vec<M>> grads, recv;
    int unit = -1;
    RequestPtr request;
    double posted = 0;
    // Offload: recv's way to the host (the copy engine), then added to the host shard.
    Tracked<Kokkos::View<M*, compat::HostPinnedSpace>> incoming;
    CopyEngine::Ticket copy = 0;
    int copied_unit = -1;
  };

  void initialise(const TrainOptions& init);
  Span span(int unit) const;
  bool has_master() const { return kMixed || zero_.optimizer_offload; }
  void post_gather(Gathered& g, int unit);
  void wait_gather(Gathered& g);
  void drain(Bucket& b);  // completes its reduce-scatter and adds the shard into the gradient
  void land(Bucket& b);   // offload: completes recv's copy to the host and adds it there
  void wait(RequestPtr& request, double posted, Phase exposed, Phase window);
  void gradients_to_host();
  void gather_weights_after_update();
  template <class V>
  std::vector<double> gather_shards(const V& shard, std::size_t piece);
  template <class V>
  std::vector<double> unpad(const V& full) const;
  // The slice's whole buffer (unpadded, local layout) -> the model's, over the group.
  std::vector<double> whole_model(std::vector<double> slice) const;
  // The gradients' spans (offsets relative to `base`) of tensors several group ranks hold:
  // the norms, and the kv projections where replicated; of unit u, or every unit (u < 0).
  struct Replicated {
    std::vector<TensorGroup::Span> norms, kv;
  };
  Replicated replicated(int u, std::size_t base) const;

  ModelConfig model_;  // the whole model
  ModelConfig cfg_;    // this rank's slice of it (local_model)
  const TensorGroup& tp_;
  ZeroOptions zero_;
  Communicator* world_;
  PhaseTimers* timers_;
  int rank_ = 0;  // this rank's shard (0 when unsharded)
  ShardLayout layout_;
  std::vector<TensorSlot> slots_;  // parameter_layout(cfg, layout_)
  // On the device. Shard buffers hold layout_.shard_total elements (everything at stage 0).
  std::optional<ParamSet<T>> params_;  // stages 0-2: the whole weights (padded)
  Tracked<Vec<T>> param_shard_;        // stage 3
  std::optional<ParamSet<M>> grads_;   // stages 0, 1
  Tracked<Vec<M>> grad_shard_;         // stages 2, 3 without offload
  Tracked<Vec<M>> master_, adam_m_, adam_v_;  // without offload (master: bf16 only)
  Gathered gathered_[2];
  Bucket buckets_[2];
  int next_bucket_ = 0;
  ParamViews<T> gathered_views_;
  ParamViews<M> bucket_views_;
  std::vector<int> order_;
  std::size_t cursor_ = 0;
  Tracked<Vec<double>> norm_;  // stages 2, 3 over ranks, or tensor parallel: the square sum all-reduced
  Tracked<Vec<M>> tp_scratch_;  // tensor parallel: the replicated gradients of every group rank
  // In host memory (optimizer offload).
  Tracked<HostVec> host_grads_, host_master_, host_m_, host_v_;
  Tracked<Kokkos::View<T*, compat::HostPinnedSpace>> host_outgoing_;  // the updated weights, to the device
  std::unique_ptr<CopyEngine> engine_;  // offload from stage 2: the reduced gradient shards to the host
  Kokkos::Timer clock_;
};

}  // namespace minilst
