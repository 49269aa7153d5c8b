# The procurement conventions. The JUBE benchmark (benchmarks/jube/) on a private localhost Slurm: one run whose checks pass
# (tiny on 1 rank and on 2 Ulysses ranks) and one that must fail (a reference set impossibly high,
# and an INVALID run from a wrong seed). Skipped (77) without jube or Slurm.
minilst_add_script_test(NAME app_jube LABELS "app;slurm"
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/jube_bench.sh)
set_tests_properties(app_jube PROPERTIES PROCESSORS 2 SKIP_RETURN_CODE 77 TIMEOUT 300)
# The procurement tiers: run.tier granted or refused on the RESULT line and in the metrics file.
minilst_add_script_test(NAME app_tier LABELS app
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/tier.sh)
set_tests_properties(app_tier PROPERTIES TIMEOUT 120)
