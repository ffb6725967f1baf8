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
// Each row also carries the figures of planning/step_figures.h: its bubble
// split into pipeline bubble and stage imbalance, and, as far as the model's
// workload and peak allow, tokens per second and MFU of the simulated step.
//
// Time: rows are judged on up to `threads` threads (base/parallel_for.h),
// each candidate's balanced search the costliest part, every schedule at its
// smallest v first (the cheapest: a short budget still sees every schedule). A candidate not yet
// started when `time_budget` has passed is skipped with the reason "not
// judged: ..." (CompareSkipped::out_of_time); one running then finishes, its
// balanced search ended early with the best cut found (CompareRow::
// budget_ended). With an infinite budget the result does not depend on the
// threads or the machine; with a finite one, which rows are judged does.
//
// Pure but for reading the clock and calling `progress`; thread-compatible.
#ifndef JITPIPE_PLANNING_COMPARE_H_
#define JITPIPE_PLANNING_COMPARE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "planning/model_for_schedule.h"
#include "planning/rank_memory.h"
#include "planning/step_figures.h"
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
  // Of the whole comparison; each row's balanced search is also cut to what
  // remains of it (and to partition.time_budget).
  absl::Duration time_budget = absl::InfiniteDuration();
  // Called after each candidate is judged or skipped, with how many are done
  // and how many there are; from the threads that judge them, one call at a
  // time (the callee needs no lock). Empty: none.
  std::function<void(int done, int total)> progress = {};
};

struct CompareRow {
  std::string schedule;
  int stages_per_rank = 0;
  std::string layout;       // the cut used, as a layout string (one chain)
  double work_us = 0;       // compute per rank, averaged: the same on every row
  SimulationResult simulation = {};
  BubbleSplit bubble = {};   // simulation.bubble_fraction, split (step_figures.h)
  StepFigures figures = {};  // tokens/s and MFU of the simulated step
  bool budget_ended = false; // its balanced search was cut short by the time budget
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
  bool out_of_time = false;  // not judged: the time budget had passed
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
