#include "planning/export_megatron.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace jitpipe {
namespace {

std::string DescribeForMegatron(const Schedule& s) {
  return absl::StrCat(s.name.empty() ? "the schedule" : s.name, " (pp ", s.pp, ", v ",
                      s.stages_per_rank, ", ", s.microbatches, " microbatches)");
}

absl::Status CheckRunnable(const Schedule& s) {
  const std::string what = DescribeForMegatron(s);
  if (s.chains != 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " runs ", s.chains, " chains (DualPipe's two directions over the same ranks); "
        "Megatron runs one pipeline"));
  }
  if (s.placement == Placement::kV) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " places its stages in a V (rank r holds r and 2p-1-r); Megatron places stage "
        "vpp*p + rank only (loop order): export a loop-placed schedule such as interleaved-1f1b"));
  }
  if (s.placement != Placement::kLoop) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " places stages [", absl::StrJoin(s.stage_to_rank, ", "),
        "], not in loop order; Megatron places stage vpp*p + rank only"));
  }
  if (s.stages_per_rank > 1 && s.pp > 1 &&
      (s.microbatches < s.pp || s.microbatches % s.pp != 0)) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": Megatron's interleaved schedule needs the microbatches to be a multiple of "
        "pp (its default microbatch group per virtual stage is pp); ", s.microbatches, " is not"));
  }
  return absl::OkStatus();
}

bool SplitsBackward(const Schedule& s) {
  for (const RankProgram& program : s.ranks) {
    for (const Action& a : program) {
      if (a.kind == ActionKind::kBackwardWeight) return true;
    }
  }
  return false;
}

void NameClosest(const Schedule& s, MegatronExport& e) {
  if (s.pp == 1) {
    e.closest_schedule = "no pipelining";
    e.megatron_function = "forward_backward_no_pipelining";
  } else if (s.stages_per_rank == 1) {
    e.closest_schedule = "1F1B";
    e.megatron_function = "forward_backward_pipelining_without_interleaving";
  } else {
    e.closest_schedule = "interleaved 1F1B";
    e.megatron_function = "forward_backward_pipelining_with_interleaving";
  }
}

std::vector<std::string> Notes(const Schedule& s, const MegatronExport& e, bool has_cut) {
  std::vector<std::string> notes;
  notes.push_back(absl::StrCat(
      "the order is not carried: Megatron takes no custom schedule and runs its own ",
      e.closest_schedule, " (", e.megatron_function, ") over this cut"));
  if (SplitsBackward(s)) {
    notes.push_back("the program splits backward into I and W; Megatron runs each backward whole");
  }
  if (s.lowered) {
    notes.push_back("the input is lowered; its sends, receives and reductions are Megatron's own");
  }
  if (has_cut && s.stages_per_rank > 1) {
    notes.push_back(absl::StrCat("the virtual stages per rank (", s.stages_per_rank,
                                 ") come from the layout's ", s.num_stages(),
                                 " stages; Megatron refuses "
                                 "--num-virtual-stages-per-pipeline-rank beside a layout"));
  } else if (!has_cut) {
    notes.push_back(absl::StrCat(
        "no layer cut known (no layout in the file, no --layout or --model): Megatron cuts "
        "--num-layers evenly into ", s.num_stages(), " stages (it must divide)"));
  }
  notes.push_back(absl::StrCat("microbatches: Megatron derives them from the batch sizes; ", s.microbatches,
                               " needs --global-batch-size = ", s.microbatches,
                               " x --micro-batch-size x the data-parallel size"));
  return notes;
}

}  // namespace

std::string MegatronLayout(const LayerCut& cut) {
  LayerCut full = cut;
  full.stages.front().embedding = true;
  full.stages.back().loss = true;
  return full.ToLayout();
}

absl::StatusOr<MegatronExport> ExportMegatron(const Schedule& schedule,
                                              const std::optional<LayerCut>& cut,
                                              const std::string& source) {
  if (cut.has_value() && cut->num_stages() != schedule.stages_per_chain()) {
    return absl::InvalidArgumentError(absl::StrCat("the layer cut has ", cut->num_stages(),
                                                   " stages; ", DescribeForMegatron(schedule), " has ",
                                                   schedule.stages_per_chain()));
  }
  RETURN_IF_ERROR(CheckRunnable(schedule));
  MegatronExport e;
  e.virtual_stages = schedule.stages_per_rank;
  NameClosest(schedule, e);
  e.args = {"--pipeline-model-parallel-size", absl::StrCat(schedule.pp)};
  if (cut.has_value()) {
    e.layout = MegatronLayout(*cut);
    e.args.insert(e.args.end(), {"--num-layers", absl::StrCat(cut->NumLayers()),
                                 "--pipeline-model-parallel-layout", e.layout});
  } else if (schedule.stages_per_rank > 1) {
    e.args.insert(e.args.end(), {"--num-virtual-stages-per-pipeline-rank",
                                 absl::StrCat(schedule.stages_per_rank)});
  }
  e.notes = Notes(schedule, e, cut.has_value());
  e.text = absl::StrCat("# jitpipe export --to megatron", source.empty() ? "" : ": ", source,
                        "\n# ", DescribeForMegatron(schedule), "; for Megatron-LM main d98e8a64.\n",
                        "# Closest built-in schedule: ", e.closest_schedule, " (",
                        e.megatron_function, ").\n");
  for (const std::string& note : e.notes) absl::StrAppend(&e.text, "# note: ", note, "\n");
  // A bash array, as Megatron's example scripts give their arguments:
  //   torchrun ... pretrain_gpt.py "${MEGATRON_PIPELINE_ARGS[@]}" ...
  e.text += "MEGATRON_PIPELINE_ARGS=(\n";
  for (size_t i = 0; i < e.args.size(); i += 2) {
    // The layout holds "|", "(" and "*": quoted for the shell.
    const bool quote = e.args[i] == "--pipeline-model-parallel-layout";
    absl::StrAppend(&e.text, "  ", e.args[i], " ", quote ? "'" : "", e.args[i + 1],
                    quote ? "'" : "", "\n");
  }
  e.text += ")\n";
  return e;
}

}  // namespace jitpipe
