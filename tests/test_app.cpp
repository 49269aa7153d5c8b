// The program's own checks, in process: the Slurm time-left parser, the Kokkos flag
// checks, the command-line parser, the output checks (nothing of the user's touched),
// and the metrics recorder's rescue (the finished steps written by one rank alone).
#include <gtest/gtest.h>
#include <mpi.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "app/command_line.hpp"
#include "io/deck.hpp"
#include "job/job_clock.hpp"
#include "job/kokkos_flags.hpp"
#include "io/h5.hpp"
#include "results/json_summary.hpp"
#include "results/metrics_recorder.hpp"
#include "results/run_rules.hpp"

namespace fs = std::filesystem;
using namespace minilst;

namespace {
fs::path scratch(const std::string& name) {
  const auto dir = fs::temp_directory_path() / ("minilst_test_app_" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}
std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
Command parse(std::vector<const char*> args) {
  args.insert(args.begin(), "minilst");
  return parse_command_line(int(args.size()), args.data());
}
}  // namespace

TEST(JobClock, TimeLeftInSqueueForms) {
  EXPECT_DOUBLE_EQ(JobClock::parse_time_left("0:45"), 45);
  EXPECT_DOUBLE_EQ(JobClock::parse_time_left("12:05\n"), 12 * 60 + 5);
  EXPECT_DOUBLE_EQ(JobClock::parse_time_left("1:00:01"), 3601);
  EXPECT_DOUBLE_EQ(JobClock::parse_time_left("2-03:04:05"), 2 * 86400 + 3 * 3600 + 4 * 60 + 5);
  for (const char* none : {"UNLIMITED", "NOT_SET", "INVALID", "", "   ", "12", "1:2:3:4", "-1:00", "a:b", "1-", "x-1:00"})
    EXPECT_LT(JobClock::parse_time_left(none), 0) << none;
}

TEST(JobClock, OutsideSlurmTheEndIsUnknown) {
  const JobClock clock(false);
  EXPECT_EQ(clock.end(), 0.0);
}

TEST(KokkosFlags, KnownFlagsWithValidValues) {
  for (const char* ok : {"--kokkos-threads=4", "--kokkos-num-threads=1", "--kokkos-device-id=0", "--kokkos-help",
                         "--kokkos-disable-warnings", "--kokkos-disable-warnings=true", "--kokkos-num-devices=2,1",
                         "--kokkos-map-device-id-by=mpi_rank", "--kokkos-tools-libs=libkp_kernel_timer.so",
                         "--kokkos-tools-args=-v"})
    EXPECT_EQ(kokkos_flag_problem(ok), "") << ok;
}

TEST(KokkosFlags, RefusedWithTheReason) {
  EXPECT_NE(kokkos_flag_problem("--kokkos-num-threads=abc").find("expects an integer >= 1"), std::string::npos);
  EXPECT_NE(kokkos_flag_problem("--kokkos-threads=0").find("expects an integer >= 1"), std::string::npos);
  EXPECT_NE(kokkos_flag_problem("--kokkos-threads").find("needs a value"), std::string::npos);
  EXPECT_NE(kokkos_flag_problem("--kokkos-tools-libs=/nonexistent.so").find("is not a file"), std::string::npos);
  EXPECT_NE(kokkos_flag_problem("--kokkos-map-device-id-by=rank").find("random or mpi_rank"), std::string::npos);
  EXPECT_NE(kokkos_flag_problem("--kokkos-bogus=1").find("unknown Kokkos flag"), std::string::npos);
  EXPECT_NE(kokkos_flag_problem("--kokkos-help=3").find("takes no value"), std::string::npos);
}

TEST(CommandLine, SubcommandsAndRefusals) {
  EXPECT_EQ(parse({"run", "d.yaml", "--set", "run.steps=2"}).kind, Command::Kind::run);
  EXPECT_EQ(parse({"keys"}).kind, Command::Kind::keys);
  EXPECT_EQ(parse({"result", "m.h5"}).kind, Command::Kind::result);
  const auto plan = parse({"plan", "d.yaml", "--ranks", "8", "--max-seq-len", "--device-mib", "80000"});
  ASSERT_EQ(plan.kind, Command::Kind::plan);
  EXPECT_EQ(plan.plan.ranks, 8);
  EXPECT_DOUBLE_EQ(plan.plan.device_mib, 80000);
  const auto help = parse({"--help"});
  EXPECT_EQ(help.kind, Command::Kind::finished);
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("plan"), std::string::npos);
  for (const auto& bad : std::vector<std::vector<const char*>>{{"run"},
                                                               {"run", "d.yaml", "--bogus"},
                                                               {"run", "d.yaml", "--kokkos-num-threads=abc"},
                                                               {"plan", "d.yaml", "--device-mib", "nan"},
                                                               {"plan", "d.yaml", "--device-mib", "1e300"},
                                                               {"plan", "d.yaml", "--ranks", "0"},
                                                               {"bogus"},
                                                               {}}) {
    const auto c = parse(bad);
    EXPECT_EQ(c.kind, Command::Kind::finished);
    EXPECT_EQ(c.exit_code, 2);
    EXPECT_FALSE(c.err.empty());
  }
}

