// The MPI world of a suite run as an MPI job (mpirun -np N SUITE): created
// by mpi_test_main.cc's main() before any test runs, finalised after the
// last. Link mpi_test_main.cc instead of GoogleTest's main.
#ifndef JITPIPE_TESTS_MPI_MPI_TEST_MAIN_H_
#define JITPIPE_TESTS_MPI_MPI_TEST_MAIN_H_

#include "comm/mpi/mpi_world.h"

namespace jitpipe::testing {

// This process's world. REQUIRES: called from a test (after main made it).
MpiWorld& TheMpiWorld();

}  // namespace jitpipe::testing

#endif  // JITPIPE_TESTS_MPI_MPI_TEST_MAIN_H_
