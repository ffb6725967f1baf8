// Which schedule for my model: every built-in schedule at every valid number
// of stages per rank, on one layered model, doing the same work.
//
// For each schedule of AllGenerators() and each v of CompareOptions (1, 2
// and 4 unless given), the schedule is generated for (pp, m, v); refusals
// are kept with the generator's reason. The model is cut into its stages
// (partition.h: even, a layout, or balanced per row), so every row runs the
// same layers on the same microbatches; DualPipe's two chains each hold a
// copy (twice the parameters, the same compute). Each row is lowered with
// REDUCE_GRAD (and the overlap pass when asked) and simulated
// (stages/predict.h), and its memory planned per rank, all of it
// (rank_memory.h) against the device limit.
//
// Rows are sorted: those whose every rank fits by makespan, then those
// that run out of memory by makespan (ties by name, then v). The first row
// that fits is the answer. A row whose program another row already runs
// (bubbles aside) says which (CompareRow::same_as).
//
// Pure; thread-compatible; rows are evaluated on up to `threads` threads
// (base/parallel_for.h), the result not depending on it.
#ifndef JITPIPE_PLANNING_COMPARE_H_
#define JITPIPE_PLANNING_COMPARE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "planning/model_for_schedule.h"
#include "planning/rank_memory.h"
#include "scheduler/ir/layered_model.h"
#include "stages/predict/simulator.h"

namespace jitpipe {

struct CompareOptions {
  int pp = 0;
  int microbatches = 0;
  std::vector<int> stages_per_rank = {1, 2, 4};
  PartitionChoice partition = {};  // partition.predict.overlap follows `overlap`
  bool overlap = false;            // run the overlap pass
  int threads = 0;                 // 0: one per hardware thread
};

struct CompareRow {
  std::string schedule;
  int stages_per_rank = 0;
  std::string layout;       // the cut used, as a layout string (one chain)
  double work_us = 0;       // compute per rank, averaged: the same on every row
  SimulationResult simulation = {};
  MemoryReport memory = {};
  // "gpipe v1" when an earlier row (in the sorted order) runs the very same
  // program on the same cut: interleaved-zb at v 1 is ZB-H1, looped-bfs at
  // v 1 GPipe. Empty otherwise.
  std::string same_as = {};
  uint64_t program_hash = 0;  // of the cut, the stage placement and every rank's actions
  bool fits() const { return memory.fits(); }
};

struct CompareSkipped {
  std::string schedule;
  int stages_per_rank = 0;
  std::string reason;
};

struct Comparison {
  std::vector<CompareRow> rows;  // sorted as above
  std::vector<CompareSkipped> skipped;  // in generator order, then v
  // The first row that fits; -1 when none does.
  int best = -1;
};

// Errors: InvalidArgument for pp or microbatches < 1 or a v < 1; a row's
// own failure (e.g. a layout that does not fit its stage count) skips the
// row with that reason instead.
absl::StatusOr<Comparison> CompareSchedules(const LayeredModel& model,
                                            const CompareOptions& options);

}  // namespace jitpipe

#endif  // JITPIPE_PLANNING_COMPARE_H_
