// The run rules (RUN_RULES.md) as a check: whether a result may be reported, and
// every rule it breaks. A run can be VALID (its computation is right) and still not
// reportable (too few measured steps, no reference answer, a debug build, ...), as
// HPL and HPCG separate "correct" from "may be reported".
#pragma once

#include <string>
#include <vector>

namespace minilst {

// The minimum of measured steps (after the warm-up) a reportable run has.
constexpr int kReportableMeasuredSteps = 5;
// The loosest reference tolerance a reportable float or double run has (bf16: its stated
// loss tolerance, kBf16LossTolerance in io/deck.hpp).
constexpr double kReportableRtol = 1e-4;

struct RunRuleFacts {
  // Known before the first step (from the deck and the build).
  std::string build_type;            // CMAKE_BUILD_TYPE of the program
  int data_parallel = 1;             // D: the reference answer is a D = 1 problem
  bool reference_given = false;      // the deck has reference.losses
  bool problem_named = false;        // ... and reference.problem
  bool problem_matches = true;       // reference.problem is empty or equals the deck's problem digest
  double reference_rtol = 0;         // the tolerance the check used
  double rtol_limit = kReportableRtol;  // the loosest a reportable run may use (the precision's)
  int reference_steps = 0;           // the steps reference.losses lists
  double offload_bandwidth_gbs = 0;  // memory.offload_bandwidth_gbs (a throttled copy engine when > 0)
  int warmup_steps = 0;
  // Known once the ranks' placement is gathered (results/provenance.hpp).
  std::string shared_cores;          // "" or which ranks may run on one CPU core (cores_shared_note)
  // Known at the end: "" or why the node's load over the measured steps makes the run unreportable
  // (job/node_load.hpp: other processes' CPU time, steal).
  std::string node_load;
  // Known at the end.
  bool valid = false, complete = false;
  int measured_steps = 0, steps_done = 0;
  std::string reference_check = "none";  // none | PASSED | FAILED
  double mfu = -1;                   // the measured steps' MFU against MFU's peak (< 0: unknown)
};

struct Reportability {
  std::vector<std::string> reasons;  // every broken rule, in the order RUN_RULES.md lists them; empty: reportable
  bool yes() const { return reasons.empty(); }
  std::string reasons_text() const;  // "a; b" ("" when reportable)
  const char* word() const { return yes() ? "yes" : "no"; }  // the one spelling of every output
  std::string verdict() const;       // "yes" or "no (a; b)"
};

Reportability check_run_rules(const RunRuleFacts& facts);

// A run's verdict, spelled the same in every output (RESULT line, metrics file, JSON
// summary, MLPerf-style lines, the analysis tables): VALID (complete, every loss finite,
// the reference reproduced), INVALID (complete, not valid) or INCOMPLETE (stopped early;
// the RESULT line adds the reason in parentheses).
const char* run_verdict(bool complete, bool valid);
// Its exit code: 0 VALID, 3 INVALID, 4 INCOMPLETE.
int verdict_exit_code(bool complete, bool valid);

// The highest MFU a reportable run may show: above it, the peak it was measured against was
// measured too low (a model FLOP cannot run faster than the densest GEMM).
constexpr double kMaxReportableMfu = 1.0;

// The build types that count as optimised builds.
bool optimised_build(const std::string& build_type);

}  // namespace minilst
