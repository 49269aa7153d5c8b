# The shipped decks' problems, for the procurement tiers (RUN_RULES.md, "Tiers"): writes
# generated/minilst_shipped_decks.hpp with one {"deck", "digest"} pair per deck of inputs/ that
# carries a reference answer (its `reference.problem`). A deck edited in the source tree
# reconfigures the build, so the list always matches the decks beside the program.
file(GLOB _mlst_decks CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/inputs/*.yaml)
list(SORT _mlst_decks)
set(MINILST_SHIPPED_PROBLEMS "")
foreach(_mlst_deck IN LISTS _mlst_decks)
  file(STRINGS ${_mlst_deck} _mlst_line REGEX "^  problem: *\"[0-9a-f]+\"")
  if(_mlst_line)
    string(REGEX REPLACE "^  problem: *\"([0-9a-f]+)\".*" "\\1" _mlst_digest "${_mlst_line}")
    get_filename_component(_mlst_name ${_mlst_deck} NAME_WE)
    string(APPEND MINILST_SHIPPED_PROBLEMS "  {\"${_mlst_name}\", \"${_mlst_digest}\"},\n")
  endif()
endforeach()
configure_file(${PROJECT_SOURCE_DIR}/cmake/minilst_shipped_decks.hpp.in
               ${PROJECT_BINARY_DIR}/generated/minilst_shipped_decks.hpp @ONLY)
