// The operand convention and shape check shared by the GEMMs (gemm.hpp, gemm_tiles.hpp,
// gemm_reference.hpp): C [m, n] = op(A) op(B), op(X) = X ("N") or X^T ("T").
#pragma once

#include <stdexcept>
#include <string>

namespace minilst::kernels {

enum class Op { N, T };

// The shape of C = op(A) op(B): {m, n, k}; throws std::invalid_argument, naming `who`, when they do not match.
struct GemmShape {
  std::size_t m, n, k;
  std::string text() const { return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k); }  // "MxNxK"
};
template <class AV, class BV, class CV>
GemmShape gemm_shape(const char* who, Op op_a, Op op_b, const AV& A, const BV& B, const CV& C) {
  const std::size_t m = C.extent(0), n = C.extent(1);
  const std::size_t k = op_a == Op::N ? A.extent(1) : A.extent(0);
  const std::size_t am = op_a == Op::N ? A.extent(0) : A.extent(1);
  const std::size_t bk = op_b == Op::N ? B.extent(0) : B.extent(1);
  const std::size_t bn = op_b == Op::N ? B.extent(1) : B.extent(0);
  if (am != m || bk != k || bn != n)
    throw std::invalid_argument(std::string(who) + ": shapes do not match: op(A) [" + std::to_string(am) + "," +
                                std::to_string(k) + "], op(B) [" + std::to_string(bk) + "," + std::to_string(bn) +
                                "], C [" + std::to_string(m) + "," + std::to_string(n) + "]");
  return {m, n, k};
}

}  // namespace minilst::kernels
