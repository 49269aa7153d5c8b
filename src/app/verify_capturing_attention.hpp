// What `minilst verify` observes of a step's attention, without touching the model:
// CapturingAttention wraps a rank's attention strategy (the run's, or the reference's
// LocalAttention), passes every call through unchanged, and copies to the host, as
// float64, per micro-step and layer:
//   forward   q, k, v (after RoPE), o          [S_local, H h] / [S_local, G h] / ... / [S_local, H h]
//             lse (the strategy's statistics)  stats_shape: [S_group, heads here]
//   backward  do (its input), dq, dk, dv       [S_local, H h], [S_local, H h] / [S_local, G h] / [S_local, G h]
// (the layer's local layout: this rank's tokens in local order; lse in the strategy's own).
// Layer order (counted across all wrapped strategies: the windowed layers and the others may
// have one each): within a micro-step the first L forward calls are layers 0..L-1 (a
// recompute during the backward, under checkpointing or offload, comes after them and is
// not recorded), the backward calls layers L-1..0; the L-th backward call ends the
// micro-step. Ulysses hands q, k, v over one at a time (keep_input) before forward_kept.
// A normal run never builds one: no cost outside verify.
#pragma once

#include <Kokkos_Core.hpp>

#include <array>
#include <memory>
#include <vector>

#include "attention/attention_strategy.hpp"
#include "kernels/bf16.hpp"

namespace minilst::verify {

enum Tensor { kQ, kK, kV, kO, kLse, kDo, kDq, kDk, kDv, kTensors };
inline const char* tensor_name(int t) {
  static const char* names[kTensors] = {"q", "k", "v", "o", "lse", "do", "dq", "dk", "dv"};
  return names[t];
}

// One rank's tensors of one layer in one micro-step, each row-major [rows, cols] (empty: not captured).
using LayerTensors = std::array<std::vector<double>, kTensors>;

// The step's captured tensors, and where the capture stands (shared by every wrapped
// strategy: a model may build one strategy per layer mask, and the layers take turns).
struct StepCapture {
  int layers = 0;
  std::vector<std::vector<LayerTensors>> micro;  // [micro-step][layer]
  int forwards = 0, backwards = 0, current = 0;  // calls of the current micro-step; its index
  LayerTensors pending;                          // q, k, v handed over before forward_kept
};

// A device matrix, copied to the host as float64 (row-major).
template <class View>
std::vector<double> host_doubles(const View& m) {
  auto h = Kokkos::create_mirror_view(m);
  Kokkos::deep_copy(h, m);
  std::vector<double> out;
  out.reserve(h.extent(0) * h.extent(1));
  for (std::size_t i = 0; i < h.extent(0); ++i)
    for (std::size_t j = 0; j < h.extent(1); ++j) out.push_back(static_cast<double>(static_cast<float>(h(i, j))));
  return out;
}
template <>
inline std::vector<double> host_doubles(const Mat<double>& m) {
  auto h = Kokkos::create_mirror_view(m);
  Kokkos::deep_copy(h, m);
  return std::vector<double>(h.data(), h.data() + h.size());
}
template <>
inline std::vector<double> host_doubles(const Mat<const double>& m) {
  auto h = Kokkos::create_mirror_view(m);
  Kokkos::deep_copy(h, m);
  return std::vector<double>(h.data(), h.data() + h.size());
}

template <class T>
class CapturingAttention final : public AttentionStrategy<T> {
 public:
  using A = accum_t<T>;
  // capture_stats false: the statistics are not a log-sum-exp (RSA's seed backward keeps P).
  CapturingAttention(std::unique_ptr<AttentionStrategy<T>> inner, StepCapture& out, bool capture_stats)
      : inner_(std::move(inner)), out_(out), capture_stats_(capture_stats) {}

  Extent2 stats_shape(std::int64_t rows, std::int64_t heads) const override { return inner_->stats_shape(rows, heads); }
  SavedLayout saved_layout(std::int64_t rows, std::int64_t q_cols, std::int64_t kv_cols) const override {
    return inner_->saved_layout(rows, q_cols, kv_cols);
  }
  void forward(const Mat<T>& o, const Mat<A>& stats, const Mat<const T>& q, const Mat<const T>& k,
               const Mat<const T>& v, const AttentionKept<T>& kept) override {
    inner_->forward(o, stats, q, k, v, kept);
    if (out_.forwards >= out_.layers) return;  // a recompute
    out_.pending[kQ] = host_doubles(q);
    out_.pending[kK] = host_doubles(k);
    out_.pending[kV] = host_doubles(v);
    finish_forward(o, stats);
  }
  void keep_input(int input, const Mat<const T>& x, const AttentionKept<T>& kept) override {
    inner_->keep_input(input, x, kept);
    if (out_.forwards < out_.layers) out_.pending[input] = host_doubles(x);  // q (0), k (1), v (2) of the next forward
  }
  void forward_kept(const Mat<T>& o, const Mat<A>& stats, const AttentionKept<T>& kept) override {
    inner_->forward_kept(o, stats, kept);
    if (out_.forwards < out_.layers) finish_forward(o, stats);
  }
  void backward(const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv, const Mat<const T>& d_o, const Mat<const T>& o,
                const Mat<const A>& saved, const Mat<const T>& q, const Mat<const T>& k,
                const Mat<const T>& v) override {
    inner_->backward(dq, dk, dv, d_o, o, saved, q, k, v);
    auto& layer = out_.micro.at(out_.current).at(out_.layers - 1 - out_.backwards);
    layer[kDo] = host_doubles(d_o);
    layer[kDq] = host_doubles(dq);
    layer[kDk] = host_doubles(dk);
    layer[kDv] = host_doubles(dv);
    if (++out_.backwards == out_.layers) {  // the micro-step's last layer
      out_.forwards = out_.backwards = 0;
      ++out_.current;
    }
  }

 private:
  void finish_forward(const Mat<T>& o, const Mat<A>& stats) {
    if (out_.micro.size() <= std::size_t(out_.current))
      out_.micro.resize(out_.current + 1, std::vector<LayerTensors>(out_.layers));
    auto& layer = out_.micro[out_.current][out_.forwards++];
    for (int t : {kQ, kK, kV}) layer[t] = std::move(out_.pending[t]);
    layer[kO] = host_doubles(o);
    if (capture_stats_) layer[kLse] = host_doubles(stats);
  }

  std::unique_ptr<AttentionStrategy<T>> inner_;
  StepCapture& out_;
  bool capture_stats_;
};

}  // namespace minilst::verify
