// The batch-job duties checked in process (1 and 2 ranks): the watchdog's patience for
// each wait, the run rules a misleading result breaks (ranks sharing a core, an MFU above
// 1) and the one spelling of a verdict, the Slurm identifiers in file names, a tools
// library that cannot load, and the placement and Adiak keys every rank gathers.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "io/deck.hpp"
#include "job/kokkos_flags.hpp"
#include "job/slurm_ids.hpp"
#include "job/step_guard.hpp"
#include "job/watchdog.hpp"
#include "results/gemm_peak.hpp"
#include "results/provenance.hpp"
#include "results/run_record.hpp"
#include "results/run_rules.hpp"

using namespace minilst;

namespace {
int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}
}  // namespace

TEST(Watchdog, OneRankNeverWaits) {
  Deck deck;
  deck.run.watchdog_s = 1;
  EXPECT_EQ(StepGuard::first_patience(deck, 1, 1e12), 0) << "one rank: no peer can stall it";
  Watchdog dog(0, 5, "nothing");
  EXPECT_EQ(dog.has_peers(), world_size() > 1);
}

TEST(Watchdog, TheSetUpHasItsOwnPatience) {
  Deck deck;
  deck.run.watchdog_s = 1;  // the steps' patience only
  EXPECT_EQ(StepGuard::first_patience(deck, 2, 1e6), Watchdog::kSetupFloorSeconds);
  deck.run.watchdog_s = 120;
  EXPECT_EQ(StepGuard::first_patience(deck, 2, 1e6), 1200) << "10 x run.watchdog_s";
  deck.run.watchdog_s = 0;  // auto: 10 x the first step's patience, never below the floor
  EXPECT_EQ(StepGuard::first_patience(deck, 2, 1e6), Watchdog::kSetupFloorSeconds);
  EXPECT_EQ(StepGuard::first_patience(deck, 2, 1e14), 10 * Watchdog::first_step_patience(1e14));
  EXPECT_EQ(Watchdog::long_wait_patience(90), 900);
}

TEST(RunRules, MisleadingResultsAreNotReportable) {
  RunRuleFacts f;
  f.build_type = "Release";
  f.reference_given = f.problem_named = true;
  f.reference_rtol = 1e-5;
  f.warmup_steps = 1;
  f.valid = f.complete = true;
  f.measured_steps = kReportableMeasuredSteps;
  f.steps_done = f.reference_steps = kReportableMeasuredSteps + 1;
  f.reference_check = "PASSED";
  f.mfu = 0.99;
  ASSERT_TRUE(check_run_rules(f).yes()) << check_run_rules(f).verdict();
  f.shared_cores = "core 0 on node1: ranks 0 and 2";
  EXPECT_EQ(check_run_rules(f).verdict(), "no (ranks share a CPU core (core 0 on node1: ranks 0 and 2))");
  f.shared_cores.clear();
  f.mfu = 1.25;
  EXPECT_EQ(check_run_rules(f).verdict(), "no (MFU 1.250 above 1 (the peak GEMM rate was measured too low))");
  f.mfu = -1;  // unknown: no rule
  EXPECT_TRUE(check_run_rules(f).yes());
}

TEST(RunRules, OneSpellingOfTheVerdict) {
  EXPECT_STREQ(run_verdict(true, true), "VALID");
  EXPECT_STREQ(run_verdict(true, false), "INVALID");
  EXPECT_STREQ(run_verdict(false, true), "INCOMPLETE");
  EXPECT_STREQ(run_verdict(false, false), "INCOMPLETE");
  EXPECT_EQ(verdict_exit_code(true, true), 0);
  EXPECT_EQ(verdict_exit_code(true, false), 3);
  EXPECT_EQ(verdict_exit_code(false, true), 4);
  Reportability r;
  EXPECT_STREQ(r.word(), "yes");
  r.reasons.push_back("no warm-up step");
  EXPECT_STREQ(r.word(), "no");
  EXPECT_EQ(r.verdict().rfind(r.word(), 0), 0u) << "the RESULT line's field starts with the same word";
}

