// MLPerf-style event lines in the log, for the checkers and dashboards that read
// MLPerf logs (mlperf-logging's format):
//   :::MLLOG {"namespace": "", "time_ms": 1763970000000, "event_type": "POINT_IN_TIME",
//             "key": "train_loss", "value": 8.31, "metadata": {"step_num": 3}}
// One line per event on stdout, printed by the caller's rank (rank 0).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "results/run_rules.hpp"

namespace minilst {

enum class MllogEvent { point_in_time, interval_start, interval_end };

void mllog(const std::string& key, const nlohmann::json& value, const nlohmann::json& metadata = nlohmann::json::object(),
           MllogEvent event = MllogEvent::point_in_time);

// The run's result and its end, spelled as every other output spells them: the
// minilst_result event (verdict VALID, INVALID or INCOMPLETE; reportable "yes" or "no"
// with the rules broken; the FOM; tokens per joule or null) and run_stop (status
// "success" for VALID, else "aborted", MLPerf's words, with the verdict beside it).
void mllog_result(bool complete, bool valid, double fom, const Reportability& reportable, const nlohmann::json& tokens_per_joule);

}  // namespace minilst
