// Mixed-precision GEMM: C = alpha op(A) op(B) + beta C where an operand is bf16
// (bf16 in, fp32 accumulate), on any backend, through the fp32 GEMM of the BLAS.
// C is cut into tiles of kMc x kNc; each tile is accumulated in fp32 over panels
// of kKc: the A and B panels are converted to fp32 (exact: bf16 -> float is a
// shift) into contiguous buffers and multiplied by SGEMM (Kokkos Kernels: the
// BLAS on hosts, cuBLAS on CUDA), then the tile is rounded once into C.
//   conversion per flop: 1/(2 kNc) + 1/(2 kMc) elements (0.15%);
//   fp32 buffers: kMc kKc + kKc kNc + kMc kNc floats = 5 MiB, allocated once per
//   process (released at Kokkos::finalize), or once per thread where the tiles run
//   one per thread (tiles::per_thread), outside the memory plan like the BLAS
//   library's own packing buffers. Tile sizes measured on Zen 5: 0.91-0.94 of
//   SGEMM's rate at the LM head's shapes (256 x 1024 x 256 tiles: 0.85).
// Operands already in fp32 (a weight gradient C) are copied the same way: one
// code path, and SGEMM always sees contiguous row-major tiles.
#pragma once

#include <KokkosBlas3_gemm.hpp>
#include <algorithm>
#include <string>
#include <vector>

#include "gemm_onednn.hpp"
#include "gemm_shape.hpp"
#include "kernel_choice.hpp"
#include "types.hpp"

namespace minilst::kernels {

namespace tiles {
constexpr std::size_t kMc = 512, kNc = 1024, kKc = 512;
constexpr bool kHost = Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible;

// The fp32 tile buffers, grown on demand and kept until Kokkos::finalize.
struct Fp32Buffers {
  Vec<float> a, b, c;
  static Fp32Buffers& get() {
    static Fp32Buffers* buffers = [] {
      auto* b = new Fp32Buffers;
      Kokkos::push_finalize_hook([b] { *b = Fp32Buffers{}; });
      return b;
    }();
    return *buffers;
  }
  static Mat<float> shape(Vec<float>& v, const char* label, std::size_t rows, std::size_t cols) {
    if (v.extent(0) < rows * cols) v = Vec<float>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), rows * cols);
    return Mat<float>(v.data(), rows, cols);
  }
};

// dst[r, c] = float(src[r0 + r, c0 + c]) * scale for the dst's extent.
template <class SV>
void to_fp32(const Mat<float>& dst, const SV& src, std::size_t r0, std::size_t c0, float scale) {
  const int cols = int(dst.extent(1));
  Kokkos::parallel_for("gemm_tile_to_fp32", Kokkos::RangePolicy<ExecSpace>(0, dst.extent(0)),
      KOKKOS_LAMBDA(const int r) {
        float* d = &dst(r, 0);
        const auto* s = &src(r0 + r, c0);
#ifdef MINILST_HOST_SIMD
#pragma omp simd
#endif
        for (int c = 0; c < cols; ++c) d[c] = float(s[c]) * scale;
      });
}

// dst[r0 + r, c0 + c] = src[r, c], rounded to dst's type.
template <class DV>
void from_fp32(const DV& dst, const Mat<float>& src, std::size_t r0, std::size_t c0) {
  using D = typename DV::non_const_value_type;
  const int cols = int(src.extent(1));
  Kokkos::parallel_for("gemm_tile_from_fp32", Kokkos::RangePolicy<ExecSpace>(0, src.extent(0)),
      KOKKOS_LAMBDA(const int r) {
        D* d = &dst(r0 + r, c0);
        const float* s = &src(r, 0);
#ifdef MINILST_HOST_SIMD
#pragma omp simd
#endif
        for (int c = 0; c < cols; ++c) d[c] = D(s[c]);
      });
}
}  // namespace tiles

namespace tiles {
// Host, several threads: the C tiles are shared out among the threads; each converts its own
// panels into its own buffers and multiplies them with oneDNN's fp32 matmul on that thread
// alone (oneDNN runs sequentially inside a parallel region), so no thread waits on another
// inside a tile: a threaded SGEMM per 512 x 1024 x 512 tile synchronises its threads every
// panel, and the conversions between the calls run apart from it. Buffers per thread as above.
// Only where there are at least two tiles per thread and they share out evenly enough: tiles /
// (threads x rounds) >= 0.85 (measured on 2 threads: one tile each ran at one thread's rate, and
// 3 tiles would leave one idle a third of the time; a threaded SGEMM per tile does better there).
inline bool per_thread(std::size_t m, std::size_t n) {
  const std::size_t threads = std::size_t(Kokkos::DefaultHostExecutionSpace().concurrency());
  const std::size_t tasks = ((m + kMc - 1) / kMc) * ((n + kNc - 1) / kNc);
  const std::size_t rounds = (tasks + threads - 1) / threads;
  return kHost && onednn_available() && threads > 1 && tasks >= 2 * threads && 100 * tasks >= 85 * threads * rounds;
}

// One tile C[i0.., j0..] (mc x nc) = alpha op(A) op(B) + beta C, on the calling thread.
template <class AV, class BV, class CV>
void tile_on_this_thread(Op op_a, Op op_b, float alpha, const AV& A, const BV& B, float beta, const CV& C,
                         std::size_t i0, std::size_t j0, std::size_t mc, std::size_t nc, std::size_t k) {
  thread_local std::vector<float> a_buf, b_buf, c_buf;  // this thread's fp32 tiles, grown to the largest
  const auto grown = [](std::vector<float>& v, std::size_t size) {
    if (v.size() < size) v.resize(size);
    return v.data();
  };
  float* c = grown(c_buf, mc * nc);
  for (std::size_t r = 0; r < mc; ++r)  // the tile starts as beta C (0 when beta = 0: C may be garbage)
    for (std::size_t q = 0; q < nc; ++q) c[r * nc + q] = beta == 0.0f ? 0.0f : float(C(i0 + r, j0 + q)) * beta;
  // dst [rows, cols] = float(src[r0.., c0..])
  const auto convert = [](float* dst, const auto& src, std::size_t r0, std::size_t c0, std::size_t rows,
                          std::size_t cols) {
    for (std::size_t r = 0; r < rows; ++r) {
      const auto* s = &src(r0 + r, c0);
      float* d = dst + r * cols;
#ifdef MINILST_HOST_SIMD
#pragma omp simd
#endif
      for (std::size_t q = 0; q < cols; ++q) d[q] = float(s[q]);
    }
  };
  for (std::size_t p0 = 0; p0 < k; p0 += kKc) {
    const std::size_t kc = std::min(kKc, k - p0);
    float* a = grown(a_buf, mc * kc);
    float* b = grown(b_buf, kc * nc);
    op_a == Op::N ? convert(a, A, i0, p0, mc, kc) : convert(a, A, p0, i0, kc, mc);  // stored as A is
    op_b == Op::N ? convert(b, B, p0, j0, kc, nc) : convert(b, B, j0, p0, nc, kc);
    gemm_onednn_f32(op_a == Op::T, op_b == Op::T, mc, nc, kc, alpha, a, op_a == Op::N ? kc : mc, b,
                    op_b == Op::N ? nc : kc, 1.0f, c, nc);
  }
  using D = typename CV::non_const_value_type;
  for (std::size_t r = 0; r < mc; ++r)
    for (std::size_t q = 0; q < nc; ++q) C(i0 + r, j0 + q) = D(c[r * nc + q]);
}
}  // namespace tiles

