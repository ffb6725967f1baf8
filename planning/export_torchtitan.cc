#include "planning/export_torchtitan.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/json_document.h"
#include "base/status_macros.h"
#include "scheduler/ir/schedule_csv.h"

namespace jitpipe {
namespace {

constexpr absl::string_view kEmbeddingFqn = "tok_embeddings";
constexpr absl::string_view kNormFqn = "norm";
constexpr absl::string_view kHeadFqn = "lm_head";
constexpr absl::string_view kLayerPrefix = "layers.";

// "interleaved-1f1b (pp 4, v 2, 8 microbatches)" for messages.
std::string Describe(const Schedule& s) {
  return absl::StrCat(s.name.empty() ? "the schedule" : s.name, " (pp ", s.pp, ", v ",
                      s.stages_per_rank, ", ", s.microbatches, " microbatches)");
}

// The schedule name that gives torchtitan this placement, or why none does.
absl::StatusOr<std::string> ScheduleName(const Schedule& s, bool has_cut) {
  const std::string what = Describe(s);
  if (s.chains != 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " runs ", s.chains, " chains (DualPipe's two directions over the same ranks); "
        "torchtitan runs one pipeline per CSV: export dualpipev, its one-chain form"));
  }
  if (s.pp < 2) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": torchtitan turns pipelining off at pipeline_parallel_degree 1"));
  }
  if (s.placement == Placement::kV) {
    if (s.stages_per_rank != 2) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, " places its stages in a V with ", s.stages_per_rank,
          " stages per rank; torchtitan places V only with exactly 2 (ZBVZeroBubble, DualPipeV)"));
    }
    return std::string(absl::EqualsIgnoreCase(s.name, "dualpipev") ? "DualPipeV" : "ZBVZeroBubble");
  }
  if (s.placement != Placement::kLoop) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " places stages [", absl::StrJoin(s.stage_to_rank, ", "),
        "], neither loop nor V; torchtitan takes the placement from the schedule name, which "
        "gives only those two"));
  }
  if (s.stages_per_rank == 1) return std::string("PipelineScheduleSingle");
  if (s.stages_per_rank > 2 && !has_cut) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": without a layer cut torchtitan splits the model into 2 stages per rank; give "
        "the cut (--layout, or --model) so that the FQN list makes ", s.num_stages(), " stages"));
  }
  return std::string("PipelineScheduleMulti");
}

// The program without communication: a lowered program's compute order.
Schedule ComputeOnly(const Schedule& s, int& dropped) {
  Schedule out = s;
  out.lowered = false;
  dropped = 0;
  for (RankProgram& program : out.ranks) {
    RankProgram kept;
    kept.reserve(program.size());
    for (Action& a : program) {
      if (a.is_bubble() || IsCompute(a.kind)) {
        kept.push_back(std::move(a));
      } else {
        ++dropped;
      }
    }
    program = std::move(kept);
  }
  return out;
}

std::string PythonList(const std::vector<std::vector<std::string>>& fqns, absl::string_view indent) {
  std::string out = "[\n";
  for (const std::vector<std::string>& stage : fqns) {
    std::vector<std::string> quoted;
    for (const std::string& name : stage) quoted.push_back(JsonQuote(name));
    absl::StrAppend(&out, indent, "    [", absl::StrJoin(quoted, ", "), "],\n");
  }
  return absl::StrCat(out, indent, "]");
}

std::string TomlFragment(const TorchtitanExport& e, const TorchtitanExportOptions& o,
                         absl::string_view header) {
  std::string out = absl::StrCat(header, "[parallelism]\n");
  absl::StrAppend(&out, "pipeline_parallel_degree = ", e.compute.pp, "\n");
  absl::StrAppend(&out, "pipeline_parallel_schedule = ", JsonQuote(e.schedule_name), "\n");
  absl::StrAppend(&out, "pipeline_parallel_schedule_csv = ", JsonQuote(o.csv_path), "\n");
  absl::StrAppend(&out, "num_pp_microbatches = ", e.compute.microbatches, "\n");
  if (!e.module_fqns.empty()) {
    absl::StrAppend(&out, TorchtitanFqnField(o.fields), " = ", PythonList(e.module_fqns, ""),
                    "\n");
  }
  return out;
}

