// For suites run as several processes (mpirun): every process but rank 0
// stops printing GoogleTest's progress and prints only its failures, each
// line naming its rank, so that a job's output reads as rank 0's run plus
// the other ranks' failures.
#ifndef JITPIPE_TESTS_TESTING_RANK_FAILURE_PRINTER_H_
#define JITPIPE_TESTS_TESTING_RANK_FAILURE_PRINTER_H_

namespace jitpipe::testing {

// For rank > 0: replaces GoogleTest's default printer with one that prints
// "rank <rank>: <file>:<line>: <summary>" for each failure, to stderr.
// Nothing for rank 0 (or below). Call after InitGoogleTest, before
// RUN_ALL_TESTS.
void PrintOnlyFailuresOnRank(int rank);

}  // namespace jitpipe::testing

#endif  // JITPIPE_TESTS_TESTING_RANK_FAILURE_PRINTER_H_
