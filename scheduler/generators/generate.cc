#include "scheduler/generators/generate.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "scheduler/generators/generator_families.h"

namespace jitpipe {

const std::vector<GeneratorInfo>& AllGenerators() {
  static const std::vector<GeneratorInfo>* all = [] {
    auto* v = new std::vector<GeneratorInfo>(PytorchFamily());
    for (GeneratorInfo& g : ZeroBubbleFamily()) v->push_back(std::move(g));
    return v;
  }();
  return *all;
}

absl::StatusOr<const GeneratorInfo*> FindGenerator(absl::string_view name) {
  std::vector<std::string> known;
  for (const GeneratorInfo& g : AllGenerators()) {
    if (absl::EqualsIgnoreCase(g.name, name)) return &g;
    for (const std::string& alias : g.aliases) {
      if (absl::EqualsIgnoreCase(alias, name)) return &g;
    }
    known.push_back(g.name);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown schedule \"", name,
                                                 "\"; known: ", absl::StrJoin(known, ", ")));
}

absl::StatusOr<Schedule> Generate(const GenerateOptions& options) {
  ASSIGN_OR_RETURN(const GeneratorInfo* g, FindGenerator(options.schedule));
  if (options.pp < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(g->name, ": pp must be at least 1, got ", options.pp));
  }
  if (options.microbatches < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(g->name, ": microbatches must be at least 1, got ", options.microbatches));
  }
  const int v = options.stages_per_rank == 0 ? g->default_stages_per_rank
                                             : options.stages_per_rank;
  if (v < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(g->name, ": stages per rank must be at least 1, got ", v));
  }
  if (options.pp > kMaxPipelineRanks) {
    return absl::InvalidArgumentError(absl::StrCat(g->name, ": pp ", options.pp,
                                                   " exceeds the limit of ", kMaxPipelineRanks,
                                                   " pipeline ranks"));
  }
  // Each factor is at most 2^31 - 1 and the limit far less, so checking
  // after each product keeps the arithmetic within int64.
  const int64_t stages = int64_t{options.pp} * v;
  if (stages > kMaxStages) {
    return absl::InvalidArgumentError(absl::StrCat(
        g->name, ": pp ", options.pp, " x stages per rank ", v, " = ", stages,
        " stages exceeds the limit of ", kMaxStages, " stages"));
  }
  if (stages > kMaxGeneratedWork || stages * options.microbatches > kMaxGeneratedWork) {
    return absl::InvalidArgumentError(absl::StrCat(
        g->name, ": pp ", options.pp, " x stages per rank ", v, " x microbatches ",
        options.microbatches, " exceeds the limit of ", kMaxGeneratedWork,
        " stage-microbatch pairs"));
  }
  return g->generate(options.pp, options.microbatches, v);
}

}  // namespace jitpipe
