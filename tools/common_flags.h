// Flags shared by several subcommands (each command lists the ones it takes).
#ifndef JITPIPE_TOOLS_COMMON_FLAGS_H_
#define JITPIPE_TOOLS_COMMON_FLAGS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/flags/declare.h"
#include "absl/strings/string_view.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "scheduler/generators/generate.h"
#include "scheduler/ir/layered_model.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe::cli {
// A byte size on the command line ("1GiB", "200MB", "4096"; base/byte_units.h),
// so that a malformed size is a usage error found while parsing.
struct ByteSizeFlag {
  std::int64_t bytes = 0;
};
bool AbslParseFlag(absl::string_view text, ByteSizeFlag* out, std::string* error);
std::string AbslUnparseFlag(ByteSizeFlag size);
}  // namespace jitpipe::cli

ABSL_DECLARE_FLAG(std::string, output);
// Accepted by every command (cli.h: kProgramFlags): input files and streams
// longer than this are refused.
ABSL_DECLARE_FLAG(jitpipe::cli::ByteSizeFlag, max_input_bytes);
ABSL_DECLARE_FLAG(bool, json);
ABSL_DECLARE_FLAG(bool, legacy_names);
ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(std::string, trace);
ABSL_DECLARE_FLAG(bool, overlap);
ABSL_DECLARE_FLAG(bool, overlap_merge);
ABSL_DECLARE_FLAG(double, time_budget);
// plan, compare, generate --schedule auto: the device limit and its reserve.
ABSL_DECLARE_FLAG(std::string, memory_limit);
ABSL_DECLARE_FLAG(std::string, reserve);
// lower (0: none) and plan's PyTorch report (>= 1, default 1).
ABSL_DECLARE_FLAG(int, send_budget);
// A built-in schedule: generate, lower --schedule, compare.
ABSL_DECLARE_FLAG(std::string, schedule);
ABSL_DECLARE_FLAG(int, pp);
ABSL_DECLARE_FLAG(int, microbatches);
ABSL_DECLARE_FLAG(int, stages_per_rank);
// compare and generate --schedule auto: sequences per step, all dp replicas.
ABSL_DECLARE_FLAG(int64_t, global_batch);
// model and compare: one GPU's peak TFLOP/s, for MFU.
ABSL_DECLARE_FLAG(double, peak_tflops);

namespace jitpipe::cli {

// --time-budget, checked: (0, 86400] seconds. Errors: InvalidArgument.
absl::StatusOr<absl::Duration> TimeBudgetFromFlags();

// --memory-limit (unset: none given) and --reserve, checked. Errors:
// InvalidArgument naming the flag.
absl::StatusOr<std::optional<int64_t>> MemoryLimitFromFlags();
absl::StatusOr<MemoryReserve> ReserveFromFlags();
// Both applied to a model's device: a --memory-limit replaces its limits.
absl::Status ApplyDeviceFlags(DeviceSpec& device);

// --microbatches, or --global-batch made into microbatches by the model's
// dp.size and workload.microbatch_size (planning/step_figures.h); `model`
// null for a version 1 file. Errors: InvalidArgument when neither flag is
// set, when --global-batch is given with a version 1 model, does not divide
// or contradicts --microbatches (naming both values); FailedPrecondition
// when the model does not give its microbatch size.
absl::StatusOr<int> MicrobatchesFromFlags(bool microbatches_set, bool global_batch_set,
                                          const LayeredModel* model);

// --peak-tflops, when set, checked and written into the model's device.
// Errors: InvalidArgument for a value outside (0, kMaxPeakTflops].
absl::Status ApplyPeakFlag(bool set, DeviceSpec& device);

// --max-input-bytes.
std::uint64_t MaxInputBytes();

// Loads the schedule at `path` (JSON or CSV), honouring --legacy_names and
// --microbatches, or --global-batch made into microbatches by the model's
// dp.size and workload.microbatch_size (planning/step_figures.h); `model`
// null for a version 1 file. Errors: InvalidArgument when neither flag is
// set, when --global-batch is given with a version 1 model, does not divide
// or contradicts --microbatches (naming both values); FailedPrecondition
// when the model does not give its microbatch size.
absl::StatusOr<int> MicrobatchesFromFlags(bool microbatches_set, bool global_batch_set,
                                          const LayeredModel* model);

// --peak-tflops, when set, checked and written into the model's device.
// Errors: InvalidArgument for a value outside (0, kMaxPeakTflops].
absl::Status ApplyPeakFlag(bool set, DeviceSpec& device);

// --max-input-bytes.
absl::StatusOr<Schedule> LoadInputSchedule(const std::string& path);

// The built-in schedule --schedule, --pp, --microbatches and
// --stages-per-rank name (Generate() checks them).
GenerateOptions GenerateOptionsFromFlags();

// Writes the schedule's JSON to stdout, streamed (never whole in memory).
void PrintScheduleJson(const Schedule& schedule);

}  // namespace jitpipe::cli

#endif  // JITPIPE_TOOLS_COMMON_FLAGS_H_
