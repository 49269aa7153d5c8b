#include "kernels/gemm_bf16_cublas.hpp"

#include <Kokkos_Core.hpp>
#include <cublas_v2.h>

#include <climits>
#include <stdexcept>
#include <string>

namespace minilst::kernels {

namespace {
void check(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(call) + " failed: cuBLAS status " + std::to_string(int(s)));
}

int as_int(std::size_t x, const char* what) {
  if (x > std::size_t(INT_MAX)) throw std::runtime_error(std::string("gemm_bf16_cublas: ") + what + " exceeds INT_MAX");
  return int(x);
}

// One handle per process, on Kokkos's default CUDA stream; destroyed at Kokkos::finalize.
cublasHandle_t handle() {
  static cublasHandle_t h = [] {
    cublasHandle_t created = nullptr;
    check(cublasCreate(&created), "cublasCreate");
    Kokkos::push_finalize_hook([created] { cublasDestroy(created); });
    return created;
  }();
  check(cublasSetStream(h, Kokkos::Cuda().cuda_stream()), "cublasSetStream");
  return h;
}
}  // namespace

void gemm_bf16_cublas(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const bf16* A,
                      std::size_t lda, const bf16* B, std::size_t ldb, float beta, float* c32, bf16* c16,
                      std::size_t ldc) {
  if (m == 0 || n == 0) return;
  // cuBLAS wants every leading dimension >= 1, also for an operand it does not read (k = 0:
  // C = beta C), where a [rows, 0] view's row stride is 0.
  const auto at_least_one = [](std::size_t ld) { return ld > 0 ? ld : std::size_t(1); };
  lda = at_least_one(lda);
  ldb = at_least_one(ldb);
  void* C = c32 ? static_cast<void*>(c32) : static_cast<void*>(c16);
  check(cublasGemmEx(handle(), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, as_int(n, "n"),
                     as_int(m, "m"), as_int(k, "k"), &alpha, B, CUDA_R_16BF, as_int(ldb, "ldb"), A, CUDA_R_16BF,
                     as_int(lda, "lda"), &beta, C, c32 ? CUDA_R_32F : CUDA_R_16BF, as_int(ldc, "ldc"),
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
}

}  // namespace minilst::kernels
