# Finds Kokkos (>= 3.4) and Kokkos Kernels and leaves two usable targets,
# Kokkos::kokkos and Kokkos::kokkoskernels, whichever install provides them:
#  - a standalone Kokkos 4.x + Kokkos Kernels (Spack, a cluster module):
#    both targets exist and are used as they are;
#  - Debian 12's Trilinos packages (Kokkos 3.4.01), which need two repairs:
#    Kokkos::kokkos advertises the non-existent include dir /usr/lib/include
#    (the headers are in ${Kokkos_INCLUDE_DIRS} = /usr/include/trilinos), and
#    the kernels target is called trilinos_kokkoskernels.

# A lower bound only: Kokkos 3.x's version file (SameMajorVersion) rejects ranges.
find_package(Kokkos 3.4 REQUIRED CONFIG)
if(Kokkos_VERSION VERSION_GREATER_EQUAL 5.0)
  message(WARNING "Kokkos ${Kokkos_VERSION}: Kokkos 5 needs C++20, miniLST is tested with 3.4 and 4.x")
endif()

# Repair 1: drop include directories that do not exist, add the real ones.
get_target_property(_mlst_kokkos_inc Kokkos::kokkos INTERFACE_INCLUDE_DIRECTORIES)
if(_mlst_kokkos_inc)
  set(_mlst_good_inc "")
  set(_mlst_repaired FALSE)
  foreach(_dir IN LISTS _mlst_kokkos_inc)
    if(_dir MATCHES "^\\$<" OR EXISTS "${_dir}")   # keep generator expressions
      list(APPEND _mlst_good_inc "${_dir}")
    else()
      set(_mlst_repaired TRUE)
    endif()
  endforeach()
  if(_mlst_repaired)
    foreach(_dir IN LISTS Kokkos_INCLUDE_DIRS)
      get_filename_component(_dir "${_dir}" ABSOLUTE)
      list(APPEND _mlst_good_inc "${_dir}")
    endforeach()
    set_target_properties(Kokkos::kokkos PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_mlst_good_inc}")
    message(STATUS "miniLST: repaired Kokkos::kokkos include directories -> ${_mlst_good_inc}")
  endif()
endif()

# Kokkos Kernels: Debian ships no version file, so no version is asked for.
find_package(KokkosKernels REQUIRED CONFIG)
if(NOT TARGET Kokkos::kokkoskernels)
  if(TARGET trilinos_kokkoskernels)       # Repair 2: Trilinos' name for the same library
    add_library(Kokkos::kokkoskernels INTERFACE IMPORTED)
    set_target_properties(Kokkos::kokkoskernels PROPERTIES
      INTERFACE_LINK_LIBRARIES "trilinos_kokkoskernels;Kokkos::kokkos")
    message(STATUS "miniLST: Kokkos::kokkoskernels -> trilinos_kokkoskernels")
  else()
    message(FATAL_ERROR "Kokkos Kernels found, but neither Kokkos::kokkoskernels nor trilinos_kokkoskernels exists")
  endif()
endif()

# Which backends this Kokkos has (kokkos_check exists in 3.4 and 4.x).
set(MINILST_KOKKOS_DEVICES "")
foreach(_dev SERIAL OPENMP THREADS CUDA HIP SYCL)
  kokkos_check(DEVICES ${_dev} RETURN_VALUE _has)
  if(_has)
    list(APPEND MINILST_KOKKOS_DEVICES ${_dev})
  endif()
endforeach()
kokkos_check(DEVICES CUDA RETURN_VALUE MINILST_KOKKOS_HAS_CUDA)
