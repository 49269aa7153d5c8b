// embedding (kernels/embedding.hpp, embedding_reference.hpp): x = E[tokens], dE += scatter(dx).
//  * The forward gathers rows; the backward against finite differences with repeated tokens, an
//    unused row stays zero, a second backward doubles dE (+=); in double.
//  * The reference twin's scatter-add against the optimised one, double and float: bitwise
//    equal, and equal to a host loop in the storage type.
//  * The float instantiation against double.
//  * Vocabulary shards (tensor parallelism): the shards' forwards add up to the whole table's
//    (each token's row from the one shard holding it, zeros elsewhere), each shard's backward
//    is its rows of the whole table's gradient; 1-3 shards, uneven too.
// Each check prints its observed error as "[err] <what> = <value>".
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernel_test_util.hpp"
#include "kernels/embedding.hpp"
#include "kernels/embedding_reference.hpp"

using namespace minilst::kernel_test;
namespace K = minilst::kernels;

TEST(Embedding, ForwardGathersRows) {
  Rng rng(5);
  const std::vector<std::int64_t> tok = {3, 1, 3, 6, 0, 3, 1, 5, 2};
  Mat<double> E("E", 7, 5), x("x", tok.size(), 5);
  fill_random(E, rng);
  K::embedding_forward<double>(x, ids(tok), E);
  const Host Eh = to_host(E), xh = to_host(x);
  for (std::size_t i = 0; i < tok.size(); ++i)
    for (int j = 0; j < 5; ++j) EXPECT_EQ(xh[i * 5 + j], Eh[tok[i] * 5 + j]);
}

TEST(Embedding, BackwardMatchesFiniteDifferencesWithRepeatedTokens) {
  Rng rng(6);
  const std::vector<std::int64_t> tok = {3, 1, 3, 6, 0, 3, 1, 5, 2};  // 3 thrice, 1 twice, 4 never
  const int V = 7, d = 5, S = int(tok.size());
  auto tv = ids(tok);
  Mat<double> E("E", V, d), x("x", S, d), R("R", S, d), dE("dE", V, d);
  fill_random(E, rng);
  fill_random(R, rng);
  K::embedding_backward<double>(dE, tv, R);
  const Host Rh = to_host(R);
  auto loss = [&] {
    K::embedding_forward<double>(x, tv, E);
    return dot(to_host(x), Rh);
  };
  const Host g = to_host(dE);
  expect_grad_close("embedding dE", g, fd_grad(E, loss));
  for (int j = 0; j < d; ++j) EXPECT_EQ(g[4 * d + j], 0.0) << "unused token row";
  // Accumulation: a second backward onto the same dE doubles it.
  K::embedding_backward<double>(dE, tv, R);
  EXPECT_LE(max_abs_diff(to_host(dE), scaled(g, 2.0)), 1e-15);
}

// =============================================================================================
// The reference twin (kernels/embedding_reference.hpp) against the optimised scatter-add.

namespace {
template <class T>
void check_embedding_backward_reference() {
  Rng rng(900);
  const int S = 11, V = 6, d = 150;  // d: two full 64-column blocks and a partial one
  const std::vector<std::int64_t> tokens = {4, 0, 4, 2, 5, 4, 0, 1, 2, 4, 3};  // token 4 four times
  const Host dE0 = random_vec(std::size_t(V) * d, rng), dx = random_vec(std::size_t(S) * d, rng);
  Mat<T> ref = mat_of<T>("dE", V, d, dE0), opt = mat_of<T>("dE", V, d, dE0), DX = mat_of<T>("dx", S, d, dx);
  const auto tok = ids(tokens);
  K::embedding_backward_reference<T>(ref, tok, DX);
  K::embedding_backward<T>(opt, tok, DX);
  // Both add the tokens in order, column by column: bitwise equal.
  expect_le("embedding backward " + type_name<T>() + ": dE ref vs opt (max abs)",
            max_abs_diff(to_host(ref), to_host(opt)), 0.0);
  std::vector<T> acc(dE0.begin(), dE0.end());  // and dE0 + the scatter of dx, in order, in T
  for (int i = 0; i < S; ++i)
    for (int c = 0; c < d; ++c) acc[std::size_t(tokens[i]) * d + c] += T(dx[std::size_t(i) * d + c]);
  expect_le("embedding backward " + type_name<T>() + ": dE ref vs host loop (max abs)",
            max_abs_diff(to_host(ref), Host(acc.begin(), acc.end())), 0.0);
}
}  // namespace

