# analysis/compare.py on runs and sweeps of two machines (registered below).
# Two small sweeps (1 and 2 BLAS threads per rank) side by side: sources, spread,
# efficiency and noise columns, CSV values against the files, the PNG; sweep.py and
# summarize.py on old and new point file names.
minilst_add_script_test(NAME analysis_compare LABELS "app"
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/compare_two_machines.sh)
set_tests_properties(analysis_compare PROPERTIES PROCESSORS 2 TIMEOUT 180)
# compare.py's noise test against the placement and the step spread each run recorded: synthesized
# metrics files (a 2x gap from two points run at once on a 2-core node is noise; a real 2x gap is not).
minilst_add_script_test(NAME analysis_compare_noise LABELS "app"
  COMMAND ${MINILST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/compare_noise.py)
set_tests_properties(analysis_compare_noise PROPERTIES TIMEOUT 60)
# analysis/procurement_report.py: projected (plan JSON) beside demonstrated (metrics files, RESULT lines) per
# system, on synthesized files; the numbers of its CSV against them.
minilst_add_script_test(NAME analysis_procurement_report LABELS "app"
  COMMAND ${MINILST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/procurement_report_check.py)
set_tests_properties(analysis_procurement_report PROPERTIES TIMEOUT 60)
# benchmarks/reframe/minilst_check.py under a stand-in for the ReFrame API it uses, with ReFrame's
# reference lookup: a FOM below an impossible reference fails (the check can fail).
minilst_add_script_test(NAME analysis_reframe_check LABELS "app"
  COMMAND ${MINILST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/reframe_check.py)
set_tests_properties(analysis_reframe_check PROPERTIES TIMEOUT 60)
# analysis/longest_account.py: MEMO's longest rows counted term by term bracket MEMO's own lengths (fits at the
# paper's, not at the next), the count's model states agree with miniLST's plan, the script prints every table.
minilst_add_script_test(NAME analysis_longest_account LABELS "app"
  COMMAND ${MINILST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/longest_account_check.py)
set_tests_properties(analysis_longest_account PROPERTIES TIMEOUT 120)
