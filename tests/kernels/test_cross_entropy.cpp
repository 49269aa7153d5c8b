// cross_entropy (kernels/cross_entropy.hpp, cross_entropy_reference.hpp): the LM head's loss
// fused with its gradient, sum over non-ignored rows of lse_i - logit_i[label_i], the logits
// overwritten with grad_scale (softmax - onehot).
//  * The loss against a direct sum, the gradient against finite differences, ignored rows
//    (zero gradient, no effect on the loss), stability for large logits; in double.
//  * The reference twin against the optimised kernel, double and float: V = 37 and 1001, a row
//    of large logits, ignored rows, rows of the gradient summing to zero.
//  * The float instantiation runs and gives a finite loss.
//  * The vocabulary-parallel kernels (cross_entropy_shard.hpp): the shards' stats gathered and
//    combined give the fused kernel's loss and dlogits, for 1-4 shards (even and uneven), in
//    double, float and bf16, every shard's loss the same.
// Each check prints its observed error as "[err] <what> = <value>".
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernel_test_util.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/cross_entropy_reference.hpp"
#include "kernels/cross_entropy_shard.hpp"

using namespace minilst::kernel_test;
namespace K = minilst::kernels;

namespace {
// Direct sum_i (lse_i - logit_i[label_i]) over non-ignored rows.
double naive_ce_sum(const Host& logits, const std::vector<std::int64_t>& labels, int V) {
  double s = 0;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] == minilst::kIgnoreLabel) continue;
    double mx = -std::numeric_limits<double>::infinity();
    for (int c = 0; c < V; ++c) mx = std::max(mx, logits[i * V + c]);
    double z = 0;
    for (int c = 0; c < V; ++c) z += std::exp(logits[i * V + c] - mx);
    s += mx + std::log(z) - logits[i * V + labels[i]];
  }
  return s;
}
const std::vector<std::int64_t> kLabels = {3, -100, 0, 10, 5, -100, 7};  // two ignored rows
}  // namespace

TEST(CrossEntropy, LossMatchesDirectAndGradientMatchesFiniteDifferences) {
  Rng rng(40);
  const int C = int(kLabels.size()), V = 11;
  const double grad_scale = 1.0 / 5.0;  // 1 / N_valid
  auto lab = ids(kLabels);
  Mat<double> logits("logits", C, V), work("work", C, V);
  fill_random(logits, rng, -3, 3);
  const Host l0 = to_host(logits);
  const double ref = naive_ce_sum(l0, kLabels, V);
  Kokkos::deep_copy(work, logits);
  const double got = K::cross_entropy_fused<double>(work, lab, grad_scale);
  const double el = std::fabs(got * grad_scale - ref * grad_scale);
  note("cross entropy scaled loss vs direct (abs)", el);
  EXPECT_LE(el, 1e-14);
  const Host dlogits = to_host(work);
  for (int i = 0; i < C; ++i) {
    if (kLabels[i] != minilst::kIgnoreLabel) continue;
    for (int c = 0; c < V; ++c) EXPECT_EQ(dlogits[i * V + c], 0.0) << "ignored row " << i;
  }
  // FD of the kernel's own scaled loss (it overwrites its input, so run it on a scratch copy).
  auto loss = [&] {
    Kokkos::deep_copy(work, logits);
    return grad_scale * K::cross_entropy_fused<double>(work, lab, grad_scale);
  };
  expect_grad_close("cross entropy dlogits", dlogits, fd_grad(logits, loss));
  // Ignored rows contribute nothing: changing them leaves the loss unchanged.
  Host l1 = l0;
  for (int c = 0; c < V; ++c) l1[1 * V + c] += 50.0 * (c + 1), l1[5 * V + c] = -7.0;
  from_host(work, l1);
  EXPECT_EQ(K::cross_entropy_fused<double>(work, lab, grad_scale), got);
}

