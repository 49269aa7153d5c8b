# Deck fuzzing: mutated decks (a fixed seed) through the parser, the rules and the
# memory model; then the saved corpus of decks that once crashed, hung or were
# silently accepted: all refused. scripts/fuzz_deck.sh runs the long campaign.
add_executable(fuzz_deck ${CMAKE_CURRENT_LIST_DIR}/fuzz_deck.cpp)
target_link_libraries(fuzz_deck PRIVATE minilst_core)
add_test(NAME fuzz_deck COMMAND fuzz_deck --decks 400 --commands 2000 --outputs 200 ${PROJECT_SOURCE_DIR}/inputs/tiny.yaml
  ${PROJECT_SOURCE_DIR}/inputs/default.yaml ${PROJECT_SOURCE_DIR}/inputs/long_context_cpu.yaml)
add_test(NAME fuzz_deck_corpus COMMAND fuzz_deck --corpus ${CMAKE_CURRENT_LIST_DIR}/corpus)
set_tests_properties(fuzz_deck fuzz_deck_corpus PROPERTIES LABELS unit)
# Signals at random moments to runs and plans, and ranks given different command lines (processes).
minilst_add_script_test(NAME fuzz_processes LABELS app
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/fuzz_processes.sh 12 1)
set_tests_properties(fuzz_processes PROPERTIES PROCESSORS 2)
# Corrupt metrics files (bytes replaced, bits flipped, cut short) through `minilst result` and
# analysis/summarize.py: no crash, one line naming each unreadable file, no HDF5 diagnostics.
# tests/fuzz/fuzz_results.py --files 100000 --jobs 8 runs the long campaign (docs/tests.md).
minilst_add_script_test(NAME fuzz_results LABELS app
  COMMAND ${MINILST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/fuzz_results.py --files 150 --seed 1 --jobs 2)
set_tests_properties(fuzz_results PROPERTIES PROCESSORS 2 TIMEOUT 300)
# A hostile campaign over every command and analysis script (FIFOs, devices, links, odd numbers, the
# environment, outputs aimed at a user's files, signals): no crash, hang or loss, every refusal naming
# its input. tests/fuzz/fuzz_hostile.py --cases 2000 runs the long campaign (docs/tests.md).
minilst_add_script_test(NAME fuzz_hostile LABELS app
  COMMAND ${MINILST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/fuzz_hostile.py --cases 120 --seed 1 --jobs 2)
set_tests_properties(fuzz_hostile PROPERTIES PROCESSORS 2 TIMEOUT 600)
