// The deck's two specs of the attention mask (core/batch.hpp's SequenceMask).
// Packed documents: where the documents of a synthetic sequence start (run.documents).
//   "61 3 1 17"           lengths, repeated until the sequence is full (the last one cut at S)
//   "fixed:N"             documents of N tokens
//   "uniform:A:B"         lengths drawn uniformly from [A, B]
//   "lognormal:MEAN:SIGMA" lengths exp(N(MEAN, SIGMA^2)), rounded, at least 1 (real corpora's shape)
//   ""                    one document (plain causal attention)
// Draws use `seed` (run.seed): the same documents on every rank and every run of the deck.
// The starts after 0, strictly increasing, all < seq_len (SequenceMask::doc_starts).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/batch.hpp"

namespace minilst {

// Throws std::invalid_argument naming what is wrong with `spec`.
std::vector<std::int64_t> document_starts(const std::string& spec, std::int64_t seq_len, std::uint64_t seed);

// The layers of a sliding window (model.sliding_window_layers):
//   "all"              every layer (the default)
//   "every:N[:OFFSET]" the layers l with l % N == OFFSET (0 <= OFFSET < N): every:2 windows
//                      layers 0, 2, 4, ... (Gemma 2's alternation), every:2:1 layers 1, 3, 5, ...
//   "0 2 5"            exactly these layers (blanks or commas between them, any order)
// Whether they exist in the model is LayerPattern::problem's to say. Throws
// std::invalid_argument naming what is wrong with `spec`.
LayerPattern window_layers(const std::string& spec);

}  // namespace minilst
