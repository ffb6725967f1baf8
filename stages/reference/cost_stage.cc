#include "stages/reference/cost_stage.h"

#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace jitpipe {
namespace {

// Part kinds in the order of CostStageFactory::compound_us_.
int KindSlot(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward: return 0;
    case ActionKind::kBackwardInput: return 1;
    case ActionKind::kBackwardWeight: return 2;
    default: return 3;  // kBackward
  }
}

double PartUs(const StageCost& c, ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward: return c.forward_us;
    case ActionKind::kBackwardInput: return c.backward_input_us;
    case ActionKind::kBackwardWeight: return c.backward_weight_us;
    default: return c.backward_us;
  }
}

// A part's time: its share of the compound it runs in, else its own.
double TimeUs(const StageCost& cost, const std::vector<double>& compound_us, int microbatches,
              ActionKind kind, int microbatch) {
  const size_t k = static_cast<size_t>(KindSlot(kind)) * microbatches + microbatch;
  const bool in_compound = k < compound_us.size() && compound_us[k] >= 0;
  return in_compound ? compound_us[k] : PartUs(cost, kind);
}

void SpendUs(double us) {
  if (us <= 0) return;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double, std::micro>(us));
  while (std::chrono::steady_clock::now() < deadline) {
  }
}

// Who wrote a buffer: the producing stage, the microbatch, and 0 for
// forward data, 1 for a gradient.
struct Stamp {
  int32_t stage;
  int32_t microbatch;
  int32_t gradient;
};

void Write(MutableBytes bytes, const Stamp& stamp) {
  if (bytes.size() >= sizeof(Stamp)) std::memcpy(bytes.data(), &stamp, sizeof(Stamp));
}

class CostStage final : public Stage {
 public:
  CostStage(int stage, const StageCost& cost, int64_t grad_bytes, bool first, bool last,
            std::vector<double> compound_us, int microbatches)
      : stage_(stage), cost_(cost), grad_bytes_(grad_bytes), first_(first), last_(last),
        compound_us_(std::move(compound_us)), microbatches_(microbatches) {}

  StageSizes Sizes() const override {
    return {cost_.input_bytes, cost_.output_bytes, cost_.stash_bytes, grad_bytes_,
            cost_.stash_segments};
  }

  absl::Status LoadInput(const ExecutionContext& ctx, int microbatch, MutableBytes input) override {
    RETURN_IF_ERROR(RequireHost(ctx, "the cost stage"));
    Write(input, {stage_ - 1, microbatch, 0});
    return absl::OkStatus();
  }

  absl::Status Forward(const ExecutionContext& ctx, int microbatch, ConstBytes input,
                       MutableBytes output, StashView stash) override {
    RETURN_IF_ERROR(RequireHost(ctx, "the cost stage"));
    RETURN_IF_ERROR(Expect(input, {stage_ - 1, microbatch, 0}, microbatch, "input"));
    Spend(ActionKind::kForward, microbatch);
    Write(output, {stage_, microbatch, 0});
    for (size_t i = 0; i < stash.count(); ++i) Write(stash.segment(i), {stage_, microbatch, 0});
    return absl::OkStatus();
  }

  absl::Status BackwardInput(const ExecutionContext& ctx, int microbatch, ConstBytes output_grad,
                             StashView stash, MutableBytes input_grad) override {
    RETURN_IF_ERROR(RequireHost(ctx, "the cost stage"));
    RETURN_IF_ERROR(ExpectStash(stash, microbatch));
    if (!last_) {
      RETURN_IF_ERROR(Expect(output_grad, {stage_ + 1, microbatch, 1}, microbatch, "output_grad"));
    }
    Spend(ActionKind::kBackwardInput, microbatch);
    if (!first_) Write(input_grad, {stage_, microbatch, 1});
    return absl::OkStatus();
  }

  absl::Status BackwardWeight(const ExecutionContext& ctx, int microbatch, ConstBytes /*input*/,
                              ConstBytes /*output_grad*/, StashView stash,
                              MutableBytes param_grad) override {
    RETURN_IF_ERROR(RequireHost(ctx, "the cost stage"));
    RETURN_IF_ERROR(ExpectStash(stash, microbatch));
    Spend(ActionKind::kBackwardWeight, microbatch);
    Write(param_grad, {stage_, microbatch, 1});
    return absl::OkStatus();
  }

