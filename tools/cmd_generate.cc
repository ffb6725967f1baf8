// jitpipe generate --schedule NAME --pp P --microbatches M [--stages-per-rank V] [-o FILE]:
// a built-in schedule's compute-only program.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "scheduler/generators/generate.h"
#include "scheduler/ir/schedule_io.h"
#include "scheduler/ir/schedule_json.h"
#include "tools/commands.h"
#include "tools/common_flags.h"

ABSL_FLAG(std::string, schedule, "",
          "schedule name, case-insensitive; PyTorch's class names are aliases");
ABSL_FLAG(int, pp, 0, "pipeline ranks (p)");
ABSL_FLAG(int, microbatches, 0, "microbatches per step (m)");
ABSL_FLAG(int, stages_per_rank, 0, "stages per rank (v); 0 takes the schedule's default");

namespace jitpipe::cli {
namespace {

int RunGenerate(const Command& command, const Invocation& invocation) {
  for (absl::string_view flag : {"schedule", "pp", "microbatches"}) {
    if (!invocation.IsSet(flag)) {
      return UsageError(command, absl::StrCat("missing --", flag, "; usage: jitpipe ",
                                              command.synopsis));
    }
  }
  // An unknown name is a usage error; parameters a schedule cannot run with
  // are invalid input (exit 1, the generator's message).
  const std::string name = absl::GetFlag(FLAGS_schedule);
  if (absl::StatusOr<const GeneratorInfo*> g = FindGenerator(name); !g.ok()) {
    return UsageError(command, g.status().message());
  }
  const std::string out = absl::GetFlag(FLAGS_output);
  if (!out.empty()) {
    if (auto format = FormatForOutput(out); !format.ok()) {
      return UsageError(command, format.status().message());
    }
  }
  absl::StatusOr<Schedule> schedule =
      Generate({.schedule = name,
                .pp = absl::GetFlag(FLAGS_pp),
                .microbatches = absl::GetFlag(FLAGS_microbatches),
                .stages_per_rank = absl::GetFlag(FLAGS_stages_per_rank)});
  if (!schedule.ok()) return Fail(command, schedule.status());
  if (out.empty()) {
    std::fputs(ScheduleToJson(*schedule).c_str(), stdout);
    return kExitOk;
  }
  if (absl::Status saved = SaveSchedule(out, *schedule); !saved.ok()) {
    return Fail(command, saved);
  }
  return kExitOk;
}

// The help paragraph, listing every registered schedule.
absl::string_view Summary() {
  static const std::string* summary = [] {
    auto* text = new std::string(
        "Generate a built-in schedule's compute-only program. Each rank's forwards and "
        "backwards, with the bubbles PyTorch emits, go to -o FILE as jitpipe JSON or PyTorch "
        "CSV (by extension), or as JSON to stdout. Parameters a schedule cannot run with exit "
        "1, stating the constraint and valid alternatives.\n\nschedules:\n");
    for (const GeneratorInfo& g : AllGenerators()) {
      const std::string label =
          g.aliases.empty() ? g.name
                            : absl::StrCat(g.name, " (", absl::StrJoin(g.aliases, ", "), ")");
      absl::StrAppendFormat(text, "  %-40s v = %d by default; %s\n", label,
                            g.default_stages_per_rank, g.summary);
    }
    text->pop_back();  // CommandHelp ends the paragraph itself
    return text;
  }();
  return *summary;
}

}  // namespace

Command GenerateCommand() {
  return Command{
      .name = "generate",
      .synopsis = "generate --schedule NAME --pp P --microbatches M [--stages-per-rank V] "
                  "[-o FILE]",
      .summary = Summary(),
      .flags = {"schedule", "pp", "microbatches", "stages_per_rank", "output"},
      .min_positional = 0,
      .max_positional = 0,
      .run = RunGenerate,
  };
}

}  // namespace jitpipe::cli
