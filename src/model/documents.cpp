#include "model/documents.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <stdexcept>

namespace minilst {

namespace {
double number_in(const std::string& text, const std::string& spec) {
  std::size_t used = 0;
  double x = 0;
  try {
    x = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !std::isfinite(x))
    throw std::invalid_argument("'" + spec + "': '" + text + "' is not a number");
  return x;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, sep)) out.push_back(part);
  return out;
}

// The starts of documents of the lengths `next()` gives, until seq_len is covered.
template <class Next>
std::vector<std::int64_t> starts_of(std::int64_t seq_len, Next next) {
  std::vector<std::int64_t> starts;
  for (std::int64_t p = next(); p < seq_len; p += next()) starts.push_back(p);
  return starts;
}
}  // namespace

std::vector<std::int64_t> document_starts(const std::string& spec, std::int64_t seq_len, std::uint64_t seed) {
  if (spec.empty()) return {};
  const auto colon = spec.find(':');
  if (colon == std::string::npos) {  // a list of lengths, repeated
    std::vector<std::int64_t> lengths;
    std::istringstream in(spec);
    for (std::string word; in >> word;) {
      const double x = number_in(word, spec);
      if (x < 1 || x != std::floor(x) || x > 1e15)
        throw std::invalid_argument("'" + spec + "': a document length must be a whole number >= 1, not " + word);
      lengths.push_back(std::int64_t(x));
    }
    if (lengths.empty()) return {};
    std::size_t i = 0;
    return starts_of(seq_len, [&] { return lengths[i++ % lengths.size()]; });
  }
  const auto kind = spec.substr(0, colon);
  const auto args = split(spec.substr(colon + 1), ':');
  std::vector<double> a;
  for (const auto& s : args) a.push_back(number_in(s, spec));
  std::mt19937_64 rng(seed ^ 0x646f63756d656e74ull);  // "document": apart from the data's draws
  if (kind == "fixed" && a.size() == 1 && a[0] >= 1 && a[0] == std::floor(a[0]))
    return starts_of(seq_len, [&] { return std::int64_t(a[0]); });
  if (kind == "uniform" && a.size() == 2 && a[0] >= 1 && a[1] >= a[0] && a[0] == std::floor(a[0]) &&
      a[1] == std::floor(a[1])) {
    std::uniform_int_distribution<std::int64_t> length{std::int64_t(a[0]), std::int64_t(a[1])};
    return starts_of(seq_len, [&] { return length(rng); });
  }
  if (kind == "lognormal" && a.size() == 2 && a[1] >= 0 && a[0] < 40) {
    std::lognormal_distribution<double> length{a[0], a[1]};
    return starts_of(seq_len, [&] { return std::max<std::int64_t>(1, std::llround(std::min(length(rng), 1e15))); });
  }
  throw std::invalid_argument("'" + spec + "': expected lengths (\"61 3 1 17\"), fixed:N, uniform:A:B (1 <= A <= B) "
                              "or lognormal:MEAN:SIGMA (SIGMA >= 0, MEAN < 40)");
}

LayerPattern window_layers(const std::string& spec) {
  std::string text = spec;
  std::replace(text.begin(), text.end(), ',', ' ');
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  const auto whole = [&spec](const std::string& word, const char* what) {
    const double x = number_in(word, spec);
    if (x < 0 || x != std::floor(x) || x > 1 << 30)
      throw std::invalid_argument("'" + spec + "': " + what + " must be a whole number >= 0, not " + word);
    return int(x);
  };
  LayerPattern p;
  if (words.size() == 1 && words[0] == "all") return p;
  if (words.size() == 1 && words[0].rfind("every:", 0) == 0) {
    const auto args = split(words[0].substr(6), ':');
    if (args.empty() || args.size() > 2 || words[0].back() == ':')
      throw std::invalid_argument("'" + spec + "': expected every:N or every:N:OFFSET");
    p.every = whole(args[0], "N");
    p.offset = args.size() == 2 ? whole(args[1], "OFFSET") : 0;
    if (p.every < 1 || p.offset >= p.every)
      throw std::invalid_argument("'" + spec + "': every:N:OFFSET needs N >= 1 and OFFSET < N");
    return p;
  }
  if (words.empty())
    throw std::invalid_argument("'" + spec + "': expected all, every:N[:OFFSET] or layer numbers (\"0 2 5\")");
  p.is_list = true;
  for (const auto& w : words) p.listed.push_back(whole(w, "a layer"));
  std::sort(p.listed.begin(), p.listed.end());
  const auto twice = std::adjacent_find(p.listed.begin(), p.listed.end());
  if (twice != p.listed.end())
    throw std::invalid_argument("'" + spec + "': layer " + std::to_string(*twice) + " is listed twice");
  return p;
}

}  // namespace minilst
