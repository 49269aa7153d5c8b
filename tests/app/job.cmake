# Batch-job duties: the watchdog, where ranks ran, the run rules' verdict.
# In process, on 1 and 2 ranks: the watchdog's patience, the rules against misleading results
# and the verdict's one spelling, Slurm identifiers in file names, tools libraries, placement
# and Adiak's keys.
minilst_add_gtest(NAME test_job SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_job.cpp RANKS 1 2 LABELS unit)
# End to end: the watchdog on one rank and around a slow set-up and final write (a test hook),
# a tools library that cannot load, a hostile SLURM_JOB_ID, ranks sharing cores, the verdict.
minilst_add_script_test(NAME app_job LABELS app COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/job.sh)
set_tests_properties(app_job PROPERTIES PROCESSORS 2 TIMEOUT 300)
