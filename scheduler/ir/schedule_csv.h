// PyTorch's CSV schedule format (_dump_csv / _load_csv).
//
// One row per rank (row index = rank), no header, no rank column; each cell is
// one action in PyTorch's text form and an empty (or all-blank) cell is a
// bubble. Rows may differ in length. Lines end in "\n" ("\r\n" is accepted);
// cells may be double-quoted.
//
// A CSV does not carry the schedule's parameters, so reading infers them as
// PyTorch does: pp is the number of rows; stage s lives on the rank whose row
// holds it; the stage count is the largest stage + 1 and the microbatch count
// the largest microbatch + 1; the program is lowered when any cell holds a
// SEND/RECV/UNSHARD/RESHARD/REDUCE_GRAD (PyTorch's compute_comms format).
// A CSV holds one chain of stages; DualPipe's two chains need the JSON file.
#ifndef JITPIPE_SCHEDULER_IR_SCHEDULE_CSV_H_
#define JITPIPE_SCHEDULER_IR_SCHEDULE_CSV_H_

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

struct CsvReadOptions {
  // Older zero-bubble files (PyTorch's zb1p_2rank_2stagep_compute.csv) name
  // the input-gradient backward "B" and the weight backward "W". When set, a
  // B whose (stage, microbatch) later has a W on the same rank is read as I.
  bool legacy_backward_names = false;
};

// Parses CSV text. Errors: InvalidArgument naming the line and cell, the rank
// and index, and the offending text, e.g.
//   line 3, cell 18 (rank 2, index 17) "0F1x": cannot parse action ...
// or a stage found on two ranks, a stage on no rank, an empty file, unequal
// stage counts per rank, a bubble in a lowered program.
absl::StatusOr<Schedule> ParseScheduleCsv(absl::string_view text,
                                          const CsvReadOptions& options = {});

// Writes one row per rank; a bubble is an empty cell; lines end in "\n".
std::string ScheduleToCsv(const Schedule& schedule);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_IR_SCHEDULE_CSV_H_
