# `minilst verify` (docs/verify.md) end to end on 4 ranks: the hybrid layout (Ulysses 2 x zigzag
# ring 2) with packed documents (one-token ones among lengths that divide nothing) and a
# sliding window shorter than a ring block certified against the float64 reference; each
# test-only fault (MINILST_TEST_FAULT: a dropped mask, a stale K/V block) caught and named;
# bad decks and a bad fault refused on every rank; the export checked by PyTorch
# (analysis/verify_export_torch.py).
minilst_add_script_test(NAME app_verify LABELS app COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/verify.sh)
set_tests_properties(app_verify PROPERTIES PROCESSORS 4 TIMEOUT 300)
