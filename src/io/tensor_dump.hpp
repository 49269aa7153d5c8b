// The tensor dump (docs/metrics.md), for verification against an independent
// reference: tokens, labels, the step's loss, and every parameter and its
// gradient (first step, before the optimizer update), in global token order.
//   /tokens, /labels [S] (micro-step 0)   /micro_tokens, /micro_labels [A, S]
//   /loss scalar   /params/<name>, /grads/<name> (float64)   root: model shape + config
//   the attention mask (core/batch.hpp's SequenceMask): /doc_starts [n] the documents' first
//   positions (0 first), /layer_windows [L] each layer's sliding window (0: none), root
//   attribute window (model.sliding_window)
#pragma once

#include <string>
#include <vector>

#include "model/data.hpp"
#include "model/parameters.hpp"

namespace minilst {

// params, grads: host copies of the flat buffers (converted to double). Returns the name
// written: `path`, or a sibling where `path` was taken during the run.
std::string write_tensor_dump(const std::string& path, const ModelConfig& cfg, std::int64_t seq_len,
                       const std::string& config_yaml, const SequenceMask& mask,
                       const std::vector<Batch>& micro_batches, double loss,
                       const std::vector<double>& params, const std::vector<double>& grads);

}  // namespace minilst
