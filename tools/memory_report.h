// Printing planning/rank_memory.h's report: the per-rank table, the line
// about the heaviest rank, and JSON (plan and compare share them).
#ifndef JITPIPE_TOOLS_MEMORY_REPORT_H_
#define JITPIPE_TOOLS_MEMORY_REPORT_H_

#include <string>

#include "nlohmann/json.hpp"
#include "planning/rank_memory.h"
#include "scheduler/ir/model.h"

namespace jitpipe::cli {

// "bf16 parameters, fp32 gradients, adam (fp32 states, fp32 master weights,
// sharded over dp 8)".
std::string TrainingSummary(const Model& model, const TrainingMemory& training);

// A header and one line per rank: parameters, gradients, optimizer,
// activations, total, limit, margin.
std::string MemoryTable(const MemoryReport& report);

// "heaviest rank: 0, 71.30 GiB of 80.00 GiB: fits by 8.70 GiB" (or "misses
// by ... (out of memory)", or "(no device limit)"); a second clause names
// the tightest rank when per-rank limits make it another one.
std::string HeaviestLine(const MemoryReport& report);

// "fits +8.70 GiB" / "OOM -3.10 GiB" / "no limit": the tightest rank's margin.
std::string FitCell(const MemoryReport& report);

// {"ranks": [{"rank", "parameters_bytes", ..., "total_bytes", "limit_bytes"
// (null without one), "margin_bytes" (null without one), "fits"}],
//  "heaviest_rank", "heaviest_bytes", "fits"}.
nlohmann::ordered_json MemoryJson(const MemoryReport& report);

}  // namespace jitpipe::cli

#endif  // JITPIPE_TOOLS_MEMORY_REPORT_H_