// `run --machine FILE` is the deck's run.machine, set last (it wins over the deck and --set); the key
// leaves the problem (its digest) as it was.
TEST(CommandLine, RunMachineIsTheLastOverride) {
  const auto c = parse({"run", "d.yaml", "--machine", "m.yaml", "--set", "run.machine=other.yaml"});
  ASSERT_EQ(c.kind, Command::Kind::run);
  ASSERT_FALSE(c.overrides.empty());
  EXPECT_EQ(c.overrides.back(), "run.machine=m.yaml");
  EXPECT_EQ(parse({"run", "d.yaml"}).overrides.size(), 0u) << "no --machine: no override";
  const auto dir = scratch("run_machine");
  const auto deck = (dir / "d.yaml").string();
  std::ofstream(deck) << "run:\n  seq_len: 40\n  machine: deck.yaml\n";
  EXPECT_EQ(load_deck(deck, {}).run.machine, "deck.yaml");
  const Deck d = load_deck(deck, c.overrides);
  EXPECT_EQ(d.run.machine, "m.yaml");
  EXPECT_EQ(d.problem_digest, load_deck(deck, {"run.machine="}).problem_digest);
  EXPECT_NE(d.resolved_yaml.find("machine: m.yaml"), std::string::npos) << d.resolved_yaml;
  // The machine file is read, never an output.
  const auto refusal = [&](const std::vector<std::string>& sets) {
    try {
      load_deck(deck, sets);
    } catch (const DeckError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string machine = "run.machine=m.yaml";
  EXPECT_NE(refusal({machine, "output.metrics=m.yaml"}).find("output.metrics 'm.yaml' is run.machine's machine file"),
            std::string::npos) << refusal({machine, "output.metrics=m.yaml"});
  EXPECT_NE(refusal({machine, "output.metrics=o.h5", "output.dump=m.yaml"}).find("output.dump 'm.yaml' is run.machine's"),
            std::string::npos);
  EXPECT_NE(refusal({"output.metrics=m.h5", "run.machine=m.json"}).find("JSON summary 'm.json' is run.machine's"),
            std::string::npos);
  EXPECT_EQ(refusal({machine, "output.metrics=o.h5"}), "");
}

TEST(Outputs, RefusedNamesTouchNothing) {
  const auto dir = scratch("outputs");
  std::ofstream(dir / "notes.txt") << "a user's notes\n";
  fs::create_symlink(dir / "notes.txt", dir / "link.h5");
  fs::create_symlink(dir / "notes.txt", dir / "m.h5.partial");
  const auto check = [&](const std::string& name, const std::string& expected) {
    const auto problem = h5::prepare_output(name.empty() || name[0] == '/' ? name : (dir / name).string(),
                                            "minilst-metrics", false);
    EXPECT_NE(problem.find(expected), std::string::npos) << name << ": " << problem;
  };
  check("out/", "names a directory");
  check(".", "names a directory");
  check("notes.txt", "is not a miniLST output of this kind");
  check("link.h5", "is a symbolic link");
  check("m.h5", "is a symbolic link");
  check("/dev/null", "not a regular file");
  EXPECT_EQ(read_text(dir / "notes.txt"), "a user's notes\n");
  EXPECT_TRUE(fs::is_symlink(dir / "m.h5.partial"));
  EXPECT_EQ(h5::prepare_output((dir / "notes.txt").string(), "minilst-metrics", true), "");  // output.overwrite
  EXPECT_EQ(h5::prepare_output((dir / "new" / "m.h5").string(), "minilst-metrics", false), "");
  EXPECT_TRUE(fs::is_directory(dir / "new"));
  EXPECT_FALSE(fs::exists(dir / "new" / "m.h5.partial"));
}

TEST(MetricsRecorder, RescueWritesTheFinishedSteps) {
  const auto dir = scratch("rescue");
  const std::string path = (dir / "m.h5").string();
  RunMetrics m;
  m.tokens_per_step = 100;
  m.config_yaml = "run:\n  steps: 5\n";
  m.attributes.integers["data_parallel"] = 1;
  MetricsRecorder recorder(MPI_COMM_SELF, m, path);
  EXPECT_FALSE(recorder.rescue("nothing yet"));  // no step finished: nothing written
  EXPECT_FALSE(fs::exists(path));
  PhaseSeconds half{};
  half[Phase::step] = 0.5;
  for (int s = 0; s < 3; ++s) recorder.add_step({9.0 - s, 1.0, half, {}, {}, 0});
  EXPECT_TRUE(recorder.rescue("the watchdog"));
  auto file = h5::open_file_readonly(path);
  EXPECT_EQ(h5::read_string_attr(file.id(), "complete"), "false");
  EXPECT_NE(h5::read_string_attr(file.id(), "stop_reason").find("the watchdog: stopped after 3 finished step(s)"),
            std::string::npos);
  EXPECT_EQ(h5::read_doubles(file.id(), "loss"), (std::vector<double>{9.0, 8.0, 7.0}));
  EXPECT_FALSE(fs::exists(path + ".partial"));
  // The JSON summary beside it says the same.
  const auto json = nlohmann::json::parse(read_text(dir / "m.json"));
  EXPECT_EQ(json.at("schema"), "minilst-summary");
  EXPECT_EQ(json.at("verdict"), "INCOMPLETE");
  EXPECT_EQ(json.at("exit_code"), 4);
  EXPECT_EQ(json.at("steps_done"), 3);
  EXPECT_EQ(json.at("loss"), (std::vector<double>{9.0, 8.0, 7.0}));
  EXPECT_EQ(json.at("reportable").get<std::string>(), "no");
  EXPECT_EQ(json.at("energy").at("source"), "unavailable");
  EXPECT_FALSE(fs::exists(dir / "m.json.partial"));
}

TEST(Outputs, TheJsonSummaryReplacesOnlyItsOwnKind) {
  const auto dir = scratch("json");
  const std::string metrics = (dir / "run.h5").string();
  EXPECT_EQ(json_summary_path(metrics), (dir / "run.json").string());
  EXPECT_EQ(json_summary_path("run.hdf5"), "run.hdf5.json");
  EXPECT_EQ(json_summary_problem(metrics, false), "");  // nothing there
  std::ofstream(dir / "run.json") << "{\"a user's\": \"settings\"}\n";
  EXPECT_NE(json_summary_problem(metrics, false).find("is not a miniLST summary"), std::string::npos);
  EXPECT_EQ(json_summary_problem(metrics, true), "");  // output.overwrite
  std::ofstream(dir / "run.json") << "not json at all";
  EXPECT_NE(json_summary_problem(metrics, false).find("not overwritten"), std::string::npos);
  std::ofstream(dir / "run.json") << "{\"schema\": 1}";  // a schema of another type: not ours, no exception
  EXPECT_NE(json_summary_problem(metrics, false).find("not overwritten"), std::string::npos);
  fs::create_symlink(dir / "run.json", dir / "run.json.partial");  // a write through it would reach the link's target
  EXPECT_NE(json_summary_problem(metrics, true).find("is a symbolic link"), std::string::npos);
  fs::remove(dir / "run.json.partial");
  std::ofstream(dir / "run.json") << "{\"schema\": \"minilst-summary\"}";
  EXPECT_EQ(json_summary_problem(metrics, false), "");  // a summary of an earlier run: replaced
  fs::remove(dir / "run.json");
  fs::create_directory(dir / "run.json");
  EXPECT_NE(json_summary_problem(metrics, true).find("not a regular file"), std::string::npos);
}

TEST(RunRules, EveryRuleNamesItself) {
  RunRuleFacts ok;
  ok.build_type = "Release";
  ok.reference_given = ok.problem_named = true;
  ok.reference_rtol = 1e-5;
  ok.warmup_steps = 1;
  ok.valid = ok.complete = true;
  ok.measured_steps = kReportableMeasuredSteps;
  ok.steps_done = ok.reference_steps = kReportableMeasuredSteps + 1;
  ok.reference_check = "PASSED";
  EXPECT_TRUE(check_run_rules(ok).yes());
  EXPECT_EQ(check_run_rules(ok).verdict(), "yes");
  const auto broken = [&](auto change) {
    RunRuleFacts f = ok;
    change(f);
    return check_run_rules(f).verdict();
  };
  EXPECT_EQ(broken([](RunRuleFacts& f) { f.measured_steps = 4; }), "no (fewer than 5 measured steps)");
  EXPECT_EQ(broken([](RunRuleFacts& f) { f.measured_steps = 2, f.warmup_steps = 0; }),
            "no (fewer than 5 measured steps; no warm-up step)");
  EXPECT_EQ(broken([](RunRuleFacts& f) { f.reference_given = false, f.reference_check = "none"; }),
            "no (no reference answer)");
  EXPECT_EQ(broken([](RunRuleFacts& f) { f.reference_check = "FAILED", f.valid = false; }),
            "no (not VALID; reference check failed)");
  EXPECT_EQ(broken([](RunRuleFacts& f) { f.data_parallel = 2, f.reference_check = "none"; }),
            "no (no reference answer for data parallelism D = 2)");
  EXPECT_EQ(broken([](RunRuleFacts& f) { f.problem_matches = false; }), "no (the deck's problem differs from its reference's)");
  EXPECT_EQ(broken([](RunRuleFacts& f) { f.build_type = "Debug"; }), "no (build type Debug, not Release)");
  EXPECT_EQ(broken([](RunRuleFacts& f) { f.build_type = "RelWithDebInfo"; }), "yes");
  EXPECT_EQ(broken([](RunRuleFacts& f) { f.offload_bandwidth_gbs = 0.5; }),
            "no (copy engine throttled (memory.offload_bandwidth_gbs = 0.5))");
  EXPECT_EQ(broken([](RunRuleFacts& f) { f.complete = false; }), "no (stopped before its last step)");
  EXPECT_EQ(broken([](RunRuleFacts& f) { f.steps_done = 9; }), "no (the reference answer covers 6 of 9 steps)");
  EXPECT_EQ(broken([](RunRuleFacts& f) { f.reference_rtol = 0.5; }), "no (reference tolerance 0.5 above 0.0001)");
  EXPECT_EQ(broken([](RunRuleFacts& f) { f.reference_rtol = 5e-3, f.rtol_limit = 5e-3; }), "yes");  // bf16's
  EXPECT_EQ(broken([](RunRuleFacts& f) { f.problem_named = false; }),
            "no (the reference answer names no problem (reference.problem))");
}
