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

}  // namespace minilst
