// MLPerf-style event lines in the log, for the checkers and dashboards that read
// MLPerf logs (mlperf-logging's format):
//   :::MLLOG {"namespace": "", "time_ms": 1763970000000, "event_type": "POINT_IN_TIME",
//             "key": "train_loss", "value": 8.31, "metadata": {"step_num": 3}}
// One line per event on stdout, printed by the caller's rank (rank 0).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace minilst {

enum class MllogEvent { point_in_time, interval_start, interval_end };

void mllog(const std::string& key, const nlohmann::json& value, const nlohmann::json& metadata = nlohmann::json::object(),
           MllogEvent event = MllogEvent::point_in_time);

}  // namespace minilst
