# minilst_add_gtest(NAME name SOURCES a.cpp ... [RANKS 1 2 4] [LABELS ...])
#   Builds one GoogleTest program and registers it with ctest once per rank
#   count, as name_np<N>, launched by mpiexec with --oversubscribe on N > 1
#   (the test machines have 2 cores; 4 ranks oversubscribe them). Every program
#   links the one main (tests/gtest_main.cpp), compiled once.
function(minilst_add_gtest)
  cmake_parse_arguments(T "" "NAME" "SOURCES;RANKS;LABELS" ${ARGN})
  if(NOT T_RANKS)
    set(T_RANKS 1)
  endif()
  if(NOT TARGET minilst_gtest_main)
    add_library(minilst_gtest_main OBJECT ${PROJECT_SOURCE_DIR}/tests/gtest_main.cpp)
    target_link_libraries(minilst_gtest_main PRIVATE minilst_core GTest::gtest)
  endif()
  add_executable(${T_NAME} ${T_SOURCES} $<TARGET_OBJECTS:minilst_gtest_main>)
  target_link_libraries(${T_NAME} PRIVATE minilst_core GTest::gtest)
  if(NOT MINILST_ENABLE_MPI)   # a single-process build: the program alone, as one rank
    set(T_RANKS 1)
  endif()
  foreach(n IN LISTS T_RANKS)
    set(launch ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${n})
    if(NOT MINILST_ENABLE_MPI)
      set(launch "")
    endif()
    set(extra "")
    if(n GREATER 1)
      set(extra ${MINILST_MPIEXEC_OVERSUBSCRIBE})
    endif()
    add_test(NAME ${T_NAME}_np${n}
      COMMAND ${launch} ${extra} ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${T_NAME}> ${MPIEXEC_POSTFLAGS})
    set_tests_properties(${T_NAME}_np${n} PROPERTIES PROCESSORS ${n} LABELS "${T_LABELS}"
      ENVIRONMENT "OPENBLAS_NUM_THREADS=1;OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
  endforeach()
endfunction()

# minilst_add_script_test(NAME name COMMAND cmd args... [LABELS ...])
#   A test that runs a script (shell or Python) against the built program.
function(minilst_add_script_test)
  cmake_parse_arguments(T "" "NAME" "COMMAND;LABELS" ${ARGN})
  add_test(NAME ${T_NAME} COMMAND ${T_COMMAND})
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}"
    ENVIRONMENT "MINILST=$<TARGET_FILE:minilst>;MINILST_SOURCE=${PROJECT_SOURCE_DIR};PYTHON=${MINILST_PYTHON};MPIEXEC=${MPIEXEC_EXECUTABLE};OPENBLAS_NUM_THREADS=1;OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
endfunction()