std::string Recipe(const TorchtitanExport& e, const TorchtitanExportOptions& o,
                   absl::string_view header) {
  std::string out = absl::StrCat(header, "import dataclasses\n\n\n");
  absl::StrAppend(&out,
                  "def apply_jitpipe_pipeline(config):\n"
                  "    \"\"\"Sets the pipeline of a Trainer.Config to the exported schedule.\"\"\"\n"
                  "    p = config.parallelism\n");
  absl::StrAppend(&out, "    p.pipeline_parallel_degree = ", e.compute.pp, "\n");
  absl::StrAppend(&out, "    p.pipeline_parallel_schedule = ", JsonQuote(e.schedule_name), "\n");
  absl::StrAppend(&out, "    p.pipeline_parallel_schedule_csv = ", JsonQuote(o.csv_path), "\n");
  absl::StrAppend(&out, "    p.num_pp_microbatches = ", e.compute.microbatches, "\n");
  if (!e.module_fqns.empty()) {
    absl::StrAppend(
        &out, "    fqns = ", PythonList(e.module_fqns, "    "), "\n",
        "    # The field's name differs between torchtitan versions: set the one this one has.\n",
        "    names = {f.name for f in dataclasses.fields(p)}\n",
        "    if \"", TorchtitanFqnField(TorchtitanFields::kPipelineParallelModuleFqns),
        "\" in names:\n",
        "        p.", TorchtitanFqnField(TorchtitanFields::kPipelineParallelModuleFqns),
        " = fqns\n",
        "        p.pipeline_parallel_layers_per_stage = None\n",
        "    else:\n",
        "        p.", TorchtitanFqnField(TorchtitanFields::kModuleFqns), " = fqns\n");
  }
  return out + "    return config\n";
}

std::vector<std::string> Notes(const TorchtitanExport& e, const Schedule& in) {
  std::vector<std::string> notes;
  if (e.dropped_actions > 0) {
    notes.push_back(absl::StrCat(
        "the input is lowered: its ", e.dropped_actions,
        " communication actions (SEND/RECV, UNSHARD/RESHARD, REDUCE_GRAD, WAIT) are dropped and "
        "the CSV holds its compute order; torchtitan lowers that itself, so jitpipe's receive, "
        "wait and reduction placement is not carried"));
  }
  if (e.module_fqns.empty()) {
    notes.push_back(absl::StrCat(
        "no layer cut known (no layout in the file, no --layout or --model): torchtitan splits "
        "the layers itself (_generate_llm_fqn_per_model_part, ", in.num_stages(),
        " stages, first and last counted 1 layer heavier)"));
  }
  notes.push_back(absl::StrCat("placement comes from pipeline_parallel_schedule = \"",
                               e.schedule_name, "\" (", PlacementName(in.placement),
                               "), not from the CSV"));
  return notes;
}

}  // namespace

absl::string_view TorchtitanFieldsName(TorchtitanFields fields) {
  return fields == TorchtitanFields::kModuleFqns ? "old" : "new";
}

absl::StatusOr<TorchtitanFields> ParseTorchtitanFields(absl::string_view name) {
  if (name == "new") return TorchtitanFields::kPipelineParallelModuleFqns;
  if (name == "old") return TorchtitanFields::kModuleFqns;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown torchtitan field names \"", name,
      "\"; expected new (pipeline_parallel_module_fqns_per_model_part) or old "
      "(module_fqns_per_model_part)"));
}

absl::string_view TorchtitanFqnField(TorchtitanFields fields) {
  return fields == TorchtitanFields::kModuleFqns ? "module_fqns_per_model_part"
                                                 : "pipeline_parallel_module_fqns_per_model_part";
}

