// Fuzzing the deck: mutated decks go through everything `minilst run` does
// before it allocates (the parser, the rules between keys, the parallel layout for
// a world size, the memory model of `minilst plan`), in process, with a fixed seed.
// Every deck must be accepted or refused with a DeckError or an error message;
// anything else escaping, a crash, or a deck taking more than --hang-s seconds is
// a failure. Prints the counts; exit 0 when there are no failures.
//   fuzz_deck --decks N [--seed S] [--hang-s X] [--keep DIR] BASE.yaml...
//   fuzz_deck --corpus DIR...   every deck in DIR must be refused (exit 2 material)
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "app/plan.hpp"
#include "io/deck.hpp"

namespace fs = std::filesystem;
using minilst::DeckError;

namespace {

// Values that broke or fooled parsers: huge, negative, non-numeric, YAML syntax.
const std::vector<std::string> kValues = {
    "0", "1", "-1", "2", "3", "7", "40", "1024", "2147483647", "2147483648", "4294967296", "4294967336",
    "9223372036854775807", "9223372036854775808", "-9223372036854775809", "1e12", "1e308", "2e302", "1e-308",
    "nan", ".nan", "inf", "-inf", ".inf", "0x10", "0o17", "1_000", " 40", "40 ", "+40", "4.0", "4e1", "''", "\"\"",
    "~", "null", "[1, 2]", "{a: 1}", "auto", "true", "no", "&a 3", "*a", "!!int 3", "|\n    3", ">\n    3",
    "\"\\u0000\"", "x", std::string(300, 'a'), "-", "?", ":", "#", "%YAML 1.2", "\t3", "3\t"};
const std::string kSpecial = ":-[]{}#&*!|>'\"%@`,?\n\t \\";

std::string mutate(std::string text, std::mt19937_64& rng) {
  auto pick = [&](std::size_t n) { return std::size_t(rng() % (n ? n : 1)); };
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  const int n = 1 + int(pick(4));
  for (int m = 0; m < n; ++m) {
    if (lines.empty()) lines.push_back("");
    auto& line = lines[pick(lines.size())];
    switch (pick(10)) {
      case 0: case 1: case 2: {  // a key's value replaced
        const auto colon = line.find(':');
        if (colon != std::string::npos && line.size() > 2 && line[0] == ' ')
          line = line.substr(0, colon + 1) + " " + kValues[pick(kValues.size())];
        break;
      }
      case 3: if (!line.empty()) line.erase(pick(line.size()), 1); break;
      case 4: line.insert(pick(line.size() + 1), 1, kSpecial[pick(kSpecial.size())]); break;
      case 5: lines.insert(lines.begin() + std::ptrdiff_t(pick(lines.size() + 1)), line); break;  // duplicated
      case 6: std::swap(line, lines[pick(lines.size())]); break;
      case 7: lines.insert(lines.begin() + std::ptrdiff_t(pick(lines.size() + 1)), "  bogus_key: 1"); break;
      case 8: lines.push_back(pick(2) ? "---" : "--- \nrun:\n  steps: 2"); break;
      case 9: lines.resize(pick(lines.size() + 1)); break;  // truncated
    }
  }
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

enum class Verdict { accepted, refused, failed };

// What `minilst run` does with a deck before allocating, for one world size.
Verdict exercise(const std::string& path, int ranks, std::string& why) {
  try {
    const auto deck = minilst::load_deck(path, {});
    minilst::PlanArgs args;
    args.ranks = ranks * deck.parallel.sequence_parallel();
    args.arena = false;
    std::string error;
    minilst::plan_deck(deck, deck.run.seq_len, args, error);
    if (!error.empty()) {
      why = error;
      return Verdict::refused;
    }
    return Verdict::accepted;
  } catch (const DeckError& e) {
    why = e.what();
    return Verdict::refused;
  } catch (const std::exception& e) {
    why = std::string("escaped: ") + e.what();
    return Verdict::failed;
  } catch (...) {
    why = "escaped: unknown exception";
    return Verdict::failed;
  }
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

int main(int argc, char** argv) {
  long decks = 300;
  unsigned long long seed = 20261122;
  double hang_s = 5;
  std::string keep, corpus;
  std::vector<std::string> bases;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--decks" && i + 1 < argc) decks = std::stol(argv[++i]);
    else if (a == "--seed" && i + 1 < argc) seed = std::stoull(argv[++i]);
    else if (a == "--hang-s" && i + 1 < argc) hang_s = std::stod(argv[++i]);
    else if (a == "--keep" && i + 1 < argc) keep = argv[++i];
    else if (a == "--corpus" && i + 1 < argc) corpus = argv[++i];
    else bases.push_back(a);
  }
  const fs::path scratch = fs::temp_directory_path() / ("minilst_fuzz_" + std::to_string(::getpid()));
  fs::create_directories(scratch);
  long accepted = 0, refused = 0, failed = 0, slow = 0;
  auto run_one = [&](const std::string& path, int ranks, bool must_refuse, const std::string& label) {
    std::string why;
    const auto t0 = std::chrono::steady_clock::now();
    auto v = exercise(path, ranks, why);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > hang_s) {
      ++slow;
      std::printf("SLOW (%.1f s): %s\n", s, label.c_str());
    }
    if (must_refuse && v == Verdict::accepted) {
      v = Verdict::failed;
      why = "accepted, but it is in the corpus of decks that must be refused";
    }
    if (v == Verdict::accepted) ++accepted;
    if (v == Verdict::refused) ++refused;
    if (v == Verdict::failed) {
      ++failed;
      std::printf("FAIL %s: %s\n", label.c_str(), why.c_str());
      if (!keep.empty()) fs::copy_file(path, fs::path(keep) / fs::path(label).filename(), fs::copy_options::overwrite_existing);
    } else if (must_refuse) {
      std::printf("refused %s: %s\n", label.c_str(), why.c_str());
    }
  };
  if (!corpus.empty()) {
    for (const auto& e : fs::directory_iterator(corpus))
      if (e.path().extension() == ".yaml") run_one(e.path().string(), 1, true, e.path().string());
  } else {
    if (bases.empty()) {
      std::fprintf(stderr, "usage: fuzz_deck --decks N [--seed S] BASE.yaml... | --corpus DIR\n");
      return 2;
    }
    std::mt19937_64 rng(seed);
    for (long d = 0; d < decks; ++d) {
      const auto& base = bases[std::size_t(d) % bases.size()];
      const std::string path = (scratch / ("deck_" + std::to_string(d) + ".yaml")).string();
      std::ofstream(path) << mutate(read(base), rng);
      run_one(path, 1 + int(rng() % 4), false, path);
      fs::remove(path);
    }
  }
  fs::remove_all(scratch);
  std::printf("fuzz_deck: %ld decks: %ld accepted, %ld refused with a message, %ld failures, %ld slower than %.0f s\n",
              accepted + refused + failed, accepted, refused, failed, slow, hang_s);
  return failed || slow ? 1 : 0;
}
