// minilst: the command line.
//   minilst run DECK [--set section.key=value]...   run a deck
//   minilst plan DECK [--set ...] [--ranks N] [--format json]   every rank's predicted memory,
//           [--device-mib X] [--host-mib Y] [--max-seq-len]      FLOPs, communication (nothing runs)
//   minilst keys                                    list every deck key, default and rule
//   minilst --help | --version                      (--kokkos-* flags go to Kokkos)
// Exit codes: 0 valid run, 1 runtime error, 2 bad command line or deck, 3 INVALID run,
// 4 INCOMPLETE run (stopped early by a signal or the time budget; the metrics of the steps done are written).
// A bad deck is found identically on every rank before any work, so every rank
// exits cleanly with code 2; a runtime error on one rank aborts them all.
#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

#include "app/driver.hpp"
#include "app/plan.hpp"
#include "app/stop.hpp"
#include "io/provenance.hpp"
#include "parallel/node.hpp"

namespace {

// GPU builds: one device per rank, chosen by the node-local rank (unless the
// command line chose), so every rank of a node sees all GPUs (--gpu-bind=none)
// and NCCL can use peer-to-peer transfers between them.
void initialize_kokkos(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  std::string device_flag;
#ifdef KOKKOS_ENABLE_CUDA
  bool chosen = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    chosen |= a.rfind("--kokkos-device-id", 0) == 0 || a.rfind("--kokkos-num-devices", 0) == 0 ||
              a.rfind("--kokkos-map-device-id-by", 0) == 0;
  }
  int devices = 0;
  if (!chosen && cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
    device_flag = "--kokkos-device-id=" + std::to_string(minilst::node_ranks(MPI_COMM_WORLD).rank % devices);
    args.push_back(device_flag.data());
  }
#endif
  int n = int(args.size());
  args.push_back(nullptr);
  Kokkos::initialize(n, args.data());
}

// The --kokkos-* flags Kokkos 3.4 to 4.x know; anything else is a typo to refuse.
bool known_kokkos_flag(const std::string& arg) {
  static const char* known[] = {"help", "threads", "num-threads", "numa", "device-id", "device", "num-devices",
                                "ndevices", "skip-device", "map-device-id-by", "disable-warnings",
                                "print-configuration", "tune-internals", "tools-libs", "tools-library", "tools-args",
                                "tools-help"};
  const auto name = arg.substr(9, arg.find('=') == std::string::npos ? std::string::npos : arg.find('=') - 9);
  for (const char* k : known)
    if (name == k) return true;
  return false;
}

