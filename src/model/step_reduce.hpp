// The data-parallel half of a training step, in one place for the driver and the
// tests: every rank holds the gradient of its own tokens, scaled by 1/D (D the
// data-parallel replicas; sequence-parallel ranks hold disjoint parts of the same
// sequences), so summing over every rank gives the step's gradient, the mean
// over replicas:  g = sum_ranks g_rank,  loss = (sum_ranks loss_rank) / D.
#pragma once

#include <mpi.h>

#include <vector>

#include "core/phases.hpp"
#include "model/trainer.hpp"
#include "parallel/parallel_setup.hpp"

namespace minilst {

// After Trainer::compute_gradients(local, 1/D) on every rank: sums the gradients
// over all ranks (the all-reduce, or ZeRO's last reduce-scatters; offload: the
// gradient shard reaches the host), timed as "comm", and returns the step's mean loss.
template <class T>
double reduce_step(Trainer<T>& trainer, ParallelSetup& par, double local_loss, PhaseTimers* timers) {
  {
    ScopedPhase phase(timers, Phase::comm);
    trainer.reduce_gradients();
  }
  if (par.world().size() == 1) return local_loss;
  double loss = local_loss;
  MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, par.world_comm());  // a host scalar: plain MPI
  return loss / par.dp_size();
}

}  // namespace minilst
