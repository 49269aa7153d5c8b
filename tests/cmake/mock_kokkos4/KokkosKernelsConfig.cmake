# Stand-in for a standalone Kokkos Kernels 4.x: exports Kokkos::kokkoskernels.
if(NOT TARGET Kokkos::kokkoskernels)
  add_library(Kokkos::kokkoskernels INTERFACE IMPORTED)
  set_target_properties(Kokkos::kokkoskernels PROPERTIES
    INTERFACE_LINK_LIBRARIES "trilinos_kokkoskernels;Kokkos::kokkos;openblas")
endif()
