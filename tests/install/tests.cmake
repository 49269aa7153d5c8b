# The installed tree, the exported CMake package and the Spack recipe (registered below).
# `cmake --install` of this build into a temporary prefix: the installed program and
# scripts run with no build tree reachable, an external project finds the package,
# the Spack recipe's check passes on the tree. Label build: the serial stage only.
minilst_add_script_test(NAME install_tree LABELS build
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/install_tree.sh)
set_tests_properties(install_tree PROPERTIES TIMEOUT 300)