// fp32_path: how the fp32 tiles are multiplied (the run's gemm_fp32): the BLAS, or oneDNN on hosts;
// on hosts with several threads, one tile per thread through oneDNN (tiles::per_thread).
template <class AV, class BV, class CV>
void gemm_fp32_tiles(Op op_a, Op op_b, float alpha, const AV& A, const BV& B, float beta, const CV& C,
                     GemmPath fp32_path = GemmPath::blas) {
  using namespace tiles;
  const auto [m, n, k] = gemm_shape("gemm", op_a, op_b, A, B, C);
  if (m == 0 || n == 0) return;
  if constexpr (kHost) {
    if (per_thread(m, n)) {
      const std::size_t rows = m, cols = n, depth = k;  // a lambda may not capture structured bindings (C++17)
      const std::size_t n_i = (rows + kMc - 1) / kMc, n_j = (cols + kNc - 1) / kNc;
      ExecSpace().fence();
      using Host = Kokkos::DefaultHostExecutionSpace;
      Kokkos::parallel_for("gemm_fp32_tiles_per_thread", Kokkos::RangePolicy<Host>(0, n_i * n_j, Kokkos::ChunkSize(1)), [&](const int t) {
        const std::size_t i0 = (std::size_t(t) / n_j) * kMc, j0 = (std::size_t(t) % n_j) * kNc;
        tile_on_this_thread(op_a, op_b, alpha, A, B, beta, C, i0, j0, std::min(kMc, rows - i0), std::min(kNc, cols - j0),
                            depth);
      });
      Host().fence();
      return;
    }
  }
  auto& buf = Fp32Buffers::get();
  const char* ta = op_a == Op::N ? "N" : "T";
  const char* tb = op_b == Op::N ? "N" : "T";
  for (std::size_t j0 = 0; j0 < n; j0 += kNc) {
    const std::size_t nc = std::min(kNc, n - j0);
    for (std::size_t i0 = 0; i0 < m; i0 += kMc) {
      const std::size_t mc = std::min(kMc, m - i0);
      const Mat<float> c = Fp32Buffers::shape(buf.c, "gemm_tile_c", mc, nc);
      if (beta == 0.0f) Kokkos::deep_copy(ExecSpace(), c, 0.0f);
      else tiles::to_fp32(c, C, i0, j0, beta);  // the tile starts as beta C
      for (std::size_t p0 = 0; p0 < k; p0 += kKc) {
        const std::size_t kc = std::min(kKc, k - p0);
        // op(A)[i0.., p0..] and op(B)[p0.., j0..], stored as A and B are (transposed or not)
        const Mat<float> a = op_a == Op::N ? Fp32Buffers::shape(buf.a, "gemm_tile_a", mc, kc)
                                           : Fp32Buffers::shape(buf.a, "gemm_tile_a", kc, mc);
        const Mat<float> b = op_b == Op::N ? Fp32Buffers::shape(buf.b, "gemm_tile_b", kc, nc)
                                           : Fp32Buffers::shape(buf.b, "gemm_tile_b", nc, kc);
        op_a == Op::N ? tiles::to_fp32(a, A, i0, p0, 1.0f) : tiles::to_fp32(a, A, p0, i0, 1.0f);
        op_b == Op::N ? tiles::to_fp32(b, B, p0, j0, 1.0f) : tiles::to_fp32(b, B, j0, p0, 1.0f);
        if (kHost && fp32_path == GemmPath::onednn) {
          ExecSpace().fence();
          gemm_onednn_f32(op_a == Op::T, op_b == Op::T, mc, nc, kc, alpha, a.data(), a.stride(0), b.data(), b.stride(0),
                          1.0f, c.data(), c.stride(0));
        } else {
          KokkosBlas::gemm(ta, tb, alpha, a, b, 1.0f, c);
        }
      }
      tiles::from_fp32(C, c, i0, j0);
    }
  }
}

}  // namespace minilst::kernels