absl::StatusOr<TorchtitanExport> ExportTorchtitan(const Schedule& schedule,
                                                  const std::optional<LayerCut>& cut,
                                                  const TorchtitanExportOptions& options) {
  if (cut.has_value() && cut->num_stages() != schedule.stages_per_chain()) {
    return absl::InvalidArgumentError(absl::StrCat("the layer cut has ", cut->num_stages(),
                                                   " stages; ", Describe(schedule), " has ",
                                                   schedule.stages_per_chain()));
  }
  TorchtitanExport e;
  ASSIGN_OR_RETURN(e.schedule_name, ScheduleName(schedule, cut.has_value()));
  e.compute = ComputeOnly(schedule, e.dropped_actions);
  if (cut.has_value()) e.module_fqns = ModuleFqns(*cut);
  e.notes = Notes(e, schedule);
  e.csv = ScheduleToCsv(e.compute);
  const std::string header = absl::StrCat(
      "# jitpipe export --to torchtitan", options.source.empty() ? "" : ": ", options.source, "\n",
      "# ", Describe(schedule), ", placement ", PlacementName(schedule.placement), ".\n",
      "# For torchtitan main 15e24313 (", TorchtitanFqnField(TorchtitanFields::kPipelineParallelModuleFqns),
      ") and b5bcd76 (", TorchtitanFqnField(TorchtitanFields::kModuleFqns), ").\n");
  e.toml = TomlFragment(e, options, header);
  e.recipe = Recipe(e, options, header);
  return e;
}

absl::StatusOr<std::vector<int>> TorchtitanStageToRank(absl::string_view name, int pp,
                                                       int num_stages) {
  if (pp < 1 || num_stages % pp != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "num_stages ", num_stages, " must be evenly divisible by pp_degree ", pp));
  }
  const int per_rank = num_stages / pp;
  const bool v = absl::EqualsIgnoreCase(name, "ZBVZeroBubble") ||
                 absl::EqualsIgnoreCase(name, "DualPipeV");
  if (v && per_rank != 2) {
    return absl::FailedPreconditionError(
        absl::StrCat("v schedules assume 2 stages per rank, got ", per_rank));
  }
  std::vector<int> stage_to_rank(num_stages);
  for (int r = 0; r < pp; ++r) {
    if (v) {
      stage_to_rank[r] = r;
      stage_to_rank[num_stages - 1 - r] = r;
      continue;
    }
    for (int s = 0; s < per_rank; ++s) stage_to_rank[r + s * pp] = r;
  }
  return stage_to_rank;
}

std::vector<std::vector<std::string>> ModuleFqns(const LayerCut& cut) {
  std::vector<std::vector<std::string>> fqns;
  const int last = cut.num_stages() - 1;
  for (int k = 0; k <= last; ++k) {
    const StageLayers& s = cut.stages[k];
    std::vector<std::string> names;
    // torchtitan's models always have both heads; a cut without them (a
    // model file without E or L) still puts them on the end stages.
    if (k == 0) names.emplace_back(kEmbeddingFqn);
    for (int i = 0; i < s.num_layers; ++i) {
      names.push_back(absl::StrCat(kLayerPrefix, s.first_layer + i));
    }
    if (k == last) {
      names.emplace_back(kNormFqn);
      names.emplace_back(kHeadFqn);
    }
    fqns.push_back(std::move(names));
  }
  return fqns;
}

absl::StatusOr<LayerCut> CutFromModuleFqns(const std::vector<std::vector<std::string>>& fqns) {
  LayerCut cut;
  int next = 0;
  for (size_t k = 0; k < fqns.size(); ++k) {
    StageLayers stage{.first_layer = next};
    for (const std::string& name : fqns[k]) {
      int index = -1;
      if (name == kEmbeddingFqn && k == 0) {
        stage.embedding = true;
      } else if ((name == kNormFqn || name == kHeadFqn) && k + 1 == fqns.size()) {
        stage.loss = true;
      } else if (absl::StartsWith(name, kLayerPrefix) &&
                 absl::SimpleAtoi(name.substr(kLayerPrefix.size()), &index) &&
                 index == next) {
        ++stage.num_layers;
        ++next;
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "stage ", k, ": \"", name, "\" is not where a cut puts it (expected layers.", next,
            k == 0 ? ", tok_embeddings" : "", k + 1 == fqns.size() ? ", norm or lm_head" : "",
            ")"));
      }
    }
    cut.stages.push_back(stage);
  }
  return cut;
}

}  // namespace jitpipe
