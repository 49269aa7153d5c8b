# A stand-in for a standalone Kokkos 4.x install (as Spack builds it): correct
# Kokkos::kokkos target, kokkos_check(), version 4.3.0. It points at Debian's
# Kokkos headers and libraries so the project can still build; only the CMake
# packaging differs. Used by tests/cmake/configure_kokkos4.sh.
set(Kokkos_VERSION 4.3.0)
set(Kokkos_DEVICES SERIAL OPENMP)
if(NOT TARGET Kokkos::kokkos)
  add_library(Kokkos::kokkos INTERFACE IMPORTED)
  set_target_properties(Kokkos::kokkos PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES /usr/include/trilinos
    INTERFACE_LINK_LIBRARIES "trilinos_kokkoscore;trilinos_kokkoscontainers;dl")
endif()
function(kokkos_check)
  cmake_parse_arguments(KC "" "RETURN_VALUE" "DEVICES;OPTIONS;ARCH;TPLS" ${ARGN})
  set(ok TRUE)
  foreach(d IN LISTS KC_DEVICES)
    string(TOUPPER "${d}" d)
    if(NOT d IN_LIST Kokkos_DEVICES)
      set(ok FALSE)
    endif()
  endforeach()
  set(${KC_RETURN_VALUE} ${ok} PARENT_SCOPE)
endfunction()
