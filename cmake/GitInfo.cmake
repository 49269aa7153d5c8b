# Writes ${OUT} with the git commit and dirty state of ${SRC}; run at build time
# (not only at configure time) so the binary always names the commit it was built from.
execute_process(COMMAND git -C "${SRC}" rev-parse HEAD
  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
endif()
execute_process(COMMAND git -C "${SRC}" status --porcelain --untracked-files=no
  OUTPUT_VARIABLE status OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(status STREQUAL "")
  set(dirty 0)
else()
  set(dirty 1)
endif()
set(content "#pragma once\n#define MINILST_GIT_COMMIT \"${commit}\"\n#define MINILST_GIT_DIRTY ${dirty}\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL content)      # rewrite only on change: no needless rebuilds
  file(WRITE "${OUT}" "${content}")
endif()
