// 64-bit FNV-1a (Fowler-Noll-Vo): a fast fingerprint of bytes, not a cryptographic hash.
// It names a problem by its keys (io/deck.cpp), a machine file by its bytes
// (app/run_prediction.cpp), and compares texts across ranks (job/agreement.cpp).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace minilst {

struct Fnv1a {
  std::uint64_t h = 14695981039346656037ull;  // the offset basis
  void add(std::string_view bytes) {
    for (const unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;  // the FNV prime
  }
  std::string hex() const {  // 16 hex digits
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
    return text;
  }
};

}  // namespace minilst
