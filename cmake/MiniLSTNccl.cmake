# The NCCL communicator (src/parallel/nccl_communicator.*), two independent parts:
#  - the backend: built into minilst_core, with MINILST_HAVE_NCCL defined (PUBLIC),
#    only where Kokkos has CUDA and NCCL is found;
#  - a compile check (MINILST_NCCL_COMPILE_CHECK): an executable built from the
#    NCCL sources with the host C++ compiler (no nvcc) wherever the CUDA toolkit
#    and NCCL are found, even with a CPU-only Kokkos, so CPU CI still compiles
#    and links the backend; its ctest prints the NCCL version (no GPU needed).
# Include after minilst_core exists and MINILST_KOKKOS_HAS_CUDA is set.

if(NOT TARGET minilst_core)
  message(FATAL_ERROR "MiniLSTNccl.cmake: include it after add_library(minilst_core ...)")
endif()

if(NOT DEFINED CUDAToolkit_ROOT AND NOT DEFINED ENV{CUDAToolkit_ROOT} AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_package(CUDAToolkit QUIET)

find_path(NCCL_INCLUDE_DIR nccl.h
  HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include ENV NCCL_HOME
  PATH_SUFFIXES include)
find_library(NCCL_LIBRARY nccl
  HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64 ENV NCCL_HOME
  PATH_SUFFIXES lib lib64)

set(_mlst_nccl_missing "")
if(NOT CUDAToolkit_FOUND OR NOT TARGET CUDA::cudart)
  list(APPEND _mlst_nccl_missing "the CUDA toolkit (CUDA::cudart: set CUDAToolkit_ROOT)")
endif()
if(NOT NCCL_INCLUDE_DIR)
  list(APPEND _mlst_nccl_missing "nccl.h (set NCCL_HOME or NCCL_INCLUDE_DIR)")
endif()
if(NOT NCCL_LIBRARY)
  list(APPEND _mlst_nccl_missing "libnccl (set NCCL_HOME or NCCL_LIBRARY)")
endif()
if(_mlst_nccl_missing)
  set(_mlst_nccl_found FALSE)
else()
  set(_mlst_nccl_found TRUE)
  if(NOT TARGET minilst::nccl)
    add_library(minilst::nccl UNKNOWN IMPORTED)
    set_target_properties(minilst::nccl PROPERTIES
      IMPORTED_LOCATION "${NCCL_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}"
      INTERFACE_LINK_LIBRARIES CUDA::cudart)
  endif()
endif()

# The backend proper (MINILST_ENABLE_NCCL OFF: MPI for every collective even where NCCL is found).
option(MINILST_ENABLE_NCCL "Build the NCCL communicator where Kokkos has CUDA and NCCL is found" ON)
set(MINILST_HAVE_NCCL FALSE)
if(MINILST_ENABLE_NCCL AND MINILST_ENABLE_MPI AND MINILST_KOKKOS_HAS_CUDA AND _mlst_nccl_found)
  set(MINILST_HAVE_NCCL TRUE)
  target_sources(minilst_core PRIVATE ${PROJECT_SOURCE_DIR}/src/parallel/nccl_communicator.cpp)
  # dtype_bytes() lives in mpi_communicator.cpp: make sure the library has it.
  get_target_property(_mlst_core_sources minilst_core SOURCES)
  if(NOT _mlst_core_sources MATCHES "parallel/mpi_communicator\\.cpp")
    target_sources(minilst_core PRIVATE ${PROJECT_SOURCE_DIR}/src/parallel/mpi_communicator.cpp)
  endif()
  target_link_libraries(minilst_core PUBLIC minilst::nccl CUDA::cudart)
  target_compile_definitions(minilst_core PUBLIC MINILST_HAVE_NCCL)
endif()

# The compile check.
option(MINILST_NCCL_COMPILE_CHECK "Build nccl_compile_check (NCCL backend compiled with the host compiler)"
       ${_mlst_nccl_found})
if(MINILST_NCCL_COMPILE_CHECK)
  if(NOT _mlst_nccl_found)
    list(JOIN _mlst_nccl_missing ", " _mlst_missing_str)
    message(FATAL_ERROR "MINILST_NCCL_COMPILE_CHECK is ON but not found: ${_mlst_missing_str}")
  endif()
  add_executable(nccl_compile_check
    ${PROJECT_SOURCE_DIR}/tests/nccl/nccl_compile_check.cpp
    ${PROJECT_SOURCE_DIR}/src/parallel/nccl_communicator.cpp
    ${PROJECT_SOURCE_DIR}/src/parallel/mpi_communicator.cpp)   # dtype_bytes()
  target_include_directories(nccl_compile_check PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(nccl_compile_check PRIVATE minilst::nccl CUDA::cudart MPI::MPI_CXX)
  if(MINILST_ENABLE_TESTS)
    enable_testing()
    add_test(NAME nccl_compile_check COMMAND nccl_compile_check --version)
    set_tests_properties(nccl_compile_check PROPERTIES LABELS build)
  endif()
endif()

if(_mlst_nccl_found)
  set(_mlst_nccl_where "${NCCL_LIBRARY}")
else()
  list(JOIN _mlst_nccl_missing ", " _mlst_nccl_where)
  set(_mlst_nccl_where "missing ${_mlst_nccl_where}")
endif()
message(STATUS "miniLST NCCL backend: ${MINILST_HAVE_NCCL} (Kokkos CUDA ${MINILST_KOKKOS_HAS_CUDA}; "
               "NCCL: ${_mlst_nccl_where}), nccl_compile_check: ${MINILST_NCCL_COMPILE_CHECK}")
