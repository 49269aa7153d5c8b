// The operations a rank's communication is counted under (parallel/communicator.hpp counts the
// bytes each call sends to other ranks; predict/comm_model.hpp predicts them; the metrics file
// records the step's operations as /comm/<op>/bytes), one name table as every enum's.
#pragma once

#include <cstdint>

#include "core/names.hpp"

namespace minilst {

enum class CommOp {
  alltoall,        // Ulysses' all-to-alls
  ring,            // ring attention's K/V blocks and their gradients
  rsa_allreduce,   // RSA's seed backward: the all-reduces of dK, dV
  allreduce,       // the gradient's all-reduce (ZeRO 0, 1)
  reduce_scatter,  // the gradient's reduce-scatters (ZeRO 2, 3)
  allgather,       // the weights' all-gathers (ZeRO 1-3)
  grad_norm,       // the gradient norm's square sum (ZeRO 2, 3)
  tp_allgather,    // tensor parallelism: the sequence's all-gathers before each split block
  tp_reduce_scatter,  // ... and its reduce-scatters after them
  tp_grad_sum,     // ... and the sums of replicated parameters' gradients (norms, shared kv heads)
  tensor_dump,     // the tensor dump's gathers (not a step's)
  probe,           // `minilst probe`'s link measurements (not a step's)
};
template <>
struct EnumNames<CommOp> {
  static constexpr std::array<std::pair<CommOp, const char*>, 12> table{{{CommOp::alltoall, "alltoall"},
                                                                        {CommOp::ring, "ring"},
                                                                        {CommOp::rsa_allreduce, "rsa_allreduce"},
                                                                        {CommOp::allreduce, "allreduce"},
                                                                        {CommOp::reduce_scatter, "reduce_scatter"},
                                                                        {CommOp::allgather, "allgather"},
                                                                        {CommOp::grad_norm, "grad_norm"},
                                                                        {CommOp::tp_allgather, "tp_allgather"},
                                                                        {CommOp::tp_reduce_scatter, "tp_reduce_scatter"},
                                                                        {CommOp::tp_grad_sum, "tp_grad_sum"},
                                                                        {CommOp::tensor_dump, "tensor_dump"},
                                                                        {CommOp::probe, "probe"}}};
};
// The operations of a training step (the metrics file's /comm/<op>): all but the last two.
constexpr bool step_op(CommOp op) { return op != CommOp::tensor_dump && op != CommOp::probe; }

// Bytes sent per operation.
using CommBytes = EnumMap<CommOp, std::uint64_t>;

}  // namespace minilst
