# analysis/compare.py on runs and sweeps of two machines (registered below).
# Two small sweeps (1 and 2 BLAS threads per rank) side by side: sources, spread,
# efficiency and noise columns, CSV values against the files, the PNG; sweep.py and
# summarize.py on old and new point file names.
minilst_add_script_test(NAME analysis_compare LABELS "app"
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/compare_two_machines.sh)
set_tests_properties(analysis_compare PROPERTIES PROCESSORS 2 TIMEOUT 180)
