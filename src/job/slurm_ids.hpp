// The Slurm job's identifiers as they may enter file names and command arguments:
// SLURM_JOB_ID, SLURM_ARRAY_TASK_ID and SLURM_STEP_ID are set by Slurm to numbers,
// but they are only environment variables, and a path separator or a space in one
// must never reach a file name. Header-only.
#pragma once

#include <cstdlib>
#include <string>

namespace minilst {

// Whether `text` is a non-empty name part of letters, digits, '.', '_' and '-' only.
inline bool safe_name_part(const std::string& text) {
  if (text.empty()) return false;
  for (const unsigned char c : text)
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
      return false;
  return true;
}

// `text` with every character other than [A-Za-z0-9._-] replaced by '_'.
inline std::string sanitized_name_part(std::string text) {
  for (char& c : text)
    if (!safe_name_part(std::string(1, c))) c = '_';
  return text;
}

// The environment variable `name` when it is a safe name part, else "" (unset, empty or unsafe).
inline std::string safe_slurm_id(const char* name) {
  const char* v = std::getenv(name);
  return v && safe_name_part(v) ? std::string(v) : std::string();
}

}  // namespace minilst
