// Softmax cross-entropy fused with its gradient, on a chunk of C tokens of the LM head.
//   logits: [C, V] in: logits, out: dlogits (overwritten in place), labels: [C]
//   loss_i    = logsumexp(logits_i) - logits_i[label_i]     (0 where label_i == -100)
//   dlogits_i = (softmax(logits_i) - onehot(label_i)) * grad_scale   (0 where ignored)
// grad_scale is 1 / N_valid of the whole sequence (all chunks, all ranks), so the
// chunks' gradients add up to the gradient of the mean loss. Returns sum_i loss_i
// (unscaled); the caller divides by N_valid. The [S, V] logits never exist at once.
#pragma once

#include <Kokkos_Core.hpp>

#include "compat.hpp"
#include "types.hpp"

namespace minilst::kernels {

template <class T>
double cross_entropy_fused(const Mat<T>& logits, const Vec<const std::int64_t>& labels, double grad_scale) {
  using A = accum_t<T>;
  const int V = static_cast<int>(logits.extent(1));
  double loss_sum = 0;
  Kokkos::parallel_reduce("cross_entropy_fused", Kokkos::RangePolicy<ExecSpace>(0, logits.extent(0)),
      KOKKOS_LAMBDA(const int i, double& acc) {
        const auto label = labels(i);
        if (label == kIgnoreLabel) {
          for (int c = 0; c < V; ++c) logits(i, c) = T(0);
          return;
        }
        A mx = logits(i, 0);
        for (int c = 1; c < V; ++c) mx = logits(i, c) > mx ? A(logits(i, c)) : mx;
        A sum = 0;
        for (int c = 0; c < V; ++c) sum += compat::exp(A(logits(i, c)) - mx);
        const A lse = mx + compat::log(sum);
        acc += double(lse - A(logits(i, label)));
        for (int c = 0; c < V; ++c) {
          const A p = compat::exp(A(logits(i, c)) - lse);
          logits(i, c) = T((p - (c == label ? A(1) : A(0))) * A(grad_scale));
        }
      },
      loss_sum);
  return loss_sum;
}

}  // namespace minilst::kernels
