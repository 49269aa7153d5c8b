// The captured tensors of every rank (capturing_attention.hpp), put together on rank 0
// in global token order, so that a layout's shards compare with the single-rank
// reference tensor by tensor. Each rank says where its rows and columns go:
//   q, k, v, o, dq, dk, dv  rows: the rank's global positions (local order), columns: its
//                           tensor-parallel slice's query or kv heads (all at T = 1)
//   lse                     rows: its attention group's positions (Ulysses: the group's
//                           tokens after the all-to-all; else its own), columns: its
//                           query heads [head_first, head_first + head_count) of its
//                           slice's (q_first + ...: of H),
//                           in head_chunks blocks of [S_group, head_count / head_chunks]
//                           (head-chunked Ulysses keeps them chunk by chunk)
// and its data-parallel replica d: its micro-step m is global micro-step d A + m (the
// reference runs the D A micro-steps of the step in that order).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "app/verify_capturing_attention.hpp"

namespace minilst::verify {

struct RankPlacement {
  int replica = 0;                              // data-parallel index d
  std::vector<std::int64_t> positions;          // [S_local] global positions of the rows
  std::vector<std::int64_t> group_positions;    // [S_group] the lse rows' positions
  int head_first = 0, head_count = 0;           // the lse columns (query heads)
  int head_chunks = 1;                          // ... in this many blocks, one after another
  int q_first = 0, q_count = -1;                // tensor parallelism: the slice's query heads (-1: all)
  int kv_first = 0, kv_count = -1;              // ... and kv heads
  bool kv_partial = false;                      // dk, dv are partial sums (kv heads replicated over
                                                // tensor-parallel ranks): added up, not placed
};

// The step's shape as rank 0 assembles it.
struct CaptureShape {
  std::int64_t seq_len = 0;
  int layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int micro_per_replica = 0, replicas = 1;
  bool lse = true;  // whether the ranks captured a log-sum-exp
  // Columns of tensor t in the global [S, cols] tensor.
  std::int64_t cols(int t) const {
    if (t == kLse) return heads;
    return (t == kK || t == kV || t == kDk || t == kDv) ? std::int64_t(kv_heads) * head_dim
                                                        : std::int64_t(heads) * head_dim;
  }
};

// Collective over comm. Rank 0 returns [D A micro-steps][L layers] of global [S, cols]
// tensors (lse empty when !shape.lse); the other ranks return an empty capture.
StepCapture gather_to_root(const StepCapture& mine, const RankPlacement& where, const CaptureShape& shape, MPI_Comm comm);

}  // namespace minilst::verify
