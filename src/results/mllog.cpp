#include "results/mllog.hpp"

#include <chrono>
#include <cstdio>

namespace minilst {

void mllog(const std::string& key, const nlohmann::json& value, const nlohmann::json& metadata, MllogEvent event) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const char* type = event == MllogEvent::interval_start ? "INTERVAL_START"
                     : event == MllogEvent::interval_end ? "INTERVAL_END"
                                                         : "POINT_IN_TIME";
  nlohmann::ordered_json line;  // the order mlperf-logging writes
  line["namespace"] = "";
  line["time_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(now).count();
  line["event_type"] = type;
  line["key"] = key;
  line["value"] = value;
  line["metadata"] = metadata.is_null() ? nlohmann::json::object() : metadata;
  // dump(-1, ' ', false, replace): invalid UTF-8 in a value is replaced, never thrown about
  std::printf(":::MLLOG %s\n", line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  std::fflush(stdout);  // a line of its own in a log the launcher merges from several ranks
}

void mllog_result(bool complete, bool valid, double fom, const Reportability& reportable, const nlohmann::json& tokens_per_joule) {
  const std::string verdict = run_verdict(complete, valid);
  mllog("minilst_result", {{"verdict", verdict},
                           {"fom", fom},
                           {"fom_unit", "tokens/s per rank"},
                           {"reportable", reportable.word()},
                           {"reportable_reasons", reportable.reasons},
                           {"tokens_per_joule", tokens_per_joule}});
  mllog("run_stop", nullptr, {{"status", verdict == "VALID" ? "success" : "aborted"}, {"verdict", verdict}},
        MllogEvent::interval_end);
}

}  // namespace minilst
