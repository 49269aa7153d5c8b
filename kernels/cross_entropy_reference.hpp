// Plain reference of cross_entropy.hpp: softmax cross-entropy and its gradient as the
// obvious loops (the math library's exp, two exps per logit, no vectorised reductions);
// selected at run time in place of cross_entropy_fused, and validated against it in
// tests/kernels/test_cross_entropy.cpp (CrossEntropy.Reference*). Same signature, same
// semantics.
//   C tokens of a chunk, V vocabulary.
//   logits: [C, V] in: logits, out: dlogits (overwritten in place, =), labels: [C]
//   m_i = max_c logits_ic,  lse_i = m_i + log sum_c e^(logits_ic - m_i)
//   loss_i    = lse_i - logits_i[label_i]                        (0 where label_i == -100)
//   dlogits_i = (softmax(logits_i) - onehot(label_i)) * grad_scale   (0 where ignored)
// Returns sum_i loss_i (unscaled, summed in double); one work item per token.
#pragma once

#include "compat.hpp"
#include "types.hpp"

namespace minilst::kernels {

template <class T>
double cross_entropy_fused_reference(const Mat<T>& logits, const Vec<const std::int64_t>& labels,
                                     double grad_scale) {
  using A = accum_t<T>;
  const int V = static_cast<int>(logits.extent(1));
  double loss_sum = 0;
  Kokkos::parallel_reduce("cross_entropy_fused_reference", Kokkos::RangePolicy<ExecSpace>(0, logits.extent(0)),
      KOKKOS_LAMBDA(const int i, double& acc) {
        const auto label = labels(i);
        if (label == kIgnoreLabel) {
          for (int c = 0; c < V; ++c) logits(i, c) = T(0);
          return;
        }
        A mx = A(logits(i, 0));  // pass 1: the row max
        for (int c = 1; c < V; ++c) mx = A(logits(i, c)) > mx ? A(logits(i, c)) : mx;
        A sum = 0;  // pass 2: the softmax sum
        for (int c = 0; c < V; ++c) sum += compat::exp(A(logits(i, c)) - mx);
        acc += double(mx + compat::log(sum) - A(logits(i, label)));
        const A gs = A(grad_scale);
        for (int c = 0; c < V; ++c) {  // pass 3: the gradient, in place (each logit read, then written)
          const A p = compat::exp(A(logits(i, c)) - mx) / sum;
          logits(i, c) = T(p * gs - (c == label ? gs : A(0)));
        }
      },
      loss_sum);
  return loss_sum;
}

}  // namespace minilst::kernels
