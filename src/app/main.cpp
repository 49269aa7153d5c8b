// minilst: the command line.
//   minilst run DECK [--set section.key=value]... [--machine M.yaml]   run a deck (and check its predicted time)
//   minilst plan DECK [--set ...] [--ranks N] [--format json]   every rank's predicted memory,
//           [--device NAME | --device-mib X] [--reserve-mib R]   FLOPs, communication (nothing runs);
//           [--host-mib Y] [--activation-mib Z] [--max-seq-len]  the longest S a real run fits
//   minilst keys [--machine]                        list every deck key (machine file key), default and rule
//   minilst validate [TABLE.yaml] [--format json]   the seed papers' published GPU runs beside their predictions
//   minilst result METRICS.h5                       the RESULT line of a metrics file
//   minilst probe --out M.yaml [--size n] [...]     measure this machine into a machine file (plan --machine)
//   minilst verify DECK [--set ...] [--out T.h5]    the deck's first step against the single-rank
//           [--export E.h5]                         float64 reference, tensor by tensor (docs/verify.md)
//   minilst --help | --version                      (--kokkos-* flags go to Kokkos)
// Exit codes: 0 valid run (verify: PASSED), 1 runtime error, 2 bad command line or deck, 3 INVALID run (FAILED),
// 4 INCOMPLETE run (stopped early by a signal or the time budget; the metrics of the steps done are written).
// Every rank checks that all run the same command line and deck before any work, so
// a bad one ends every rank cleanly with code 2. A runtime error on one rank: that
// rank writes the finished steps, then ends the job (exit 1). A watchdog ends a rank
// whose peers stopped answering (exit 1, rank 0 writing the finished steps first).
#include <Kokkos_Core.hpp>
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

#include "job/agreement.hpp"
#include "app/driver.hpp"
#include "app/plan_command.hpp"
#include "app/validate_command.hpp"
#include "core/progress.hpp"
#include "core/parallel_config.hpp"
#include "predict/machine_keys.hpp"
#include "app/probe.hpp"
#include "app/command_line.hpp"
#include "job/kokkos_flags.hpp"
#include "job/stop.hpp"
#include "job/watchdog.hpp"
#include "results/metrics.hpp"
#include "results/provenance.hpp"
#include "parallel/node.hpp"
#include "parallel/fault_injection.hpp"
#include "app/verify.hpp"

namespace {

constexpr double kStartupPatience = 120;  // s, from MPI_Init until the deck is agreed on

// GPU builds: one device per rank, chosen by the node-local rank (unless the
// command line chose), so every rank of a node sees all GPUs (--gpu-bind=none)
// and NCCL can use peer-to-peer transfers between them.
void initialize_kokkos(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  std::string device_flag;
#ifdef KOKKOS_ENABLE_CUDA
  bool chosen = false;  // the same on every rank (the command lines agree)
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    for (const char* flag : {"--kokkos-device-id", "--kokkos-device=", "--kokkos-num-devices", "--kokkos-ndevices",
                             "--kokkos-map-device-id-by"})
      chosen |= a.rfind(flag, 0) == 0;
  }
  for (const char* env : {"KOKKOS_DEVICE_ID", "KOKKOS_NUM_DEVICES", "KOKKOS_MAP_DEVICE_ID_BY"})
    chosen |= std::getenv(env) != nullptr;
  if (!chosen) {
    const int local_rank = minilst::node_ranks(MPI_COMM_WORLD).rank;  // collective: on every rank, before any test
    int devices = 0;
    if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
      device_flag = "--kokkos-device-id=" + std::to_string(local_rank % devices);
      args.push_back(device_flag.data());
    }
  }
#endif
  int n = int(args.size());
  args.push_back(nullptr);
  Kokkos::initialize(n, args.data());
}

// `minilst result FILE`: the RESULT line and its run's exit code; an unreadable file is one
// line and exit 2.
int answer_result(const std::string& path) {
  try {
    const auto [line, code] = minilst::result_of_file(path);
    std::printf("%s\n", line.c_str());
    return code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: result: %s\n", e.what());
    return 2;
  }
}

