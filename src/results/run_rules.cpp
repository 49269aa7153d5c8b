#include "results/run_rules.hpp"

#include <cstdio>

namespace minilst {

bool optimised_build(const std::string& build_type) {
  return build_type == "Release" || build_type == "RelWithDebInfo";
}

Reportability check_run_rules(const RunRuleFacts& f) {
  Reportability r;
  auto& why = r.reasons;
  if (!f.complete) why.push_back("stopped before its last step");
  if (f.complete && !f.valid) why.push_back("not VALID");
  if (f.measured_steps < kReportableMeasuredSteps)
    why.push_back("fewer than " + std::to_string(kReportableMeasuredSteps) + " measured steps");
  if (f.warmup_steps < 1) why.push_back("no warm-up step");
  if (!f.reference_given)
    why.push_back("no reference answer");
  else if (f.data_parallel > 1)
    why.push_back("no reference answer for data parallelism D = " + std::to_string(f.data_parallel));
  else if (f.reference_check == "FAILED")
    why.push_back("reference check failed");
  if (f.reference_given && f.data_parallel == 1) {
    if (f.reference_steps < f.steps_done)
      why.push_back("the reference answer covers " + std::to_string(f.reference_steps) + " of " +
                    std::to_string(f.steps_done) + " steps");
    if (f.reference_rtol > f.rtol_limit) {
      char text[96];
      std::snprintf(text, sizeof text, "reference tolerance %g above %g", f.reference_rtol, f.rtol_limit);
      why.push_back(text);
    }
    if (!f.problem_named)
      why.push_back("the reference answer names no problem (reference.problem)");
    else if (!f.problem_matches)
      why.push_back("the deck's problem differs from its reference's");
  }
  if (!optimised_build(f.build_type))
    why.push_back("build type " + (f.build_type.empty() ? std::string("unset") : f.build_type) + ", not Release");
  if (f.offload_bandwidth_gbs > 0) {
    char text[96];
    std::snprintf(text, sizeof text, "copy engine throttled (memory.offload_bandwidth_gbs = %g)", f.offload_bandwidth_gbs);
    why.push_back(text);
  }
  if (!f.shared_cores.empty()) why.push_back("ranks share a CPU core (" + f.shared_cores + ")");
  if (!f.node_load.empty()) why.push_back(f.node_load);
  if (f.mfu > kMaxReportableMfu) {
    char text[96];
    std::snprintf(text, sizeof text, "MFU %.3f above 1 (the peak GEMM rate was measured too low)", f.mfu);
    why.push_back(text);
  }
  return r;
}

const char* run_verdict(bool complete, bool valid) { return !complete ? "INCOMPLETE" : valid ? "VALID" : "INVALID"; }

int verdict_exit_code(bool complete, bool valid) { return !complete ? 4 : valid ? 0 : 3; }

std::string Reportability::reasons_text() const {
  std::string out;
  for (const auto& reason : reasons) out += (out.empty() ? "" : "; ") + reason;
  return out;
}

std::string Reportability::verdict() const { return yes() ? "yes" : "no (" + reasons_text() + ")"; }

}  // namespace minilst
