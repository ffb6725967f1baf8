// The step x rank grid, byte-identical to PyTorch's _format_pipeline_order.
//
//            Rank 0  Rank 1
//   Step 00: 0F0
//   Step 01: 0F1     1F0
//
// Step i of every rank is printed in one row (the lock-step view of a
// compute-only program); a bubble is a blank cell. Widths reproduce PyTorch's
// quirk: rank column i is as wide as the longer of "Step <i>" and rank i's
// longest action.
#ifndef JITPIPE_SCHEDULER_IR_FORMAT_GRID_H_
#define JITPIPE_SCHEDULER_IR_FORMAT_GRID_H_

#include <optional>
#include <string>
#include <vector>

#include "scheduler/ir/schedule.h"

namespace jitpipe {

// Formats `ranks` as PyTorch does; appends " <-- ERROR HERE" to the row of
// `error_step` when given. Ends with a newline.
std::string FormatPipelineOrder(const std::vector<RankProgram>& ranks,
                                std::optional<int> error_step = std::nullopt);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_IR_FORMAT_GRID_H_
