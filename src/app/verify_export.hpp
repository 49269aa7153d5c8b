// The files `minilst verify` writes (rank 0, atomically: io/h5.hpp's AtomicFile, each name
// checked before the step by h5::prepare_output). Both layouts are docs/verify.md's.
//   table   schema "minilst-verify": /table/{layer, tensor, rel_err, tol, ok} [n rows], root
//           attributes verdict, certified, layout, precision, ranks, first_failure, config
//   export  schema "minilst-verify-export": the reference step's inputs, masks, per-layer
//           attention tensors, loss, weights and gradients, for checking another framework
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/batch.hpp"
#include "core/config.hpp"
#include "app/verify_capturing_attention.hpp"

namespace minilst::verify {

struct CheckRow {
  int layer = -1;      // -1: not a layer's tensor (the loss, a weight gradient)
  std::string tensor;  // "o", "dq", "loss", "layers.1.wq", ...
  double rel_err = 0, tol = 0;
  bool ok() const { return rel_err <= tol; }  // NaN fails
};

struct VerifySummary {
  std::string verdict, layout, precision, first_failure, config_yaml;
  int ranks = 1;
  double score_std = 0, moving_max = 0;  // the reference's attention scores: std, rows whose maximum moves
};

void write_table(const std::string& path, const std::vector<CheckRow>& rows, const VerifySummary& s);

// The reference step: its micro-steps' sequences (global order), the mask, its captured
// tensors [micro][layer] (natural order), its mean loss, weights and gradients (flat,
// parameter_layout order).
struct ReferenceStep {
  std::vector<Batch> batches;
  SequenceMask mask;
  StepCapture tensors;
  double loss = 0;
  std::vector<double> params, grads;
};

void write_export(const std::string& path, const ModelConfig& cfg, std::int64_t seq_len, const ReferenceStep& ref,
                  const VerifySummary& s);

}  // namespace minilst::verify
