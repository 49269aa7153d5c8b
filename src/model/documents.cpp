#include "model/documents.hpp"

#include "core/number_text.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <stdexcept>

namespace minilst {

namespace {
// The most documents a sequence may be cut into (their starts are a list of that length).
constexpr std::size_t kMaxDocuments = std::size_t(1) << 24;

// A whole number by the deck's rules (core/number_text.hpp: digits, no sign, exponent, blank or base).
std::int64_t whole_in(const std::string& text, const std::string& spec) {
  long long x = 0;
  if (!parse_integer(text, x)) throw std::invalid_argument("'" + spec + "': '" + text + "' is not a whole number");
  return x;
}

// A finite decimal number by the deck's rules.
double number_in(const std::string& text, const std::string& spec) {
  double x = 0;
  if (!parse_decimal(text, x)) throw std::invalid_argument("'" + spec + "': '" + text + "' is not a number");
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
std::vector<std::int64_t> starts_of(const std::string& spec, std::int64_t seq_len, Next next) {
  std::vector<std::int64_t> starts;
  for (std::int64_t p = next(); p < seq_len; p += next()) {
    if (starts.size() >= kMaxDocuments)
      throw std::invalid_argument("'" + spec + "' cuts run.seq_len = " + std::to_string(seq_len) +
                                  " into more than 2^24 documents: use longer documents");
    starts.push_back(p);
  }
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
      const std::int64_t x = whole_in(word, spec);
      if (x < 1 || x > std::int64_t(1e15))
        throw std::invalid_argument("'" + spec + "': a document length must be a whole number in [1, 1e15], not " + word);
      lengths.push_back(x);
    }
    if (lengths.empty()) throw std::invalid_argument("'" + spec + "': no document length (blank: leave run.documents unset)");
    std::size_t i = 0;
    return starts_of(spec, seq_len, [&] { return lengths[i++ % lengths.size()]; });
  }
  const auto kind = spec.substr(0, colon);
  const auto args = split(spec.substr(colon + 1), ':');
  if (spec.back() == ':' || args.empty()) throw std::invalid_argument("'" + spec + "': a parameter is missing after ':'");
  constexpr std::int64_t kLongest = std::int64_t(1e15);
  std::mt19937_64 rng(seed ^ 0x646f63756d656e74ull);  // "document": apart from the data's draws
  if (kind == "fixed" && args.size() == 1) {
    const std::int64_t n = whole_in(args[0], spec);
    if (n >= 1 && n <= kLongest) return starts_of(spec, seq_len, [&] { return n; });
  }
  if (kind == "uniform" && args.size() == 2) {
    const std::int64_t lo = whole_in(args[0], spec), hi = whole_in(args[1], spec);
    if (lo >= 1 && hi >= lo && hi <= kLongest) {
      std::uniform_int_distribution<std::int64_t> length{lo, hi};
      return starts_of(spec, seq_len, [&] { return length(rng); });
    }
  }
  std::vector<double> a;
  if (kind == "lognormal")
    for (const auto& s : args) a.push_back(number_in(s, spec));
  if (kind == "lognormal" && a.size() == 2 && a[1] >= 0 && a[1] < 40 && a[0] < 40) {
    std::lognormal_distribution<double> length{a[0], a[1]};
    return starts_of(spec, seq_len, [&] { return std::max<std::int64_t>(1, std::llround(std::min(length(rng), 1e15))); });
  }
  throw std::invalid_argument("'" + spec + "': expected lengths (\"61 3 1 17\"), fixed:N, uniform:A:B (1 <= A <= B <= "
                              "1e15, whole numbers) or lognormal:MEAN:SIGMA (0 <= SIGMA < 40, MEAN < 40)");
}

LayerPattern window_layers(const std::string& spec) {
  std::string text = spec;
  std::replace(text.begin(), text.end(), ',', ' ');
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  const auto whole = [&spec](const std::string& word, const char* what) {
    long long x = 0;
    if (!parse_integer(word, x) || x < 0 || x > 1 << 30 || word[0] == '-')
      throw std::invalid_argument("'" + spec + "': " + what + " must be a whole number >= 0 (digits alone), not " + word);
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
