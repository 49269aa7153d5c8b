# The GPU bundle and the device check (scripts/gpu/), registered from tests/CMakeLists.txt.
#   gpu_check_dry_run   scripts/gpu/check.sh --dry-run on this host build: every part runs
#                       at tiny sizes, the summary has the keys a GPU run writes, and a
#                       small budget skips the parts it cannot fit and keeps the summary
#   gpu_bundle_checker  scripts/gpu/check_bundle.py finds a library a bundle lacks, a
#                       machine path in a run path, and passes a complete bundle
#   gpu_bundle          scripts/gpu/pack.sh: the CUDA program and its tests built against a
#                       CUDA Kokkos, packed with their libraries, checked (label cuda: the
#                       test stage `cuda`; skipped where the toolkit or Kokkos sources are missing)
minilst_add_script_test(NAME gpu_check_dry_run LABELS app COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/check_dry_run.sh)
set_tests_properties(gpu_check_dry_run PROPERTIES TIMEOUT 600)
minilst_add_script_test(NAME gpu_bundle_checker LABELS unit COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/bundle_checker.sh)
if(NOT MINILST_KOKKOS_HAS_CUDA)
  add_test(NAME gpu_bundle COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/bundle.sh)
  set_tests_properties(gpu_bundle PROPERTIES LABELS "build;cuda" TIMEOUT 3000 SKIP_RETURN_CODE 77
    ENVIRONMENT "MINILST_SOURCE=${PROJECT_SOURCE_DIR};MINILST_VENDOR=${_mlst_vendor}")
endif()
