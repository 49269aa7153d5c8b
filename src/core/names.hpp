// The names of the enums a deck chooses from, one table per enum: the deck's
// choices, what the metrics file records and what the log prints all read it,
// so a name is written once.
//   template <> struct EnumNames<Color> {
//     static constexpr std::array<std::pair<Color, const char*>, 2> table{{{Color::red, "red"}, {Color::blue, "blue"}}};
//   };
//   name_of(Color::red) == "red";  parse_name("blue", c) sets c;  names_of<Color>() == {"red", "blue"}
#pragma once

#include <array>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace minilst {

template <class E>
struct EnumNames;  // specialised beside each enum

template <class E>
std::string name_of(E value) {
  for (const auto& [v, name] : EnumNames<E>::table)
    if (v == value) return name;
  throw std::logic_error("name_of: an enum value without a name");
}

// false when `text` names no value (then `out` is unchanged).
template <class E>
bool parse_name(const std::string& text, E& out) {
  for (const auto& [v, name] : EnumNames<E>::table)
    if (text == name) {
      out = v;
      return true;
    }
  return false;
}

template <class E>
std::vector<std::string> names_of() {
  std::vector<std::string> names;
  for (const auto& entry : EnumNames<E>::table) names.push_back(entry.second);
  return names;
}

}  // namespace minilst
