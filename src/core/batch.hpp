// One micro-step's sequence: tokens and their labels, in global order (or a
// rank's shard of them, in local order); and which keys each token's attention
// may see (SequenceMask).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace minilst {

struct Batch {
  std::vector<std::int64_t> tokens;  // [S]
  std::vector<std::int64_t> labels;  // [S], label[i] = token[i+1] of the global sequence
  std::int64_t n_valid = 0;          // labels != kIgnoreLabel (kernels/types.hpp) in the *global* sequence
};

// Which decoder layers the sliding window applies to (model.sliding_window_layers): the
// layers l with l % every == offset (the default, every 1 offset 0: all of them), or,
// when `is_list`, exactly those of `listed` (sorted, distinct).
struct LayerPattern {
  int every = 1, offset = 0;
  std::vector<int> listed;
  bool is_list = false;

  bool has(int layer) const {
    return is_list ? std::binary_search(listed.begin(), listed.end(), layer) : layer % every == offset;
  }
  bool is_all() const { return !is_list && every == 1; }  // the default, written any way
  // The selected layers of 0..layers-1, in order.
  std::vector<int> of(int layers) const {
    std::vector<int> out;
    for (int l = 0; l < layers; ++l)
      if (has(l)) out.push_back(l);
    return out;
  }
  // "" or what is wrong with the pattern for a model of `layers` layers: an offset not
  // below the step, a listed layer out of range or not in increasing order.
  std::string problem(int layers) const {
    if (!is_list && (every < 1 || offset < 0 || offset >= every))
      return "every:" + std::to_string(every) + ":" + std::to_string(offset) + " needs N >= 1 and 0 <= OFFSET < N";
    for (std::size_t i = 0; i < listed.size(); ++i) {
      if (listed[i] < 0 || listed[i] >= layers)
        return "layer " + std::to_string(listed[i]) + " is out of range (model.layers = " + std::to_string(layers) +
               ": layers 0.." + std::to_string(layers - 1) + ")";
      if (i > 0 && listed[i] <= listed[i - 1]) return "the listed layers must be increasing and distinct";
    }
    return "";
  }
};

// The attention mask of a sequence, over global positions p = 0..S-1: packed documents
// and a sliding window. Documents start at 0 and at every position of doc_starts
// (strictly increasing, >= 0; a listed 0 is the first document's start); the window w
// (0: none) limits a query to its w latest keys.
//   doc_start(p)  the start of p's document
//   q_lo(p)       the first position query p may see: max(doc_start(p), p - w + 1) (w > 0),
//                 doc_start(p) (w = 0); key j is visible to query i iff q_lo(i) <= j <= i
//   rope(p)       p - doc_start(p): the rotary position restarts with each document
// The default (one document, no window) is plain causal attention: q_lo = 0, rope(p) = p.
// The window holds in the layers of window_layers (default: all); the others see their
// whole document. q_lo below is the windowed layers' (at_layer(l): the mask of layer l).
struct SequenceMask {
  std::vector<std::int64_t> doc_starts;  // the documents' first positions (0 implied)
  std::int64_t window = 0;               // keys a query sees at most, itself included (0: no window)
  LayerPattern window_layers;            // the layers the window applies to

  // Layer `layer` attends within a window.
  bool windowed(int layer) const { return window > 0 && window_layers.has(layer); }
  // The mask of the layers with the window (windowed) or of the others (the documents only).
  SequenceMask of_layers(bool windowed) const { return {doc_starts, windowed ? window : 0, {}}; }
  SequenceMask at_layer(int layer) const { return of_layers(windowed(layer)); }

  // More than one document: rotary positions differ from the global ones.
  bool has_documents() const { return !doc_starts.empty() && doc_starts.back() > 0; }
  // Plain causal attention: every query sees from position 0 (q_lo = 0 everywhere).
  bool causal_only() const { return !has_documents() && window == 0; }
  std::int64_t doc_start(std::int64_t p) const {
    const auto it = std::upper_bound(doc_starts.begin(), doc_starts.end(), p);
    return it == doc_starts.begin() ? 0 : *(it - 1);
  }
  std::int64_t q_lo(std::int64_t p) const {
    const std::int64_t d = doc_start(p);
    return window > 0 ? std::max(d, p - window + 1) : d;
  }
  std::int64_t rope_position(std::int64_t p) const { return p - doc_start(p); }
  // The same, for a list of positions (a rank's tokens in local order).
  std::vector<std::int64_t> q_lo(const std::vector<std::int64_t>& positions) const {
    std::vector<std::int64_t> out;
    out.reserve(positions.size());
    for (const auto p : positions) out.push_back(q_lo(p));
    return out;
  }
  std::vector<std::int64_t> rope_positions(const std::vector<std::int64_t>& positions) const {
    std::vector<std::int64_t> out;
    out.reserve(positions.size());
    for (const auto p : positions) out.push_back(rope_position(p));
    return out;
  }
  // "" or what is wrong with the mask (starts negative or not increasing, a negative window;
  // whether the window's layers are the model's is window_layers.problem's to say).
  std::string problem() const {
    if (window < 0) return "the sliding window (" + std::to_string(window) + ") must be >= 0";
    for (std::size_t d = 0; d < doc_starts.size(); ++d)
      if (doc_starts[d] < 0 || (d > 0 && doc_starts[d] <= doc_starts[d - 1]))
        return "document starts must be increasing positions >= 0 (start " + std::to_string(d) + ": " +
               std::to_string(doc_starts[d]) + ")";
    return "";
  }
};

}  // namespace minilst
