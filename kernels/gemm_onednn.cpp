#include "kernels/gemm_onednn.hpp"

#include <stdexcept>

#ifdef MINILST_HAVE_ONEDNN
#include <Kokkos_Core.hpp>
#include <dnnl.hpp>
#include <omp.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>
#endif

namespace minilst::kernels {

#ifdef MINILST_HAVE_ONEDNN
namespace {

using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;

// The CPU engine, made once. oneDNN's threads: OMP_NUM_THREADS where the environment sets it
// (scripts/env.sh sets it from MINILST_THREADS, as for a Kokkos OpenMP build), else as many as
// the Kokkos host space runs (1 on a Serial build): a rank never takes every core unasked.
dnnl::engine& engine() {
  static dnnl::engine e = [] {
    if (!std::getenv("OMP_NUM_THREADS")) omp_set_num_threads(Kokkos::DefaultHostExecutionSpace().concurrency());
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return e;
}

// A problem: what makes one primitive (and its memory descriptors).
using Key = std::tuple<bool, bool, std::size_t, std::size_t, std::size_t, std::size_t, std::size_t, std::size_t, dt, dt,
                       float, float>;

struct Matmul {
  dnnl::memory::desc a, b, c;
  std::size_t scratch_bytes;
  dnnl::matmul primitive;
  std::string impl;
};

// op(A) [m, k] and op(B) [k, n] as strided views of row-major storage; C [m, n].
Matmul make(const Key& key) {
  const auto [ta, tb, m, n, k, lda, ldb, ldc, in, out, alpha, beta] = key;
  const auto dim = [](std::size_t x) { return dnnl::memory::dim(x); };
  Matmul mm;
  mm.a = dnnl::memory::desc({dim(m), dim(k)}, in, ta ? dims{1, dim(lda)} : dims{dim(lda), 1});
  mm.b = dnnl::memory::desc({dim(k), dim(n)}, in, tb ? dims{1, dim(ldb)} : dims{dim(ldb), 1});
  mm.c = dnnl::memory::desc({dim(m), dim(n)}, out, dims{dim(ldc), 1});
  dnnl::primitive_attr attr;
  // Each thread brings its own scratchpad: with the library's (one shared by every primitive
  // unless oneDNN was built for concurrent execution, as Debian's is not) two threads running
  // primitives at once, as the attention tiles do, would pack into the same buffer.
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops ops;
    ops.append_sum(beta);
    attr.set_post_ops(ops);
  }
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(mm.a, mm.b, mm.c), attr, engine());
  mm.impl = pd.impl_info_str();
  mm.scratch_bytes = pd.scratchpad_desc().get_size();
  mm.primitive = dnnl::matmul(pd);
  return mm;
}

// The process's primitives, made on first use (any host thread may ask).
const Matmul& primitive(const Key& key) {
  static std::mutex mutex;
  static std::map<Key, Matmul> made;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = made.find(key);
  if (it == made.end()) it = made.emplace(key, make(key)).first;
  return it->second;
}

void run(const Key& key, const void* A, const void* B, void* C) {
  const Matmul& mm = primitive(key);
  thread_local dnnl::stream stream(engine());  // streams are not shared between threads; primitives are
  thread_local dnnl::memory scratch;           // this thread's scratchpad, grown to the largest asked
  thread_local std::size_t scratch_bytes = 0;
  if (mm.scratch_bytes > scratch_bytes) {
    scratch_bytes = mm.scratch_bytes;
    scratch = dnnl::memory({{dnnl::memory::dim(scratch_bytes)}, dt::u8, dnnl::memory::format_tag::a}, engine());
  }
  dnnl::memory a(mm.a, engine(), const_cast<void*>(A)), b(mm.b, engine(), const_cast<void*>(B)), c(mm.c, engine(), C);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
  if (scratch_bytes > 0) args.emplace(DNNL_ARG_SCRATCHPAD, scratch);
  mm.primitive.execute(stream, args);
  stream.wait();
}

}  // namespace

bool onednn_available() { return true; }

bool onednn_bf16_available() {
  static const bool can = [] {
    try {
      primitive({false, false, 16, 16, 16, 16, 16, 16, dt::bf16, dt::f32, 1.0f, 0.0f});
      return true;
    } catch (const dnnl::error&) {  // no implementation on this CPU (or under this ISA cap)
      return false;
    }
  }();
  return can;
}

void gemm_onednn_bf16(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const bf16* A,
                      std::size_t lda, const bf16* B, std::size_t ldb, float beta, float* c32, bf16* c16,
                      std::size_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // C = beta C, as the BLAS does (oneDNN takes no empty product)
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        if (c32) c32[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c32[i * ldc + j];
        else c16[i * ldc + j] = bf16(beta == 0.0f ? 0.0f : beta * float(c16[i * ldc + j]));
      }
    return;
  }
  const Key key{ta, tb, m, n, k, lda, ldb, ldc, dt::bf16, c32 ? dt::f32 : dt::bf16, alpha, beta};
  run(key, A, B, c32 ? static_cast<void*>(c32) : static_cast<void*>(c16));
}

void gemm_onednn_f32(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* A,
                     std::size_t lda, const float* B, std::size_t ldb, float beta, float* C, std::size_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    return;
  }
  run({ta, tb, m, n, k, lda, ldb, ldc, dt::f32, dt::f32, alpha, beta}, A, B, C);
}

std::string onednn_implementation(bool bf16) {
  const dt in = bf16 ? dt::bf16 : dt::f32;
  return primitive({false, false, 1024, 1024, 1024, 1024, 1024, 1024, in, dt::f32, 1.0f, 0.0f}).impl;
}

std::string cpu_matrix_isa() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto has = [&](dnnl::cpu_isa x) { return (isa & static_cast<unsigned>(x)) == static_cast<unsigned>(x); };
  if (has(dnnl::cpu_isa::avx512_core_amx)) return "amx_bf16";
  if (has(dnnl::cpu_isa::avx512_core_bf16)) return "avx512_bf16";
  return "none";
}

#else  // a build without oneDNN: nothing to call

bool onednn_available() { return false; }
bool onednn_bf16_available() { return false; }
void gemm_onednn_bf16(bool, bool, std::size_t, std::size_t, std::size_t, float, const bf16*, std::size_t, const bf16*,
                      std::size_t, float, float*, bf16*, std::size_t) {
  throw std::logic_error("gemm_onednn_bf16: this build has no oneDNN");
}
void gemm_onednn_f32(bool, bool, std::size_t, std::size_t, std::size_t, float, const float*, std::size_t, const float*,
                     std::size_t, float, float*, std::size_t) {
  throw std::logic_error("gemm_onednn_f32: this build has no oneDNN");
}
std::string onednn_implementation(bool) { return "none (built without oneDNN)"; }
std::string cpu_matrix_isa() {
#if defined(__x86_64__) && ((defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && __GNUC__ >= 11))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("amx-bf16")) return "amx_bf16";
  if (__builtin_cpu_supports("avx512bf16")) return "avx512_bf16";
#endif
  return "none";
}

#endif

}  // namespace minilst::kernels
