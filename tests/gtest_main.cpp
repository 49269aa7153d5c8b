// GoogleTest main for miniLST: MPI and Kokkos live for the whole test program.
#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>
#include <mpi.h>

#include "memory/step_arena.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  Kokkos::initialize(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {  // one rank reports; all run
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int failed = RUN_ALL_TESTS();
  int any_failed = failed;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  minilst::StepArena::instance().reset();  // its arena is a Kokkos allocation
  Kokkos::finalize();
  MPI_Finalize();
  return any_failed ? 1 : 0;
}