// 64-bit FNV-1a: the resolved deck's fingerprint, compared across ranks.
std::uint64_t fingerprint(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Every rank read the deck, and all read the same one, before anything collective
// runs: a deck missing on one node, or different steps or seeds per rank, would
// otherwise hang the job or mislead. Returns 0, or 2 on every rank with the reason
// (the first rank that differs from rank 0: its first differing key).
int agree_on_deck(const minilst::Deck& deck, const std::string& error, const minilst::RunContext& ctx) {
  const std::uint64_t mine[2] = {error.empty() ? 0ull : 1ull, fingerprint(deck.resolved_yaml)};
  std::vector<std::uint64_t> all(2 * std::size_t(ctx.nranks));
  MPI_Allgather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, MPI_COMM_WORLD);
  std::string failed;
  int differs = -1, nfailed = 0;
  for (int r = 0; r < ctx.nranks; ++r) {
    if (all[2 * r]) failed += (nfailed++ ? ", " : "") + std::to_string(r);
    else if (differs < 0 && !all[0] && all[2 * r + 1] != all[1]) differs = r;
  }
  if (nfailed == ctx.nranks) {  // the same bad deck everywhere: rank 0 says why
    if (ctx.rank == 0) std::fprintf(stderr, "error: %s\n", error.c_str());
    return 2;
  }
  if (nfailed) {  // some ranks could not read it: each says why, rank 0 says which
    if (!error.empty()) std::fprintf(stderr, "error (rank %d): %s\n", ctx.rank, error.c_str());
    if (ctx.rank == 0)
      std::fprintf(stderr, "error: the deck could not be used on rank(s) %s of %d: every rank must read the same deck\n",
                   failed.c_str(), ctx.nranks);
    return 2;
  }
  if (differs < 0) return 0;
  // Name the first key that differs: the differing rank sends its resolved deck to rank 0.
  if (ctx.rank == differs) {
    MPI_Send(deck.resolved_yaml.data(), int(deck.resolved_yaml.size()), MPI_CHAR, 0, 0, MPI_COMM_WORLD);
  } else if (ctx.rank == 0) {
    MPI_Status st;
    MPI_Probe(differs, 0, MPI_COMM_WORLD, &st);
    int n = 0;
    MPI_Get_count(&st, MPI_CHAR, &n);
    std::string theirs(std::size_t(n), '\0');
    MPI_Recv(theirs.data(), n, MPI_CHAR, differs, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    std::istringstream a(deck.resolved_yaml), b(theirs);
    std::string la, lb, section, where;
    while (std::getline(a, la) && std::getline(b, lb)) {
      if (!la.empty() && la[0] != ' ') section = la.substr(0, la.find(':'));
      if (la != lb) {  // "  key: value" lines of one section
        const auto value = [](const std::string& l) { return l.substr(std::min(l.size(), l.find(':') + 2)); };
        const auto key = la.substr(la.find_first_not_of(' '), la.find(':') - la.find_first_not_of(' '));
        where = section + "." + key + " = " + value(la) + " on rank 0, " + value(lb) + " on rank " + std::to_string(differs);
        break;
      }
    }
    std::fprintf(stderr, "error: the deck differs between ranks (%s): every rank must run the same deck\n",
                 where.empty() ? ("rank " + std::to_string(differs) + " differs from rank 0").c_str() : where.c_str());
  }
  return 2;
}

// Parses the command line and the deck before Kokkos starts (so --help is ours
// alone), then runs. --kokkos-* flags are left for Kokkos::initialize.
int parse_and_run(int argc, char** argv, const minilst::RunContext& ctx) {
  CLI::App app{"miniLST: the training step of a Llama-style decoder for long sequences, on Kokkos + MPI.\n"
               "Writes timing, memory and loss metrics to HDF5. See README.md."};
  app.set_version_flag("--version", minilst::version_string());
  app.require_subcommand(1);
  std::string deck_path;
  std::vector<std::string> overrides;
  auto* run = app.add_subcommand("run", "run the training steps a deck describes (--kokkos-* flags go to Kokkos)");
  run->add_option("deck", deck_path, "YAML input deck (see inputs/)")->required();
  run->add_option("--set", overrides, "override a deck key: section.key=value (repeatable)");
  run->allow_extras();
  auto* keys = app.add_subcommand("keys", "list every deck key with its default and rule");
  minilst::PlanArgs plan_args;
  auto* plan = app.add_subcommand("plan", "predict every rank's memory, FLOPs and communication for a deck, without running it");
  plan->add_option("deck", deck_path, "YAML input deck")->required();
  plan->add_option("--set", overrides, "override a deck key: section.key=value (repeatable)");
  plan->add_option("--ranks", plan_args.ranks, "world size N (data parallel x ulysses x ring)")->check(CLI::PositiveNumber);
  plan->add_option("--format", plan_args.format, "text or json")->check(CLI::IsMember({"text", "json"}));
  plan->add_option("--device-mib", plan_args.device_mib, "device memory budget per rank, MiB")->check(CLI::PositiveNumber);
  plan->add_option("--host-mib", plan_args.host_mib, "host memory budget per rank, MiB")->check(CLI::PositiveNumber);
  plan->add_option("--activation-mib", plan_args.activation_mib,
                   "device budget per rank, MiB, for all but weights, gradients and optimizer moments")
      ->check(CLI::PositiveNumber);
  plan->add_flag("--max-seq-len", plan_args.max_seq_len, "print the longest run.seq_len that fits the budgets");

  try {
    app.parse(argc, argv);
    for (const auto& extra : run->remaining())
      if (extra.rfind("--kokkos-", 0) != 0 || !known_kokkos_flag(extra)) throw CLI::ExtrasError("run", {extra});
  } catch (const CLI::ParseError& e) {
    if (ctx.rank == 0) app.exit(e);
    return e.get_exit_code() == 0 ? 0 : 2;
  }
  if (keys->parsed()) {
    if (ctx.rank == 0) std::printf("%s", minilst::deck_key_reference().c_str());
    return 0;
  }
  minilst::Deck deck;
  std::string deck_error;
  try {
    deck = minilst::load_deck(deck_path, overrides);
  } catch (const std::exception& e) {  // DeckError, or what the file system or the YAML reader threw
    deck_error = e.what();
  }
  if (plan->parsed()) {  // rank 0 alone answers; nothing collective
    if (!deck_error.empty() && ctx.rank == 0) std::fprintf(stderr, "error: %s\n", deck_error.c_str());
    return !deck_error.empty() ? 2 : ctx.rank == 0 ? minilst::run_plan(deck, plan_args) : 0;
  }
  if (const int code = agree_on_deck(deck, deck_error, ctx)) return code;

  initialize_kokkos(argc, argv);
  int code = 1;
  try {
    code = minilst::run_deck(deck, ctx);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error (rank %d): %s\n", ctx.rank, e.what());
    std::fflush(stderr);
    if (ctx.nranks > 1) MPI_Abort(MPI_COMM_WORLD, 1);
  }
  Kokkos::finalize();  // before MPI_Finalize: Kokkos Tools may still use MPI
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  minilst::install_stop_signal_handlers();  // after MPI's own: a stop signal ends the run cleanly
  minilst::RunContext ctx;
  MPI_Comm_rank(MPI_COMM_WORLD, &ctx.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ctx.nranks);
  std::vector<char*> original(argv, argv + argc);  // provenance keeps what Kokkos strips
  ctx.argc = argc;
  ctx.argv = original.data();
  int code = 1;
  try {
    code = parse_and_run(argc, argv, ctx);
  } catch (const std::exception& e) {  // nothing escapes as an abort: a message and exit 1
    std::fprintf(stderr, "error (rank %d): %s\n", ctx.rank, e.what());
    if (ctx.nranks > 1) MPI_Abort(MPI_COMM_WORLD, 1);
  } catch (...) {
    std::fprintf(stderr, "error (rank %d): unknown exception\n", ctx.rank);
    if (ctx.nranks > 1) MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return code;
}
