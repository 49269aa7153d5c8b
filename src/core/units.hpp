// Unit factors, once: bytes per MiB, and the SI prefixes the time model uses.
#pragma once

namespace minilst {

inline constexpr double kMiB = 1024.0 * 1024.0;  // bytes
inline constexpr double kGiga = 1e9;
inline constexpr double kMicro = 1e-6;

}  // namespace minilst
