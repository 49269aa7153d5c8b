// `minilst verify DECK`: certifies a deck's parallel layout against the single-rank float64
// reference, in one MPI job (docs/verify.md). The deck's first step (all its micro-steps,
// every data-parallel replica) runs in the deck's layout, memory policy and precision with
// every rank's attention observed (capturing_attention.hpp); rank 0 then runs the same
// data from the same initial weights on one rank in float64 (plain local attention, the
// default policy, no chunks) and compares, as ||run - reference|| / ||reference|| per
// tensor in global token order (gather.hpp), in this order:
//   forward   per layer 0..L-1: q, k, v (after RoPE), o, lse (attention output, log-sum-exp)
//   loss
//   backward  per layer L-1..0: do (the attention output's gradient), dq, dk, dv (the
//             attention inputs' gradients),
//             then every weight gradient (embed, layers.<l>.*, final_norm, lm_head)
// at the run precision's tolerance (tolerance.hpp). Prints the table and a RESULT line,
// writes the table to HDF5 (--out, or beside the metrics file: <stem>.verify.h5) and,
// with --export, the reference step's tensors (verify_export.hpp).
#pragma once

#include <string>

#include "app/run_context.hpp"
#include "io/deck.hpp"

namespace minilst {

struct VerifyArgs {
  std::string out;          // the table's HDF5 file ("" : beside the metrics file)
  std::string export_path;  // the reference step's tensors ("" : none)
};

// Exit code: 0 PASSED, 3 FAILED, 2 refused (bad deck, unwritable output); collective.
int run_verify(const Deck& deck, const RunContext& ctx, const VerifyArgs& args);

}  // namespace minilst
