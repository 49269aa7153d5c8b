// minilst: the command line.
//   minilst run DECK [--set section.key=value]...   run a deck
//   minilst plan DECK [--set ...] [--ranks N] [--format json]   every rank's predicted memory,
//           [--device-mib X] [--host-mib Y] [--max-seq-len]      FLOPs, communication (nothing runs)
//   minilst keys                                    list every deck key, default and rule
//   minilst --help | --version                      (--kokkos-* flags go to Kokkos)
// Exit codes: 0 valid run, 1 runtime error, 2 bad command line or deck, 3 INVALID run.
// A bad deck is found identically on every rank before any work, so every rank
// exits cleanly with code 2; a runtime error on one rank aborts them all.
#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

#include "app/driver.hpp"
#include "app/plan.hpp"
#include "io/provenance.hpp"

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
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int local_rank = 0;
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_free(&node);
    device_flag = "--kokkos-device-id=" + std::to_string(local_rank % devices);
    args.push_back(device_flag.data());
  }
#endif
  int n = int(args.size());
  args.push_back(nullptr);
  Kokkos::initialize(n, args.data());
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
      if (extra.rfind("--kokkos-", 0) != 0) throw CLI::ExtrasError("run", {extra});
  } catch (const CLI::ParseError& e) {
    if (ctx.rank == 0) app.exit(e);
    return e.get_exit_code() == 0 ? 0 : 2;
  }
  if (keys->parsed()) {
    if (ctx.rank == 0) std::printf("%s", minilst::deck_key_reference().c_str());
    return 0;
  }
  minilst::Deck deck;
  try {
    deck = minilst::load_deck(deck_path, overrides);
  } catch (const minilst::DeckError& e) {
    if (ctx.rank == 0) std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }

  if (plan->parsed()) return ctx.rank == 0 ? minilst::run_plan(deck, plan_args) : 0;

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
  minilst::RunContext ctx;
  MPI_Comm_rank(MPI_COMM_WORLD, &ctx.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ctx.nranks);
  std::vector<char*> original(argv, argv + argc);  // provenance keeps what Kokkos strips
  ctx.argc = argc;
  ctx.argv = original.data();
  const int code = parse_and_run(argc, argv, ctx);
  MPI_Finalize();
  return code;
}