// Parses the command line and the deck before Kokkos starts (so --help is ours
// alone), then runs. --kokkos-* flags are left for Kokkos::initialize.
int parse_and_run(int argc, char** argv, const minilst::RunContext& ctx) {
  const auto command = minilst::parse_command_line(argc, argv);
  using Kind = minilst::Command::Kind;
  if (command.kind == Kind::finished) {
    if (ctx.rank == 0) {
      std::fputs(command.out.c_str(), stdout);
      std::fputs(command.err.c_str(), stderr);
    }
    return command.exit_code;
  }
  if (command.kind == Kind::keys) {
    if (ctx.rank == 0)
      std::printf("%s", (command.keys_machine ? minilst::machine_keys_text() : minilst::deck_key_reference()).c_str());
    return 0;
  }
  if (command.kind == Kind::result) return ctx.rank == 0 ? answer_result(command.deck_path) : 0;  // options first
  if (command.kind == Kind::validate) {  // rank 0 alone answers, as plan does
    ctx.watchdog->arm(0, "");
    minilst::install_plan_signal_handlers("validate");
    return ctx.rank == 0 ? minilst::run_validate(command.validate) : 0;
  }
  if (command.kind == Kind::probe) {  // every rank measures (no deck); rank 0 writes the machine file
    ctx.watchdog->arm(0, "");
    minilst::install_plan_signal_handlers("probe");  // a signal ends it at once: nothing is written before the end
    initialize_kokkos(argc, argv);
    int code = 1;
    const minilst::ProgressTicker progress("probe", ctx.rank == 0);  // a line every 10 s (core/progress.hpp)
    try {
      code = minilst::run_probe(command.probe, ctx.comm);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error (rank %d): probe: %s\n", ctx.rank, e.what());
      if (ctx.nranks > 1) MPI_Abort(MPI_COMM_WORLD, 1);
    }
    Kokkos::finalize();
    return code;
  }
  minilst::Deck deck;
  std::string deck_error;
  try {
    deck = minilst::load_deck(command.deck_path, command.overrides);
  } catch (const std::exception& e) {  // DeckError, or what the file system or the YAML reader threw
    deck_error = e.what();
  }
  if (deck_error.empty())  // parallel.ulysses auto: the world's (plan: --ranks)
    minilst::resolve_ulysses(deck.model, deck.parallel, command.kind == Kind::plan ? command.plan.ranks : ctx.nranks);
  if (command.kind == Kind::plan) {  // rank 0 alone answers; nothing collective; a signal ends it at once
    ctx.watchdog->arm(0, "");
    minilst::install_plan_signal_handlers();
    if (!deck_error.empty() && ctx.rank == 0) std::fprintf(stderr, "error: %s\n", deck_error.c_str());
    if (!deck_error.empty() || ctx.rank != 0) return deck_error.empty() ? 0 : 2;
    const minilst::ProgressTicker progress("plan", true);
    return minilst::run_plan(deck, command.plan);
  }
  if (deck_error.empty()) deck_error = minilst::fault::active().problem;  // a test-only variable's bad value
  if (const int code = minilst::agree_on_deck(deck.resolved_yaml, deck_error, ctx.comm)) return code;

  initialize_kokkos(argc, argv);
  int code = 1;
  const minilst::ProgressTicker progress("verify", command.kind == Kind::verify && ctx.rank == 0);
  try {
    code = command.kind == Kind::verify
               ? minilst::run_verify(deck, ctx, {command.verify_out, command.verify_export})
               : minilst::run_deck(deck, ctx);
  } catch (const std::exception& e) {  // the finished steps are written (run_deck); the peers may be waiting
    std::fprintf(stderr, "error (rank %d): %s\n", ctx.rank, e.what());
    std::fflush(stderr);
    if (ctx.nranks > 1) MPI_Abort(MPI_COMM_WORLD, 1);
  }
  Kokkos::finalize();  // before MPI_Finalize: Kokkos Tools may still use MPI
  return code;
}

// `minilst result FILE` needs no MPI: answered before MPI_Init (the reader forks a child,
// which an MPI process should not). Under a launcher only its rank 0 prints; -1 when the
// command is not `result`.
int result_without_mpi(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) != "result") return -1;
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* r = std::getenv(var); r && std::string(r) != "0") return 0;
  const auto command = minilst::parse_command_line(argc, argv);
  if (command.kind != minilst::Command::Kind::result) {  // --help, a usage error
    std::fputs(command.out.c_str(), stdout);
    std::fputs(command.err.c_str(), stderr);
    return command.exit_code;
  }
  return answer_result(command.deck_path);
}

}  // namespace

int main(int argc, char** argv) {
  if (const int code = result_without_mpi(argc, argv); code >= 0) return code;
  // what the libraries read from the environment at start-up, before any of them starts (every rank)
  if (const auto problem = minilst::environment_problem(); !problem.empty()) {
    std::fprintf(stderr, "error: environment: %s\n", problem.c_str());
    return 2;
  }
  minilst::install_stop_signal_handlers();  // a signal during MPI_Init is kept for the first step
  MPI_Init(&argc, &argv);
  minilst::install_stop_signal_handlers();  // again, after any MPI installed: a stop signal ends the run cleanly
  minilst::RunContext ctx;
  MPI_Comm_rank(MPI_COMM_WORLD, &ctx.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ctx.nranks);
  std::vector<char*> original(argv, argv + argc);  // provenance keeps what Kokkos strips
  ctx.argc = argc;
  ctx.argv = original.data();
  // Until the deck is read: the start-up's collectives (a peer stopped or started differently)
  minilst::Watchdog watchdog(ctx.rank, ctx.nranks > 1 ? kStartupPatience : 0, "the other ranks to start");
  ctx.watchdog = &watchdog;
  int code = minilst::agree_on_command_line(argc, argv, MPI_COMM_WORLD);
  try {
    if (code == 0) code = parse_and_run(argc, argv, ctx);
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
