#include "scheduler/passes/pass_pipeline.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace jitpipe {
namespace {

// `status` with `prefix` before its message and its payloads (such as the
// validator's grid) kept.
absl::Status Prefixed(const absl::Status& status, absl::StatusCode code,
                      absl::string_view prefix) {
  absl::Status out(code, absl::StrCat(prefix, status.message()));
  status.ForEachPayload([&](absl::string_view type_url, const absl::Cord& payload) {
    out.SetPayload(type_url, payload);
  });
  return out;
}

}  // namespace

PassPipeline& PassPipeline::AddPass(std::string name, PassFunction pass) {
  passes_.push_back(Pass{std::move(name), std::move(pass), nullptr});
  return *this;
}

PassPipeline& PassPipeline::AddInPlacePass(std::string name, InPlacePassFunction pass) {
  passes_.push_back(Pass{std::move(name), nullptr, std::move(pass)});
  return *this;
}

std::vector<std::string> PassPipeline::PassNames() const {
  std::vector<std::string> names;
  names.reserve(passes_.size());
  for (const Pass& pass : passes_) names.push_back(pass.name);
  return names;
}

absl::StatusOr<PipelineResult> PassPipeline::Run(const Schedule& input,
                                                 const PipelineRunOptions& options) const {
  return RunOn(input, nullptr, options);
}

absl::StatusOr<PipelineResult> PassPipeline::Run(Schedule&& input,
                                                 const PipelineRunOptions& options) const {
  return RunOn(input, &input, options);
}

absl::StatusOr<PipelineResult> PassPipeline::RunOn(const Schedule& input, Schedule* owned,
                                                   const PipelineRunOptions& options) const {
  if (!options.dump_after.empty()) {
    const std::vector<std::string> names = PassNames();
    if (std::find(names.begin(), names.end(), options.dump_after) == names.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "no pass named \"", options.dump_after, "\" in the ", name_, " pipeline; its passes are: ",
          names.empty() ? "(none)" : absl::StrJoin(names, ", ")));
    }
  }
  PipelineResult result;
  const Schedule* current = &input;  // the first pass reads the input in place
  for (const Pass& pass : passes_) {
    absl::StatusOr<Schedule> out =
        pass.run                ? pass.run(*current)
        : current != &input     ? pass.consume(std::move(result.schedule))
        : owned != nullptr      ? pass.consume(std::move(*owned))
                                : pass.consume(input);  // a copy: the input stays as it was
    if (!out.ok()) {
      return Prefixed(out.status(), out.status().code(), absl::StrCat("pass ", pass.name, ": "));
    }
    if (current == &input && owned != nullptr) *owned = Schedule();  // read: released
    result.schedule = *std::move(out);
    current = &result.schedule;
    if (options.check_invariants && checker_) {
      if (absl::Status valid = checker_(result.schedule); !valid.ok()) {
        return Prefixed(valid, absl::StatusCode::kInternal,
                        absl::StrCat("invariant violated after pass ", pass.name, ": "));
      }
    }
    if (pass.name == options.dump_after) result.dumped = result.schedule;
  }
  if (passes_.empty()) result.schedule = owned != nullptr ? std::move(*owned) : input;
  return result;
}

}  // namespace jitpipe