  absl::Status Backward(const ExecutionContext& ctx, int microbatch, ConstBytes /*input*/,
                        ConstBytes output_grad, StashView stash, MutableBytes input_grad,
                        MutableBytes param_grad) override {
    RETURN_IF_ERROR(RequireHost(ctx, "the cost stage"));
    RETURN_IF_ERROR(ExpectStash(stash, microbatch));
    if (!last_) {
      RETURN_IF_ERROR(Expect(output_grad, {stage_ + 1, microbatch, 1}, microbatch, "output_grad"));
    }
    Spend(ActionKind::kBackward, microbatch);
    if (!first_) Write(input_grad, {stage_, microbatch, 1});
    Write(param_grad, {stage_, microbatch, 1});
    return absl::OkStatus();
  }

 private:
  void Spend(ActionKind kind, int microbatch) const {
    SpendUs(TimeUs(cost_, compound_us_, microbatches_, kind, microbatch));
  }

  // Every segment still holds what this stage's F wrote: a plan that let
  // another buffer overwrite one fails here.
  absl::Status ExpectStash(StashView stash, int microbatch) const {
    for (size_t i = 0; i < stash.count(); ++i) {
      RETURN_IF_ERROR(Expect(stash.segment(i), {stage_, microbatch, 0}, microbatch,
                             stash.count() == 1 ? std::string("stash")
                                                : absl::StrCat("stash segment ", i + 1)));
    }
    return absl::OkStatus();
  }

  absl::Status Expect(ConstBytes bytes, const Stamp& want, int microbatch,
                      absl::string_view role) const {
    if (bytes.size() < sizeof(Stamp)) return absl::OkStatus();
    Stamp got;
    std::memcpy(&got, bytes.data(), sizeof(Stamp));
    if (got.stage == want.stage && got.microbatch == want.microbatch &&
        got.gradient == want.gradient) {
      return absl::OkStatus();
    }
    return absl::DataLossError(absl::StrCat(
        "cost stage ", stage_, ": microbatch ", microbatch, "'s ", role, " holds stage ",
        got.stage, " microbatch ", got.microbatch, "'s ", got.gradient ? "gradient" : "forward",
        " data; expected stage ", want.stage, " microbatch ", want.microbatch));
  }

  const int stage_;
  const StageCost cost_;
  const int64_t grad_bytes_;
  const bool first_;
  const bool last_;
  const std::vector<double> compound_us_;
  const int microbatches_;
};

}  // namespace

// Index spaces: rank r, program index i, the parts of a compound.
CostStageFactory::CostStageFactory(const Schedule& schedule, const Model& model)
    : num_stages_(schedule.num_stages()),
      microbatches_(schedule.microbatches_per_chain()),
      stages_per_chain_(schedule.stages_per_chain()) {
  for (int s = 0; s < num_stages_; ++s) {
    costs_.push_back(model.ForStage(s));
    grad_bytes_.push_back(model.GradBytes(s));
  }
  compound_us_.resize(num_stages_);
  for (const RankProgram& program : schedule.ranks) {
    for (const Action& a : program) {
      if (!a.is_compound()) continue;
      double parts = 0;
      for (const Action& p : a.sub_actions) parts += PartUs(costs_[p.stage], p.kind);
      const double total = model.ComputeUs(a);
      if (parts <= 0 || total == parts) continue;
      for (const Action& p : a.sub_actions) {
        std::vector<double>& table = compound_us_[p.stage];
        if (table.empty()) table.assign(4 * static_cast<size_t>(microbatches_), -1.0);
        table[static_cast<size_t>(KindSlot(p.kind)) * microbatches_ + p.microbatch] =
            PartUs(costs_[p.stage], p.kind) * total / parts;
      }
    }
  }
}

absl::StatusOr<std::unique_ptr<Stage>> CostStageFactory::Make(int stage, int /*replica*/) {
  if (stage < 0 || stage >= num_stages_) {
    return absl::InvalidArgumentError(
        absl::StrCat("cost: no stage ", stage, " in a pipeline of ", num_stages_, " stages"));
  }
  return std::unique_ptr<Stage>(new CostStage(
      stage, costs_[stage], grad_bytes_[stage], stage % stages_per_chain_ == 0,
      stage % stages_per_chain_ == stages_per_chain_ - 1, compound_us_[stage], microbatches_));
}

double CostStageFactory::PartTimeUs(int stage, ActionKind kind, int microbatch) const {
  return TimeUs(costs_[stage], compound_us_[stage], microbatches_, kind, microbatch);
}

}  // namespace jitpipe