TEST(Embedding, ReferenceBackwardMatchesOptimisedBitwiseWithRepeatedTokensDouble) {
  check_embedding_backward_reference<double>();
}
TEST(Embedding, ReferenceBackwardMatchesOptimisedBitwiseWithRepeatedTokensFloat) {
  check_embedding_backward_reference<float>();
}

// =============================================================================================
// float

TEST(Embedding, FloatAgreesWithDouble) {
  Rng rng(60);
  Mat<double> E("E", 3, 4), x("x", 2, 4);
  fill_random(E, rng);
  Mat<float> Ef = mat_of<float>("Ef", 3, 4, to_host(E)), xf("xf", 2, 4);
  K::embedding_forward<double>(x, ids({2, 0}), E);
  K::embedding_forward<float>(xf, ids({2, 0}), Ef);
  K::embedding_backward<double>(E, ids({2, 0}), x);
  K::embedding_backward<float>(Ef, ids({2, 0}), xf);
  const double e = std::max(max_abs_diff(to_host(xf), to_host(x)), max_abs_diff(to_host(Ef), to_host(E)));
  expect_le("embedding float vs double x/dE (max abs)", e, 1e-5);
}

TEST(Embedding, VocabularyShardsAddUpToTheWholeTable) {
  Rng rng(8);
  const std::vector<std::int64_t> tok = {3, 1, 3, 6, 0, 3, 1, 5, 2};
  const int V = 7, d = 5, S = int(tok.size());
  const auto tv = ids(tok);
  Mat<double> E("E", V, d), x("x", S, d), dx("dx", S, d), dE("dE", V, d);
  fill_random(E, rng);
  fill_random(dx, rng);
  K::embedding_forward<double>(x, tv, E);
  K::embedding_backward<double>(dE, tv, dx);
  const Host Eh = to_host(E), xh = to_host(x), dEh = to_host(dE);
  for (const int shards : {1, 2, 3}) {
    Host sum(std::size_t(S) * d, 0.0);
    std::int64_t v0 = 0;
    for (int t = 0; t < shards; ++t) {
      const int rows = V / shards + (t < V % shards ? 1 : 0);
      Host eh(std::size_t(rows) * d);
      for (int r = 0; r < rows; ++r)
        for (int j = 0; j < d; ++j) eh[std::size_t(r) * d + j] = Eh[std::size_t(v0 + r) * d + j];
      const Mat<double> Et = mat_of<double>("Et", rows, d, eh);
      Mat<double> xt("xt", S, d), dEt("dEt", rows, d);
      K::embedding_forward<double>(xt, tv, Et, v0);
      const Host xth = to_host(xt);
      for (std::size_t k = 0; k < sum.size(); ++k) sum[k] += xth[k];
      K::embedding_backward<double>(dEt, tv, dx, v0);
      Mat<double> dEr("dEr", rows, d);
      K::embedding_backward_reference<double>(dEr, tv, dx, v0);
      const Host dth = to_host(dEt);
      EXPECT_EQ(rel_err(dth, to_host(dEr)), 0.0) << shards << " shards: the reference twin";
      for (int r = 0; r < rows; ++r)
        for (int j = 0; j < d; ++j)
          EXPECT_EQ(dth[std::size_t(r) * d + j], dEh[std::size_t(v0 + r) * d + j]) << shards << " shards, row " << v0 + r;
      v0 += rows;
    }
    for (std::size_t k = 0; k < sum.size(); ++k) EXPECT_EQ(sum[k], xh[k]) << shards << " shards: the rows add up";
  }
}
