// Fuzzing what a user gives miniLST, in process, with a fixed seed:
//  - decks: mutated decks through everything `minilst run` does before it allocates
//    (the parser, the rules between keys, the parallel layout for a world size, the
//    memory model of `minilst plan`);
//  - command lines: mutated `minilst run|plan|keys ...` lines through the command-line
//    parser, the deck with its --set overrides, and `minilst plan` itself (output
//    discarded), --max-seq-len included;
//  - output paths: output.metrics / output.dump names (directories, links, devices,
//    users' files, .partial names) through the start-up check of the outputs, which
//    must never change a file it refuses.
// Every input must be accepted or refused with a message; anything else escaping, a
// crash, or an input taking more than --hang-s seconds is a failure (kept with --keep).
// Prints the counts; exit 0 when there are no failures. Signals and ranks that differ
// need processes: tests/fuzz/fuzz_processes.sh.
//   fuzz_deck --decks N [--commands N] [--outputs N] [--seed S] [--hang-s X] [--keep DIR] BASE.yaml...
//   fuzz_deck --corpus DIR...   every deck in DIR must be refused (exit 2 material)
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>

#include "app/command_line.hpp"
#include "app/plan_command.hpp"
#include "io/deck.hpp"
#include "io/h5.hpp"

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

// Runs `body` (which returns a verdict, and may set `why`): a DeckError is a refusal,
// anything else escaping a failure.
template <class Body>
Verdict guarded(std::string& why, Body body) {
  try {
    return body();
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

// What `minilst run` checks of a read deck before allocating, for `ranks` data-parallel replicas.
Verdict plan_verdict(const minilst::Deck& deck, int ranks, std::string& why) {
  minilst::plan_deck(deck, deck.run.seq_len, {ranks * deck.parallel.sequence_parallel(), false, false}, why);
  return why.empty() ? Verdict::accepted : Verdict::refused;
}

// What `minilst run` does with a deck file before allocating, for one world size.
Verdict exercise(const std::string& path, int ranks, std::string& why) {
  return guarded(why, [&] { return plan_verdict(minilst::load_deck(path, {}), ranks, why); });
}

// Command-line words users type and mistype (a deck path is put after run/plan).
const std::vector<std::string> kWords = {
    "run", "plan", "keys", "--help", "-h", "--version", "--set", "--set", "--ranks", "--format", "json", "text",
    "--device-mib", "--device", "--reserve-mib", "--host-mib", "--activation-mib", "--max-seq-len",
    "--kokkos-threads=2", "--kokkos-threads",
    "--kokkos-num-threads=abc", "--kokkos-tools-libs=/nonexistent.so", "--kokkos-device-id=0", "--kokkos-bogus=1",
    "--kokkos-map-device-id-by=mpi_rank", "--bogus", "", "=", "-", "--", "run.steps=2", "run.seq_len=4096",
    "run.seq_len=1099511627776", "parallel.ring=2", "parallel.ulysses=4", "model.norm_eps=2", "output.metrics=out/",
    "memory.policy=offload", "memory.policy=checkpoint", "mst.mlp_chunks=1", "run.grad_accum=4096", "nan", "inf",
    "1e12", "1e-300", "-1", "0", "1", "64", "1e300", "800", "abc"};

std::vector<std::string> random_command(const std::string& deck, std::mt19937_64& rng) {
  std::vector<std::string> args = {"minilst"};
  const auto pick = [&](std::size_t n) { return std::size_t(rng() % n); };
  args.push_back(pick(4) ? (pick(2) ? "plan" : "run") : kWords[pick(kWords.size())]);
  if (pick(8)) args.push_back(deck);
  for (std::size_t n = pick(7); n > 0; --n) args.push_back(kWords[pick(kWords.size())]);
  return args;
}

// stdout and stderr discarded while `minilst plan` answers (restored after).
struct Silenced {
  int saved[2] = {-1, -1};
  Silenced() {
    std::fflush(stdout);
    std::fflush(stderr);
    const int null = ::open("/dev/null", O_WRONLY);
    for (int fd : {1, 2}) {
      saved[fd - 1] = ::dup(fd);
      ::dup2(null, fd);
    }
    ::close(null);
  }
  ~Silenced() {
    std::fflush(stdout);
    std::fflush(stderr);
    for (int fd : {1, 2}) {
      ::dup2(saved[fd - 1], fd);
      ::close(saved[fd - 1]);
    }
  }
};

// A command line, as `minilst` takes it before any MPI collective or Kokkos.
Verdict exercise_command(const std::vector<std::string>& args, std::string& why) {
  return guarded(why, [&] {
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    const auto c = minilst::parse_command_line(int(argv.size()), argv.data());
    using Kind = minilst::Command::Kind;
    if (c.kind == Kind::finished) {
      why = c.err;
      return c.exit_code == 0 ? Verdict::accepted : Verdict::refused;
    }
    if (c.kind == Kind::keys || c.kind == Kind::result || c.kind == Kind::probe) return Verdict::accepted;  // no deck
    const auto deck = minilst::load_deck(c.deck_path, c.overrides);
    if (c.kind == Kind::run || c.kind == Kind::verify) return plan_verdict(deck, 1, why);
    const Silenced quiet;
    return minilst::run_plan(deck, c.plan) == 0 ? Verdict::accepted : Verdict::refused;
  });
}

// A scratch directory with what an output name may meet: a user's file, a miniLST
// metrics file, a directory, links to both, a .partial link, a FIFO. Returns the names.
std::vector<std::string> output_scene(const fs::path& dir) {
  fs::create_directories(dir / "sub");
  std::ofstream(dir / "notes.txt") << "a user's notes\n";
  {
    auto f = minilst::h5::create_file((dir / "old.h5").string());
    minilst::h5::attr(f.id(), "schema", std::string("minilst-metrics"));
  }
  fs::create_symlink(dir / "notes.txt", dir / "link.h5");
  fs::create_symlink(dir / "notes.txt", dir / "m.h5.partial");
  fs::create_symlink(dir / "sub", dir / "dirlink");
  ::mkfifo((dir / "fifo").c_str(), 0644);
  return {"notes.txt", "old.h5", "link.h5", "m.h5", "m.h5.partial", "sub", "sub/", "dirlink", "dirlink/x.h5",
          "fifo", "new.h5", "new/deep/x.h5", ".", "..", "/dev/null", "/dev/stdout", "/proc/self/fd/1", "x.h5.partial",
          "sub/.partial", "notes.txt.partial", "", " ", "old.h5/"};
}

std::string contents(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return "(not a file)";
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// An output name checked as `minilst run` does before step 1: accepted or refused, and the
// files the scene started with are unchanged (what an accepted name may create is removed).
Verdict exercise_output(const fs::path& dir, const std::string& name, bool overwrite, std::string& why) {
  const std::string path = name.empty() || name[0] == '/' ? name : (dir / name).string();
  const std::string before_notes = contents(dir / "notes.txt"), before_old = contents(dir / "old.h5");
  try {
    why = minilst::h5::prepare_output(path, "minilst-metrics", overwrite);
  } catch (const std::exception& e) {
    why = std::string("escaped: ") + e.what();
    return Verdict::failed;
  }
  if (contents(dir / "notes.txt") != before_notes || contents(dir / "old.h5") != before_old) {
    why = "a file of the user's changed";
    return Verdict::failed;
  }
  std::error_code ec;
  if (!fs::is_symlink(dir / "m.h5.partial", ec) || !fs::is_fifo(dir / "fifo", ec)) {
    why = "a link or FIFO of the user's was replaced";
    return Verdict::failed;
  }
  return why.empty() ? Verdict::accepted : Verdict::refused;
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

int main(int argc, char** argv) {
  long decks = 300, commands = 0, outputs = 0;
  unsigned long long seed = 20261122;
  double hang_s = 5;
  std::string keep, corpus;
  std::vector<std::string> bases;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--decks" && i + 1 < argc) decks = std::stol(argv[++i]);
    else if (a == "--commands" && i + 1 < argc) commands = std::stol(argv[++i]);
    else if (a == "--outputs" && i + 1 < argc) outputs = std::stol(argv[++i]);
    else if (a == "--seed" && i + 1 < argc) seed = std::stoull(argv[++i]);
    else if (a == "--hang-s" && i + 1 < argc) hang_s = std::stod(argv[++i]);
    else if (a == "--keep" && i + 1 < argc) keep = argv[++i];
    else if (a == "--corpus" && i + 1 < argc) corpus = argv[++i];
    else bases.push_back(a);
  }
  // A fresh private directory under $TMPDIR (mkdtemp): nothing is written into the checkout
  // or the working directory, and no earlier run's leftovers are met.
  std::string scratch_name = (fs::temp_directory_path() / "minilst_fuzz_deck_XXXXXX").string();
  if (!::mkdtemp(scratch_name.data())) {
    std::perror("fuzz_deck: cannot make a scratch directory");
    return 1;
  }
  const fs::path scratch = scratch_name;
  long accepted = 0, refused = 0, failed = 0, slow = 0;
  // One input: `exercise` gives the verdict; `text` is what --keep saves of a failing or slow one.
  const auto tally = [&](const std::string& label, const std::string& text, bool must_refuse, const auto& exercise_it) {
    std::string why;
    const auto t0 = std::chrono::steady_clock::now();
    auto v = exercise_it(why);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const bool too_slow = s > hang_s;
    if (too_slow) {
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
    } else if (must_refuse) {
      std::printf("refused %s: %s\n", label.c_str(), why.c_str());
    }
    if ((v == Verdict::failed || too_slow) && !keep.empty())
      std::ofstream(fs::path(keep) / fs::path(label).filename()) << text;
  };
  std::mt19937_64 rng(seed);
  if (!corpus.empty()) {
    for (const auto& e : fs::directory_iterator(corpus))
      if (e.path().extension() == ".yaml")
        tally(e.path().string(), read(e.path().string()), true,
              [&](std::string& why) { return exercise(e.path().string(), 1, why); });
  } else if (bases.empty()) {
    std::fprintf(stderr, "usage: fuzz_deck --decks N [--commands N] [--outputs N] [--seed S] BASE.yaml... | --corpus DIR\n");
    fs::remove_all(scratch);
    return 2;
  }
  for (long d = 0; corpus.empty() && d < decks; ++d) {
    const auto& base = bases[std::size_t(d) % bases.size()];
    const std::string path = (scratch / ("deck_" + std::to_string(d) + ".yaml")).string();
    const std::string text = mutate(read(base), rng);
    std::ofstream(path) << text;
    const int ranks = 1 + int(rng() % 4);
    tally(path, text, false, [&](std::string& why) { return exercise(path, ranks, why); });
    fs::remove(path);
  }
  for (long c = 0; corpus.empty() && c < commands; ++c) {
    const auto& base = bases[std::size_t(c) % bases.size()];
    const auto args = random_command(base, rng);
    std::string line;
    for (const auto& a : args) line += "'" + a + "' ";
    tally(scratch.string() + "/command_" + std::to_string(c) + ".txt", line, false,
          [&](std::string& why) { return exercise_command(args, why); });
  }
  for (long o = 0; corpus.empty() && o < outputs; ++o) {
    const fs::path dir = scratch / ("outputs_" + std::to_string(o));
    const auto names = output_scene(dir);
    const std::string name = names[std::size_t(rng() % names.size())];
    const bool overwrite = rng() % 4 == 0;
    tally(dir.string() + "_output.txt", name + (overwrite ? " (overwrite)" : ""), false,
          [&](std::string& why) { return exercise_output(dir, name, overwrite, why); });
    fs::remove_all(dir);
  }
  fs::remove_all(scratch);
  std::printf("fuzz_deck: %ld inputs (%ld decks, %ld command lines, %ld output names): %ld accepted, %ld refused with "
              "a message, %ld failures, %ld slower than %.0f s\n",
              accepted + refused + failed, corpus.empty() ? decks : 0, commands, outputs, accepted, refused, failed,
              slow, hang_s);
  return failed || slow ? 1 : 0;
}
