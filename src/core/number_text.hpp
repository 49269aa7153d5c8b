// The deck's rules for numbers written as text, shared by every file miniLST reads that
// holds numbers (the deck, machine files): a whole decimal integer, or a finite decimal number.
#pragma once

#include <string>

namespace minilst {

// A decimal integer: digits with an optional leading '-', nothing else (no blanks, no '+', no
// exponent, no hexadecimal); false also when it overflows 64 bits, and for "-0" (a sign on
// nothing is a typo, not a value).
bool parse_integer(const std::string& text, long long& out);

// A finite decimal number, subnormals included (strtod reports their underflow, yet they are
// exact values); hexadecimal floats, blanks, infinities and NaNs are refused, as is a value
// so small it rounds to zero.
bool parse_decimal(const std::string& text, double& out);

}  // namespace minilst
