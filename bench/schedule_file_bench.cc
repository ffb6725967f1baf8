// Reading and writing schedule files (issue 19, item 3): the JSON reader
// (ParseScheduleJson) and writer (ScheduleToJson) over a large lowered
// program, in bytes of JSON per second.
//
// The size is the one the issue measured through the CLI: interleaved-1f1b
// pp64 v4 m512 lowered (`jitpipe generate ... | jitpipe lower`, about 10 MB
// of JSON). The target is 200 MB/s each way, so target_ms is the file's size
// at that rate; the bytes/s column is the figure to read.
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "bench/bench_support.h"
#include "benchmark/benchmark.h"
#include "scheduler/ir/schedule_json.h"

namespace jitpipe::bench {
namespace {

constexpr Size kFile = {"interleaved-1f1b", 64, 4, 512};
constexpr double kTargetBytesPerSecond = 200e6;

double TargetMs(size_t bytes) { return static_cast<double>(bytes) / kTargetBytesPerSecond * 1e3; }

void BM_WriteJson(benchmark::State& state, Size size) {
  const Schedule& schedule = Lowered(size);
  size_t bytes = 0;
  for (auto _ : state) {
    std::string text = ScheduleToJson(schedule);
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  Report(state, size.Label(), size.Items(), static_cast<int64_t>(schedule.TotalActions()),
         TargetMs(bytes));
}

void BM_ReadJson(benchmark::State& state, Size size) {
  const Schedule& schedule = Lowered(size);
  const std::string text = ScheduleToJson(schedule);
  for (auto _ : state) {
    absl::StatusOr<Schedule> read = ParseScheduleJson(text);
    if (!CheckOk(state, read.status())) break;
    benchmark::DoNotOptimize(read->ranks.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  Report(state, size.Label(), size.Items(), static_cast<int64_t>(schedule.TotalActions()),
         TargetMs(text.size()));
}

BENCHMARK_CAPTURE(BM_WriteJson, lowered_pp64, kFile)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ReadJson, lowered_pp64, kFile)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace jitpipe::bench
