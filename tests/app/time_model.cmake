# The time model: probe (1 and 2 ranks), machine files (shipped, hand-made, implausible, bad),
# plan --machine's phases and scaling, the 64-rank layout search (tests/app/time_model.sh).
minilst_add_script_test(NAME app_time_model LABELS app COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/time_model.sh)
set_tests_properties(app_time_model PROPERTIES PROCESSORS 2 TIMEOUT 180)