TEST(SlurmIds, NeverAPathInAFileName) {
  EXPECT_TRUE(safe_name_part("4242"));
  EXPECT_TRUE(safe_name_part("job.7_a-b"));
  EXPECT_FALSE(safe_name_part(""));
  EXPECT_FALSE(safe_name_part("../etc"));
  EXPECT_FALSE(safe_name_part("a b"));
  EXPECT_EQ(sanitized_name_part("../../x y"), ".._.._x_y");
  Deck deck;
  deck.path = "decks/tiny.yaml";
  deck.output.metrics = "auto";
  setenv("SLURM_JOB_ID", "../../evil job", 1);
  setenv("SLURM_ARRAY_TASK_ID", "3/4", 1);
  const std::string name = metrics_path(deck, 1);
  unsetenv("SLURM_JOB_ID");
  unsetenv("SLURM_ARRAY_TASK_ID");
  EXPECT_EQ(name.find('/'), std::string::npos) << name;
  EXPECT_EQ(name.find(' '), std::string::npos) << name;
  EXPECT_NE(name.find("_.._.._evil_job_3_4_"), std::string::npos) << name;
  setenv("SLURM_JOB_ID", "a;b", 1);
  EXPECT_EQ(safe_slurm_id("SLURM_JOB_ID"), "") << "never passed to squeue or sstat";
  setenv("SLURM_JOB_ID", "4242", 1);
  EXPECT_EQ(safe_slurm_id("SLURM_JOB_ID"), "4242");
  unsetenv("SLURM_JOB_ID");
}

TEST(KokkosFlags, AToolsLibraryMustLoadAsATool) {
  const auto passwd = kokkos_flag_problem("--kokkos-tools-libs=/etc/passwd");
  EXPECT_NE(passwd.find("'/etc/passwd' is not a loadable shared library"), std::string::npos) << passwd;
  Dl_info libc{};  // a shared library that loads but holds no Kokkos Tools entry point
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&dlopen), &libc), 0);
  const auto no_tool = kokkos_flag_problem(std::string("--kokkos-tools-libs=") + libc.dli_fname);
  EXPECT_NE(no_tool.find("exports no Kokkos Tools entry point"), std::string::npos) << no_tool;
  EXPECT_EQ(kokkos_flag_problem("--kokkos-tools-libs=libkp_not_on_this_machine.so"), "")
      << "a bare name the loader cannot find here is Kokkos' to report";
}

TEST(GemmPeak, TheBestOfSeveralShapes) {
  const KernelChoice choice;  // the default path
  const auto shapes = peak_shapes(64);
  ASSERT_EQ(shapes.size(), 3u);
  EXPECT_EQ(shapes[1].text(), "32x128x64");
  // Small shapes keep the test short; the run measures around 1024 (512 in double, 4096 on GPUs).
  const GemmPeak peak = measure_gemm_peak<double>(choice, "double", MPI_COMM_WORLD, 2);
  EXPECT_GT(peak.gflops, 0);
  EXPECT_NE(peak.source.find("the best of 3 shapes"), std::string::npos) << peak.source;
  EXPECT_NE(peak.source.find(peak.best.text()), std::string::npos) << peak.source;
}

TEST(Provenance, PlacementAndAdiakKeys) {
  const int ranks = world_size();
  auto p = collect_provenance(MPI_COMM_WORLD, 0, nullptr);
  EXPECT_EQ(p["jobsize"], std::to_string(ranks)) << "Adiak's jobsize: MPI ranks";
  const long launched = std::stol(p["launchdate"]), now = long(std::time(nullptr));
  EXPECT_LE(launched, now);
  EXPECT_GT(launched, now - 86400) << "seconds since the epoch at the process's start";
  EXPECT_EQ(p["launchdate_utc"].size(), std::string("2026-01-01T00:00:00Z").size());
  EXPECT_TRUE(std::filesystem::path(p["executablepath"]).is_absolute());
  EXPECT_EQ(std::filesystem::path(p["executablepath"]).filename().string(), p["executable"]);
  EXPECT_EQ(p["clustername"].find_first_of("0123456789."), std::string::npos) << p["clustername"];
  EXPECT_EQ(p["numhosts"], "1");
  EXPECT_FALSE(p["mpi_library"].empty());
  EXPECT_NE(p["mpi_library_version"], "") << p["mpi_library"];
  const auto placement = nlohmann::json::parse(p["placement"]);
  ASSERT_EQ(int(placement.size()), ranks);
  std::set<int> cores_of_all;
  bool overlap = false;
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(placement[r]["rank"], r);
    EXPECT_EQ(placement[r]["host"], p["hostname"]);
    EXPECT_FALSE(placement[r]["cpus"].get<std::string>().empty());
    ASSERT_FALSE(placement[r]["cores"].empty());
    for (const int c : placement[r]["cores"]) overlap = !cores_of_all.insert(c).second || overlap;
  }
  EXPECT_EQ(p["cores_shared"], overlap ? "yes" : "no");
  EXPECT_EQ(p["cores_shared_note"].empty(), !overlap);
  if (overlap) EXPECT_FALSE(placement[0]["shares_core_with"].empty());
}
