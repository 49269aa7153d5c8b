#include "attention/strategy_factory.hpp"

#include "attention/local_attention.hpp"
#include "attention/ring_attention.hpp"
#include "attention/ulysses_attention.hpp"
#include "kernels/bf16.hpp"

namespace minilst {

template <class T>
AttentionFactory<T> make_attention_factory(const AttentionGeometry& g, ParallelSetup& par, const KernelChoice& kernels,
                                           PhaseTimers* timers) {
  return [&par, g, kernels, timers](Vec<const std::int64_t> positions, Vec<const std::int64_t> q_lo,
                                    const SequenceMask& mask) -> std::unique_ptr<AttentionStrategy<T>> {
    if (g.U() == 1 && g.R() == 1) return std::make_unique<LocalAttention<T>>(positions, q_lo, g.head_dim, kernels);
    std::unique_ptr<AttentionStrategy<T>> inner;
    if (g.R() > 1) {
      std::vector<std::vector<std::int64_t>> blocks;  // ring member r attends over its group's tokens
      for (int b = 0; b < g.R(); ++b) blocks.push_back(par.layout().group_positions(b));
      inner = std::make_unique<RingAttention<T>>(par.ring(), g.chunk(), blocks, mask, kernels, timers);
    } else {  // after the all-to-all: the group's tokens in member order, their q_lo in the same order
      inner = std::make_unique<LocalAttention<T>>(par.layout().group_positions(g.me_ring),
                                                  par.layout().group_q_lo(g.me_ring, mask), g.head_dim, kernels);
    }
    if (g.U() == 1) return inner;
    return std::make_unique<UlyssesAttention<T>>(par.ulysses(), g, std::move(inner), timers);
  };
}

template AttentionFactory<float> make_attention_factory<float>(const AttentionGeometry&, ParallelSetup&, const KernelChoice&,
                                                               PhaseTimers*);
template AttentionFactory<double> make_attention_factory<double>(const AttentionGeometry&, ParallelSetup&,
                                                                 const KernelChoice&, PhaseTimers*);
template AttentionFactory<bf16> make_attention_factory<bf16>(const AttentionGeometry&, ParallelSetup&, const KernelChoice&,
                                                             PhaseTimers*);

}  // namespace minilst