TEST(CrossEntropy, StableForLargeLogits) {
  const int V = 5;
  const std::vector<std::int64_t> labels = {2, 4};
  Host l = {1000, 1001, 1002, 999, 1000.5, -1000, -1001, -1002, -999, -1000.5};
  Mat<double> logits("logits", 2, V);
  from_host(logits, l);
  const double got = K::cross_entropy_fused<double>(logits, ids(labels), 1.0);
  const double ref = naive_ce_sum(l, labels, V);
  EXPECT_TRUE(std::isfinite(got));
  EXPECT_NEAR(got, ref, 1e-12);
  const Host d = to_host(logits);
  for (int i = 0; i < 2; ++i) {
    double rs = 0;
    for (int c = 0; c < V; ++c) rs += d[i * V + c];
    // p = exp(logit - lse) with lse ~ 1000 (ulp 1.1e-13): the row sum is 0 to ~1e-13, not 1e-16.
    EXPECT_NEAR(rs, 0.0, 1e-12) << "softmax - onehot sums to zero";
  }
}

// =============================================================================================
// The reference twin (kernels/cross_entropy_reference.hpp) against the optimised kernel.

namespace {
template <class T>
void check_cross_entropy_reference(double tol_loss, double tol_grad, K::RowLayout layout) {
  Rng rng(600);
  const std::vector<std::int64_t> labels = {3, -100, 0, 36, 5, -100, 17, 30, 1};  // two ignored rows
  for (const int V : {37, 1001}) {
    const int C = int(labels.size());
    Host l = random_vec(std::size_t(C) * V, rng, -6, 6);
    for (int c = 0; c < V; ++c) l[std::size_t(4) * V + c] += 1000.0;  // a row of large logits
    const auto lab = ids(labels);
    const double grad_scale = 1.0 / 7.0;  // 1 / N_valid
    Mat<T> ref = mat_of<T>("logits", C, V, l), opt = mat_of<T>("logits", C, V, l);
    const double loss_ref = K::cross_entropy_fused_reference<T>(ref, lab, grad_scale);
    const double loss_opt = K::cross_entropy_fused<T>(opt, lab, grad_scale, layout);
    const std::string tag = "cross entropy " + type_name<T>() + " V=" + std::to_string(V) +
                            (layout == K::RowLayout::team_per_row ? " (team per row)" : "");
    expect_le(tag + ": loss ref vs opt (rel)", std::fabs(loss_ref - loss_opt) / std::fabs(loss_opt), tol_loss);
    const Host dr = to_host(ref);
    expect_le(tag + ": dlogits ref vs opt (rel)", rel_err(dr, to_host(opt)), tol_grad);
    for (int i = 0; i < C; ++i) {
      double rs = 0;
      for (int c = 0; c < V; ++c) {
        if (labels[i] == minilst::kIgnoreLabel) {
          EXPECT_EQ(dr[std::size_t(i) * V + c], 0.0) << "ignored row " << i;
        }
        rs += dr[std::size_t(i) * V + c];
      }
      EXPECT_NEAR(rs, 0.0, tol<T>(1e-12, 1e-6)) << "softmax - onehot sums to zero, row " << i;
    }
  }
}
}  // namespace

TEST(CrossEntropy, ReferenceMatchesOptimisedDouble) {
  check_cross_entropy_reference<double>(1e-13, 1e-12, K::RowLayout::thread_per_row);
}
TEST(CrossEntropy, ReferenceMatchesOptimisedFloat) {
  check_cross_entropy_reference<float>(1e-6, 1e-5, K::RowLayout::thread_per_row);
}
// The GPU's layout (a team per row, team reductions), run here on the host backend.
TEST(CrossEntropy, ReferenceMatchesTeamPerRowDoubleAndFloat) {
  check_cross_entropy_reference<double>(1e-13, 1e-12, K::RowLayout::team_per_row);
  check_cross_entropy_reference<float>(1e-6, 1e-5, K::RowLayout::team_per_row);
}

// =============================================================================================
// float

TEST(CrossEntropy, FloatInstantiationGivesAFiniteLoss) {
  Rng rng(60);
  Mat<float> lf("lf", 2, 4);
  fill_random(lf, rng);
  const double ce = K::cross_entropy_fused<float>(lf, ids({1, 3}), 0.5);
  EXPECT_TRUE(std::isfinite(ce));
}

// =============================================================================================
// Vocabulary-parallel: T shards of the columns against the whole row (the fused kernel).

