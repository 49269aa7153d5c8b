// tile_ops (kernels/tile_ops.hpp): the tile product behind the attention, cross-entropy and
// SwiGLU kernels. Its host form, blocked for the build's vector ISA (tile::host::blocking<A>():
// 4 x 64 on AVX-512, 6 x 16 on AVX2), against the plain triple loop: every row count from 1 to 13
// (the blocks' tails), the column counts callers pad to (multiples of 16), A read directly and
// transposed, = and +=, in float and double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/tile_ops.hpp"

namespace K = minilst::kernels;

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
namespace {
template <class A>
void check_tile_product() {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int M = 1; M <= 13; ++M)
    for (int N : {16, 32, 48, 64, 80, 128})
      for (int K : {1, 7, 64})
        for (bool transposed : {false, true})
          for (bool accumulate : {false, true}) {
            std::vector<A> a(std::size_t(M) * K), b(std::size_t(K) * N), c(std::size_t(M) * N), want;
            for (auto* v : {&a, &b, &c})
              for (auto& x : *v) x = A(u(rng));
            want = c;
            const int a_m = transposed ? 1 : K, a_k = transposed ? M : 1;  // A(m, k) = a[m a_m + k a_k]
            for (int m = 0; m < M; ++m)
              for (int n = 0; n < N; ++n) {
                A sum = accumulate ? want[m * N + n] : A(0);
                for (int k = 0; k < K; ++k) sum += a[m * a_m + k * a_k] * b[k * N + n];
                want[m * N + n] = sum;
              }
            K::tile::host::product(M, N, K, a.data(), a_m, a_k, b.data(), N, c.data(), N, accumulate);
            double err = 0;
            for (std::size_t i = 0; i < c.size(); ++i) err = std::max(err, double(std::abs(c[i] - want[i])));
            ASSERT_LT(err, sizeof(A) == 4 ? 1e-4 : 1e-12)
                << K::tile::host::blocking<A>() << ": M " << M << " N " << N << " K " << K << " transposed "
                << transposed << " accumulate " << accumulate;
          }
}
}  // namespace

TEST(TileOps, HostProductEveryRowTailAndPaddedWidthMatchesTheLoop) {
  check_tile_product<float>();
  check_tile_product<double>();
  std::printf("  host tile blocking: %s (float), %s (double)\n", K::tile::host::blocking<float>().c_str(),
              K::tile::host::blocking<double>().c_str());
}
#endif
