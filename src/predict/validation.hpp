// The published GPU runs miniLST's predictions are checked against (`minilst validate`): a table
// (YAML, validation/published.yaml) of the seed papers' measured times, throughputs and MFUs, each
// row the paper's configuration as a deck, its rank count and the paper's machine as a machine file;
// each figure predicted by the time model (predict/time_model.hpp) in the paper's own convention and
// set beside the published value. Rows miniLST cannot express are listed with the reason.
//   figure quantity     predicted as
//   step_s              the step's seconds (an iteration of the run: every micro-step)
//   phase_s:<phase>     one phase's seconds per step (a one-layer deck: a block's forward + backward)
//   tokens_per_s        tokens of a step over its time, every rank
//   tokens_per_s_per_gpu   the same per rank (MEMO's TGS)
//   tflops_per_gpu:<f>  FLOPs of a step per rank per second, FLOPs counted by formula f: a convention
//                       of predict/flops.hpp, or megatron (Megatron-LM's 96 B s l h^2 (1 + s / 6h +
//                       V / 16 l h), full recompute and square attention, as ALST counts)
//   mfu:<f>             the same over the figure's peak (peak_tflops, the paper's), else the machine's
// Errors are relative (predicted / published - 1); a figure printed to a few digits is matched where
// the prediction rounds to it (its `printed` text gives the digits); MFUs also in points.
#pragma once

#include <string>
#include <vector>

#include "io/deck.hpp"
#include "predict/time_model.hpp"

namespace minilst {

struct PublishedFigure {
  std::string kind;      // time | throughput | mfu
  std::string quantity;  // see above
  double value = 0;      // in the quantity's unit (seconds, tokens/s, TFLOP/s, a fraction)
  std::string printed;   // as the paper prints it ("0:09:24", "52.30%")
  std::string unit;      // the quantity's unit in words
  double resolution = 0;  // half the last printed digit, in the quantity's unit (0: exact)
  double peak_tflops = 0;  // mfu: the paper's peak per GPU (0: the machine file's)
};

struct ValidationRow {
  std::string label;
  std::string deck;                    // path, relative to the table's file
  std::vector<std::string> overrides;  // --set section.key=value
  int ranks = 1;
  std::string machine;                 // a machine file (relative to the table's file); "" : the table's
  std::vector<std::string> machine_overrides;  // key=value replacing the machine file's (what this row's software did)
  std::vector<PublishedFigure> figures;
  std::string reason;                  // not expressible: why (its figures are listed, not predicted)
};

struct ValidationTable {
  std::string id, paper, title, source;
  std::string machine;       // the paper's machine and software, as a machine file
  double max_error = 0.15;   // the largest |relative error| a time or throughput of this table may show
  double max_mean_error = 0.10;  // the largest mean |relative error| of its times and throughputs
  double max_mfu_points = 0.05;  // the largest |MFU error| in points (fractions of 1)
  std::string note;          // what the table's rows assume, in words
  std::vector<ValidationRow> rows;
};

// One figure's outcome.
struct FigureResult {
  const ValidationTable* table = nullptr;
  const ValidationRow* row = nullptr;
  const PublishedFigure* figure = nullptr;
  bool expressed = false;
  double predicted = 0, error = 0, error_points = 0;  // error: relative; error_points: MFU's difference
  std::string reason;  // not expressed: the row's reason, or why the prediction failed
};

struct TableStats {
  int figures = 0, expressed = 0;
  double mean_abs_error = 0, max_abs_error = 0;  // relative, over the expressed times and throughputs
  double mean_abs_points = 0, max_abs_points = 0;  // over the expressed MFUs
  bool within = true;                             // every figure within the table's limits
};

// Reads the table; throws std::runtime_error naming the file and the key.
std::vector<ValidationTable> load_validation(const std::string& path);

// Every figure of every table predicted (decks and machine files read relative to `path`'s folder).
std::vector<FigureResult> validate(const std::vector<ValidationTable>& tables, const std::string& path);

TableStats table_stats(const ValidationTable& table, const std::vector<FigureResult>& results);

// The prediction of one figure from a step's predicted time (exposed for the tests).
double predicted_figure(const PublishedFigure& f, const StepTime& t, const Deck& deck, const StepFlops& flops,
                        int ranks);

}  // namespace minilst
