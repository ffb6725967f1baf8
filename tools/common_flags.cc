#include "tools/common_flags.h"

#include <cmath>
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/atomic_file.h"
#include "base/byte_units.h"
#include "planning/step_figures.h"
#include "scheduler/ir/schedule_io.h"
#include "scheduler/ir/schedule_json.h"

namespace jitpipe::cli {

bool AbslParseFlag(absl::string_view text, ByteSizeFlag* out, std::string* error) {
  absl::StatusOr<int64_t> bytes = ParseByteSize(text);
  if (!bytes.ok()) {
    *error = std::string(bytes.status().message());
    return false;
  }
  if (*bytes <= 0) {
    *error = "must be at least 1 byte";
    return false;
  }
  out->bytes = *bytes;
  return true;
}

std::string AbslUnparseFlag(ByteSizeFlag size) { return std::to_string(size.bytes); }

}  // namespace jitpipe::cli

ABSL_FLAG(jitpipe::cli::ByteSizeFlag, max_input_bytes,
          jitpipe::cli::ByteSizeFlag{static_cast<int64_t>(jitpipe::kDefaultMaxInputBytes)},
          "refuse input files and streams longer than this many bytes (1GiB = 1073741824; "
          "units B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)");
ABSL_FLAG(std::string, output, "", "write the result to this file (.json or .csv)");
ABSL_FLAG(bool, json, false, "print the result as JSON");
ABSL_FLAG(bool, legacy_names, false,
          "read CSV files with the old zero-bubble names (B = input backward, W = weight)");
ABSL_FLAG(std::string, model, "", "the cost model file (jitpipe.model JSON)");
ABSL_FLAG(std::string, trace, "", "write a Chrome trace (Perfetto, chrome://tracing) to this file");
ABSL_FLAG(std::string, schedule, "",
          "schedule name, case-insensitive; PyTorch's class names are aliases");
ABSL_FLAG(int, pp, 0, "pipeline ranks (p)");
ABSL_FLAG(int, microbatches, 0, "microbatches per step (m)");
ABSL_FLAG(int, stages_per_rank, 0, "stages per rank (v); 0 takes the schedule's default");
ABSL_FLAG(int, send_budget, 0,
          "hold at most K sent buffers per rank, adding WAIT_SEND_F/B where a receive is "
          "known posted (PyTorch's _add_wait_send_budget); lower: 0 is no budget; plan's "
          "PyTorch report: at least 1 (its default)");
ABSL_FLAG(double, time_budget, 10,
          "seconds a search may take: generate --schedule auto, and --partition balanced "
          "(the best found when it ends)");
ABSL_FLAG(std::string, memory_limit, "",
          "each GPU's memory, e.g. 80GiB: replaces the model's device memory when judging what "
          "fits");
ABSL_FLAG(std::string, reserve, "standard",
          "memory kept back from each GPU's limit for the CUDA context, NCCL's buffers and the "
          "allocator's fragmentation, so that 'fits' means within the limit less this: a byte "
          "size (2GiB), a percentage (8%), or standard (5% plus min(1 GiB, 5%): 5 GiB of 80)");
ABSL_FLAG(int64_t, global_batch, 0,
          "sequences per training step over all dp replicas: the microbatches are global batch "
          "/ (dp x microbatch size), both from the model file (instead of --microbatches)");
ABSL_FLAG(double, peak_tflops, 0,
          "one GPU's peak dense throughput in 10^12 FLOP/s, the denominator of MFU (H100 SXM "
          "bf16: 989; A100 bf16: 312); replaces the model's device.peak_tflops");
ABSL_FLAG(bool, overlap, false,
          "run the overlap pass: reorder Ws so gradient reductions hide under compute "
          "(needs REDUCE_GRAD)");
ABSL_FLAG(bool, overlap_merge, true,
          "with --overlap under a model: let the pass merge the last I and W of the rank that "
          "ends the step into one B where the simulated step does not get longer "
          "(--overlap-merge=false keeps every I and W split)");

namespace jitpipe::cli {

absl::StatusOr<std::optional<int64_t>> MemoryLimitFromFlags() {
  const std::string limit = absl::GetFlag(FLAGS_memory_limit);
  if (limit.empty()) return std::optional<int64_t>();
  absl::StatusOr<int64_t> bytes = ParseByteSize(limit);
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--memory-limit: ", bytes.status().message()));
  }
  if (*bytes <= 0 || *bytes > kMaxDeviceBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--memory-limit must be from 1 byte to ", FormatBytes(kMaxDeviceBytes)));
  }
  return std::optional<int64_t>(*bytes);
}