namespace {
template <class T>
void check_cross_entropy_shards(double tol_loss, double tol_grad) {
  using A = minilst::accum_t<T>;
  Rng rng(700);
  const std::vector<std::int64_t> labels = {3, -100, 0, 36, 5, -100, 17, 30, 1, 20};  // two ignored rows
  const int C = int(labels.size()), V = 37;
  Host l = random_vec(std::size_t(C) * V, rng, -6, 6);
  for (int c = 0; c < V; ++c) l[std::size_t(4) * V + c] += 1000.0;  // a row of large logits
  const auto lab = ids(labels);
  const double grad_scale = 1.0 / 8.0;
  Mat<T> whole = mat_of<T>("logits", C, V, l);
  const double loss_whole = K::cross_entropy_fused<T>(whole, lab, grad_scale);
  const Host d_whole = to_host(whole);
  for (const int shards : {1, 2, 3, 4}) {  // 3: uneven (37 = 13 + 12 + 12)
    std::vector<std::int64_t> begin(shards + 1, 0);
    for (int t = 0; t < shards; ++t) begin[t + 1] = begin[t] + V / shards + (t < V % shards ? 1 : 0);
    std::vector<Mat<T>> part;
    Mat<A> gathered("gathered", std::size_t(shards) * C, 3);
    for (int t = 0; t < shards; ++t) {  // each rank's stats, gathered in rank order
      const std::int64_t vt = begin[t + 1] - begin[t];
      Host lt(std::size_t(C) * vt);
      for (int i = 0; i < C; ++i)
        for (std::int64_t c = 0; c < vt; ++c) lt[std::size_t(i) * vt + c] = l[std::size_t(i) * V + begin[t] + c];
      part.push_back(mat_of<T>("shard", C, int(vt), lt));
      K::ShardStats<T> stats("stats", C, 3);
      K::cross_entropy_shard_stats<T>(part[t], stats, lab, begin[t]);
      Kokkos::deep_copy(Kokkos::subview(gathered, Kokkos::make_pair(std::size_t(t) * C, std::size_t(t + 1) * C),
                                        Kokkos::ALL),
                        stats);
    }
    Host d_shards(std::size_t(C) * V);
    const std::string tag = std::string("cross entropy shards ") + (sizeof(T) == 2 ? "bf16" : type_name<T>().c_str()) +
                            " T=" + std::to_string(shards);
    double first_loss = 0;
    for (int t = 0; t < shards; ++t) {
      Vec<A> factor("factor", C);
      const double loss = K::cross_entropy_shard_combine<A>(gathered, shards, t, lab, factor, grad_scale);
      if (t == 0) first_loss = loss;
      EXPECT_EQ(loss, first_loss) << tag << ": every shard computes the same loss";
      K::ShardStats<T> own("own", C, 3);
      Kokkos::deep_copy(own, Kokkos::subview(gathered, Kokkos::make_pair(std::size_t(t) * C, std::size_t(t + 1) * C),
                                             Kokkos::ALL));
      K::cross_entropy_shard_grad<T>(part[t], own, factor, lab, begin[t], grad_scale);
      const Host dt = to_host(part[t]);
      const std::int64_t vt = begin[t + 1] - begin[t];
      for (int i = 0; i < C; ++i)
        for (std::int64_t c = 0; c < vt; ++c) d_shards[std::size_t(i) * V + begin[t] + c] = dt[std::size_t(i) * vt + c];
    }
    expect_le(tag + ": loss vs the whole row (rel)", std::fabs(first_loss - loss_whole) / std::fabs(loss_whole), tol_loss);
    expect_le(tag + ": dlogits vs the whole row (rel)", rel_err(d_whole, d_shards), tol_grad);
    for (int i = 0; i < C; ++i)
      if (labels[i] == minilst::kIgnoreLabel)
        for (int c = 0; c < V; ++c) EXPECT_EQ(d_shards[std::size_t(i) * V + c], 0.0) << tag << ": ignored row " << i;
  }
}
}  // namespace

TEST(CrossEntropy, VocabularyShardsMatchTheWholeRow) {
  check_cross_entropy_shards<double>(1e-14, 1e-13);
  check_cross_entropy_shards<float>(1e-6, 1e-5);
  check_cross_entropy_shards<minilst::bf16>(1e-6, 2e-2);
}
