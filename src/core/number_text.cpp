#include "core/number_text.hpp"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>

namespace minilst {

bool parse_integer(const std::string& text, long long& out) {
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return !text.empty() && ec == std::errc() && ptr == end && !(out == 0 && text[0] == '-');
}

bool parse_decimal(const std::string& text, double& out) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0])) ||
      text.find_first_of("xXpP") != std::string::npos)
    return false;
  errno = 0;
  char* end = nullptr;
  out = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(out)) return false;
  return errno != ERANGE || out != 0.0;
}

}  // namespace minilst
