// Schedule generators: compute-only programs for every built-in schedule.
//
// Names (case-insensitive; PyTorch's class names are aliases):
//   gpipe (GPipe), 1f1b (1F1B), interleaved-1f1b (Interleaved1F1B),
//   looped-bfs (LoopedBFS), interleaved-zb (InterleavedZeroBubble),
//   zbv (ZBVZeroBubble), dualpipev (DualPipeV),
//   zb-h1, zb-h2, v-half, v-min, dualpipe.
//
// A generator emits what PyTorch's schedule class puts in pipeline_order:
// compute actions and timestep-aligned bubbles, no communication. Lowering
// passes (scheduler/passes/) add sends, receives and reductions.
#ifndef JITPIPE_SCHEDULER_GENERATORS_GENERATE_H_
#define JITPIPE_SCHEDULER_GENERATORS_GENERATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

struct GenerateOptions {
  std::string schedule;     // a name or alias, case-insensitive
  int pp = 0;               // pipeline ranks, >= 1
  int microbatches = 0;     // >= 1
  int stages_per_rank = 0;  // 0: the schedule's default
};

// At most this many stage-microbatch pairs (pp x stages_per_rank x
// microbatches; about three actions each): 32x the pp128 v4 m1024 schedule,
// a few GB of programs. Larger requests are refused, not run out of memory.
inline constexpr int64_t kMaxGeneratedWork = int64_t{1} << 24;

// Generates the schedule. Errors: InvalidArgument for an unknown name (listing
// the known ones), pp x stages_per_rank x microbatches over kMaxGeneratedWork,
// or parameters the schedule does not support, stating the
// constraint that failed and what would be valid, e.g.
//   interleaved-1f1b: 9 microbatches is not a multiple of max(1, 9 // 4) = 2; use 8 or 10
absl::StatusOr<Schedule> Generate(const GenerateOptions& options);

// One built-in schedule.
struct GeneratorInfo {
  std::string name;                  // canonical, lower case: "interleaved-1f1b"
  std::vector<std::string> aliases;  // e.g. PyTorch's class name "Interleaved1F1B"
  int default_stages_per_rank = 1;
  std::string summary;               // one line for --help and compare
  // REQUIRES: pp >= 1, microbatches >= 1, stages_per_rank >= 1 (Generate checks).
  absl::StatusOr<Schedule> (*generate)(int pp, int microbatches, int stages_per_rank) = nullptr;
};

// Every built-in schedule, in a stable order (PyTorch's seven first).
const std::vector<GeneratorInfo>& AllGenerators();

// Looks a schedule up by name or alias, ignoring case. Errors: InvalidArgument
// listing the known names.
absl::StatusOr<const GeneratorInfo*> FindGenerator(absl::string_view name);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_GENERATORS_GENERATE_H_