absl::StatusOr<MemoryReserve> ReserveFromFlags() {
  const std::string text = absl::GetFlag(FLAGS_reserve);
  if (text == "standard") return StandardReserve();
  if (!text.empty() && text.back() == '%') {
    double percent = 0;
    if (!absl::SimpleAtod(text.substr(0, text.size() - 1), &percent) ||
        !(percent >= 0 && percent < 100)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--reserve \"", text, "\": a percentage must be from 0% to below 100%"));
    }
    return MemoryReserve{.fraction = percent / 100};
  }
  absl::StatusOr<int64_t> bytes = ParseByteSize(text);
  if (!bytes.ok() || *bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--reserve \"", text, "\" is neither standard, a percentage (8%) nor a byte size (2GiB)"));
  }
  return MemoryReserve{.bytes = *bytes};
}

absl::Status ApplyDeviceFlags(DeviceSpec& device) {
  ASSIGN_OR_RETURN(std::optional<int64_t> limit, MemoryLimitFromFlags());
  if (limit.has_value()) {
    device.memory_bytes = *limit;
    device.rank_memory_bytes.clear();
  }
  ASSIGN_OR_RETURN(device.reserve, ReserveFromFlags());
  return absl::OkStatus();
}

absl::StatusOr<absl::Duration> TimeBudgetFromFlags() {
  const double budget = absl::GetFlag(FLAGS_time_budget);
  if (!(budget > 0 && budget <= 86400)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--time-budget must be in (0, 86400] seconds, got ", budget));
  }
  return absl::Seconds(budget);
}

absl::StatusOr<int> MicrobatchesFromFlags(bool microbatches_set, bool global_batch_set,
                                          const LayeredModel* model) {
  const int microbatches = absl::GetFlag(FLAGS_microbatches);
  if (!global_batch_set) {
    if (!microbatches_set) {
      return absl::InvalidArgumentError("give --microbatches or --global-batch");
    }
    return microbatches;
  }
  const int64_t global_batch = absl::GetFlag(FLAGS_global_batch);
  if (model == nullptr) {
    return absl::InvalidArgumentError(
        "--global-batch needs a version 2 model (it gives the microbatch size); give "
        "--microbatches");
  }
  absl::StatusOr<int> m = MicrobatchesForGlobalBatch(*model, global_batch);
  if (!m.ok()) return absl::Status(m.status().code(), absl::StrCat("--global-batch: ", m.status().message()));
  if (microbatches_set && microbatches != *m) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--global-batch ", global_batch, " makes ", *m, " microbatches (dp ", model->dp.size,
        " x microbatch size ", model->workload.microbatch_size, "), but --microbatches is ",
        microbatches, "; give one of them"));
  }
  return *m;
}

absl::Status ApplyPeakFlag(bool set, DeviceSpec& device) {
  if (!set) return absl::OkStatus();
  const double peak = absl::GetFlag(FLAGS_peak_tflops);
  if (!(std::isfinite(peak) && peak > 0 && peak <= kMaxPeakTflops)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--peak-tflops must be a number > 0 and at most ", kMaxPeakTflops, ", got ", peak));
  }
  device.peak_tflops = peak;
  return absl::OkStatus();
}

std::uint64_t MaxInputBytes() {
  return static_cast<std::uint64_t>(absl::GetFlag(FLAGS_max_input_bytes).bytes);
}

absl::StatusOr<Schedule> LoadInputSchedule(const std::string& path) {
  CsvReadOptions options;
  options.legacy_backward_names = absl::GetFlag(FLAGS_legacy_names);
  return LoadSchedule(path, options, MaxInputBytes());
}

GenerateOptions GenerateOptionsFromFlags() {
  return {.schedule = absl::GetFlag(FLAGS_schedule),
          .pp = absl::GetFlag(FLAGS_pp),
          .microbatches = absl::GetFlag(FLAGS_microbatches),
          .stages_per_rank = absl::GetFlag(FLAGS_stages_per_rank)};
}

void PrintScheduleJson(const Schedule& schedule) {
  WriteScheduleJson(schedule, [](absl::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
  });
}

}  // namespace jitpipe::cli
