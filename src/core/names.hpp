// The names of the enums a deck chooses from, one table per enum: the deck's
// choices, what the metrics file records and what the log prints all read it,
// so a name is written once.
//   template <> struct EnumNames<Color> {
//     static constexpr std::array<std::pair<Color, const char*>, 2> table{{{Color::red, "red"}, {Color::blue, "blue"}}};
//   };
//   name_of(Color::red) == "red";  parse_name("blue", c) sets c;  names_of<Color>() == {"red", "blue"}
// EnumMap<Color, double> holds one value per enum value (enums numbered 0 .. n-1 in their
// table's order), indexed by the enum, so a misspelt key does not compile:
//   EnumMap<Color, double> m;  m[Color::red] = 1;  for (Color c : all_of<Color>()) ... m[c] ...
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
constexpr std::size_t count_of() {
  return EnumNames<E>::table.size();
}

// Every value of E, in its table's order.
template <class E>
std::array<E, count_of<E>()> all_of() {
  std::array<E, count_of<E>()> out{};
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = EnumNames<E>::table[i].first;
  return out;
}

// True when E's table lists its values 0 .. n-1 in order (what EnumMap's indexing needs).
template <class E>
constexpr bool numbered_in_table_order() {
  for (std::size_t i = 0; i < count_of<E>(); ++i)
    if (std::size_t(EnumNames<E>::table[i].first) != i) return false;
  return true;
}

// One T per value of E, indexed by the enum (E's values 0 .. n-1 in its table's order).
template <class E, class T>
struct EnumMap {
  static_assert(numbered_in_table_order<E>(), "EnumMap: the enum's name table must list its values in order");
  std::array<T, count_of<E>()> values{};
  T& operator[](E e) { return values[std::size_t(e)]; }
  const T& operator[](E e) const { return values[std::size_t(e)]; }
  bool operator==(const EnumMap& o) const { return values == o.values; }
};

template <class E>
std::vector<std::string> names_of() {
  std::vector<std::string> names;
  for (const auto& entry : EnumNames<E>::table) names.push_back(entry.second);
  return names;
}

}  // namespace minilst
