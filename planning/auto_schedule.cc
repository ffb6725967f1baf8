#include "planning/auto_schedule.h"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <functional>
#include <limits>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "planning/partition.h"
#include "scheduler/passes/lower.h"
#include "scheduler/passes/place_recvs_ahead.h"
#include "planning/zero_bubble_heuristic.h"
#include "scheduler/generators/generate.h"

namespace jitpipe {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Every placement a built-in is judged under (the last two only when
// transfers take time), in this order.
constexpr RecvPlacement kReceivePlacements[] = {RecvPlacement::kJit, RecvPlacement::kEarly,
                                                RecvPlacement::kOffset};

// One placement with the per-stage cost model cut for it.
struct Context {
  int v = 1;
  Placement placement = Placement::kLoop;
  Model model;
  std::string layout;
  std::vector<int> stage_to_rank;
  StageTimes times;
  std::vector<int64_t> caps;
  double lower_bound = 0;
  int lower_bound_rank = -1;
};

absl::string_view PlacementWords(const Context& c) {
  if (c.v == 1) return "one stage per rank";
  return c.placement == Placement::kV ? "two stages per rank in a V" : "two stages per rank in a loop";
}

std::string Fingerprint(const Schedule& s) {
  std::string out = absl::StrCat(s.stages_per_rank, PlacementName(s.placement), ":");
  for (const RankProgram& program : s.ranks) {
    for (const Action& a : program) absl::StrAppend(&out, a.ToString(), " ");
    out += "|";
  }
  return out;
}

std::string ListDescription(const ListScheduleParams& p) {
  return absl::StrCat(p.split_backward ? "I and W split" : "full B", ", ",
                      p.depth_first ? "depth first" : "breadth first", ", ",
                      p.warmup_limit ? "1F1B's warm-up depth" : "warm-up as deep as memory allows",
                      ", ",
                      p.fill == FillWithW::kGreedy ? "W fills every idle slot"
                                                   : "W only in slots it fits",
                      p.feed_idle_first ? ", feeding the rank that idles first" : "",
                      p.max_in_flight < std::numeric_limits<int>::max()
                          ? absl::StrCat(", at most ", p.max_in_flight, " microbatches in flight")
                          : "");
}

struct Candidate {
  Schedule schedule;
  Evaluation evaluation;
  std::string description;
  const Context* context = nullptr;
};

class Search {
 public:
  Search(const ModelFile& file, const AutoScheduleOptions& options, TrainingMemory training)
      : file_(file), options_(options), training_(std::move(training)),
        start_(absl::Now()) {}

  absl::StatusOr<AutoScheduleResult> Run() {
    if (file_.layered()) {
      // The built-ins' cuts give the list scheduler's placements theirs.
      RETURN_IF_ERROR(BuiltIns());
      RETURN_IF_ERROR(MakeContexts());
      if (contexts_.empty() && builtin_contexts_.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "layout \"", options_.partition.layout, "\" fits none of the placements searched (",
            options_.pp, " ranks x ", absl::StrJoin(options_.stages_per_rank, " or "),
            " stages per rank, or two chains of ", options_.pp, " stages)"));
      }
    } else {
      RETURN_IF_ERROR(MakeContexts());
      RETURN_IF_ERROR(BuiltIns());
    }
    RETURN_IF_ERROR(Heuristic());
    for (const Context& c : contexts_) RETURN_IF_ERROR(ListGrid(c));
    RETURN_IF_ERROR(OtherReceives());
    if (!best_.has_value()) {
      return absl::NotFoundError(absl::StrCat(
          "no schedule fits the memory limit: the lightest candidate needs ",
          lightest_need_, " bytes on its heaviest rank, ", lightest_limit_, " allowed"));
    }
    return Result();
  }

 private:
  // The fastest built-in of one placement: its cut is that placement's for
  // the list scheduler and the heuristic.
  struct BuiltInCut {
    bool fits = false;
    double makespan_us = kInf;
    const Context* context = nullptr;
  };
  // The budget ends the search once some schedule fits.
  bool OutOfTime() {
    if (!best_.has_value() || absl::Now() - start_ < options_.time_budget) return false;
    exhausted_ = true;
    return true;
  }

  absl::Status MakeContexts() {
    const int p = options_.pp;
    for (int v : options_.stages_per_rank) {
      const std::vector<Placement> placements =
          v == 1 ? std::vector<Placement>{Placement::kLoop}
                 : std::vector<Placement>{Placement::kV, Placement::kLoop};
      for (Placement placement : placements) {
        std::vector<std::pair<Model, std::string>> cuts;  // the cost model and its layout
        if (file_.layered()) {
          ASSIGN_OR_RETURN(cuts, CutsFor(v, placement));
        } else {
          RETURN_IF_ERROR(CheckModelFits(file_.stages, p * v));
          cuts.emplace_back(file_.stages, "");
        }
        for (auto& [model, layout] : cuts) {
          Context c;
          c.v = v;
          c.placement = placement;
          c.model = std::move(model);
          c.layout = std::move(layout);
          c.stage_to_rank = StageToRank(placement, p, v);
          c.times = StageTimesOf(c.model, c.stage_to_rank);
          c.caps = ActivationCaps(c.model, training_, c.stage_to_rank, p);
          c.lower_bound = PipelineLowerBound(c.times, c.stage_to_rank, p, options_.microbatches,
                                             &c.lower_bound_rank);
          contexts_.push_back(std::move(c));
        }
      }
    }
    return absl::OkStatus();
  }

  // The cuts one placement's list and heuristic candidates run on: a given
  // layout (none when its stage count differs); for balanced, the even cut
  // and, when it differs, the cut of the placement's fastest built-in (a
  // cut balanced for one order is not always the better for another); the
  // even cut otherwise.
  absl::StatusOr<std::vector<std::pair<Model, std::string>>> CutsFor(int v, Placement placement) {
    std::vector<std::pair<Model, std::string>> cuts;
    const int stages = options_.pp * v;
    const PartitionChoice& choice = options_.partition;
    if (!choice.layout.empty()) {
      absl::StatusOr<Partition> cut = ParseLayout(choice.layout, file_.layers, stages);
      if (!cut.ok()) return cuts;  // another stage count than the layout's
      ASSIGN_OR_RETURN(Model model, StageModel(file_.layers, *cut));
      cuts.emplace_back(std::move(model), cut->ToLayout(file_.layers));
      return cuts;
    }
    ASSIGN_OR_RETURN(Partition even, EvenPartition(file_.layers, stages));
    ASSIGN_OR_RETURN(Model even_model, StageModel(file_.layers, even));
    cuts.emplace_back(std::move(even_model), even.ToLayout(file_.layers));
    if (choice.method != PartitionMethod::kBalanced) return cuts;
    auto it = builtin_cuts_.find({v, placement});
    if (it != builtin_cuts_.end() && it->second.context->layout != cuts.front().second) {
      cuts.emplace_back(it->second.context->model, it->second.context->layout);
    }
    return cuts;
  }

  // Judges `s` under `c` unless the same programs were judged before; keeps
  // it when it fits and is the fastest so far. Returns its evaluation (or
  // nullopt when skipped or out of time).
  absl::StatusOr<std::optional<Evaluation>> Judge(Schedule s, const Context& c,
                                                  RecvPlacement recv, std::string description,
                                                  bool simulate_if_over) {
    if (OutOfTime()) return std::nullopt;
    if (!seen_.insert(absl::StrCat(RecvPlacementName(recv), c.layout, "#", Fingerprint(s)))
             .second) {
      return std::nullopt;
    }
    absl::StatusOr<Evaluation> e =
        EvaluateSchedule(s, c.model, training_, recv, simulate_if_over);
    if (!e.ok()) {
      // A lowering that refuses the order (early receives can) rules it out.
      if (e.status().code() == absl::StatusCode::kInvalidArgument) return std::nullopt;
      return e.status();
    }
    ++judged_;
    unconstrained_ = std::min(unconstrained_, e->makespan_us);
    const RankMemory& heaviest = e->memory.Heaviest();
    if (!e->fits && (lightest_need_ < 0 || heaviest.total() < lightest_need_)) {
      lightest_need_ = heaviest.total();
      lightest_limit_ = heaviest.limit;
    }
    if (e->fits) {
      fitting_.push_back(Candidate{s, *e, description, &c});
      if (!best_.has_value() || e->makespan_us < best_->evaluation.makespan_us) {
        best_ = Candidate{std::move(s), *e, std::move(description), &c};
      }
    }
    return e;
  }

  absl::Status BuiltIns() {
    const Context* v1 = ContextFor(1, Placement::kLoop);
    for (const GeneratorInfo& g : AllGenerators()) {
      for (int v : options_.stages_per_rank) {
        absl::StatusOr<Schedule> s = Generate(
            {.schedule = g.name, .pp = options_.pp, .microbatches = options_.microbatches,
             .stages_per_rank = v});
        if (!s.ok()) continue;
        Context own;
        const Context* c = v1;
        if (file_.layered()) {
          if (OutOfTime()) return absl::OkStatus();
          PartitionChoice choice = options_.partition;
          choice.use_recorded_layout = false;
          // Half the budget at most for the cuts: the search needs the rest.
          choice.time_budget = std::max(absl::ZeroDuration(),
                                        options_.time_budget / 2 - (absl::Now() - start_));
          absl::StatusOr<StagedModel> staged = ModelForSchedule(file_, *s, choice);
          if (!staged.ok() && !choice.layout.empty() &&
              staged.status().code() == absl::StatusCode::kInvalidArgument) {
            continue;  // the layout has another stage count
          }
          if (!staged.ok()) return staged.status();
          own.model = std::move(staged->model);
          own.layout = std::move(staged->layout);
          own.v = v;
          own.placement = s->placement;
          own.stage_to_rank = s->stage_to_rank;
          own.times = StageTimesOf(own.model, s->stage_to_rank);
          if (s->chains == 1) {
            own.lower_bound = PipelineLowerBound(own.times, own.stage_to_rank, options_.pp,
                                                 options_.microbatches, &own.lower_bound_rank);
          }
          c = &builtin_contexts_.emplace_back(std::move(own));
        } else if (s->num_stages() != options_.pp || s->chains != 1) {
          continue;  // per-stage costs give one stage per rank only
        }
        const std::string name = absl::StrCat("built-in ", g.name, " (v ", v, ")");
        std::optional<Evaluation> e;
        double any_us = kInf;  // fitting or not
        for (RecvPlacement recv : kReceivePlacements) {
          if (recv != RecvPlacement::kJit && !TransfersCost(*c)) break;
          ASSIGN_OR_RETURN(std::optional<Evaluation> judged,
                           Judge(*s, *c, recv, name, /*simulate_if_over=*/true));
          if (judged.has_value()) any_us = std::min(any_us, judged->makespan_us);
          if (judged.has_value() && judged->fits &&
              (!e.has_value() || judged->makespan_us < e->makespan_us)) {
            e = judged;
          }
        }
        if (e.has_value() && e->fits &&
            (best_builtin_.empty() || e->makespan_us < best_builtin_us_)) {
          best_builtin_ = name;
          best_builtin_us_ = e->makespan_us;
        }
        if (s->chains == 1 && file_.layered()) {
          const bool fits = e.has_value() && e->fits;
          NoteCut(*c, v, s->placement, fits, fits ? e->makespan_us : any_us);
        }
      }
    }
    return absl::OkStatus();
  }

  // Keeps the fastest built-in's cut per placement, those that fit first
  // (`fits`: the built-in fits in `makespan_us`, its best judged step).
  void NoteCut(const Context& c, int v, Placement placement, bool fits, double makespan_us) {
    const BuiltInCut candidate{.fits = fits, .makespan_us = makespan_us, .context = &c};
    auto [it, inserted] = builtin_cuts_.try_emplace({v, placement}, candidate);
    if (!inserted && std::make_pair(!fits, makespan_us) <
                         std::make_pair(!it->second.fits, it->second.makespan_us)) {
      it->second = candidate;
    }
  }

  // On every cut of one stage per rank; the best is reported.
  absl::Status Heuristic() {
    for (const Context& c : contexts_) {
      if (c.v != 1 || c.placement != Placement::kLoop) continue;
      if (OutOfTime()) return absl::OkStatus();
      absl::StatusOr<HeuristicResult> h =
          ZeroBubbleHeuristic(c.model, training_, options_.pp, options_.microbatches);
      if (!h.ok()) {
        if (h.status().code() == absl::StatusCode::kNotFound) continue;
        return h.status();
      }
      heuristic_us_ = std::min(heuristic_us_.value_or(kInf), h->evaluation.makespan_us);
      h->schedule.name = "auto";
      ASSIGN_OR_RETURN(std::optional<Evaluation> e,
                       JudgeEveryReceivePlacement(
                           std::move(h->schedule), c,
                           absl::StrCat("the zero-bubble heuristic (", h->flags, ")"), false));
      (void)e;
    }
    return absl::OkStatus();
  }

  // The list scheduler's grid for one placement: I/W split or full B,
  // depth- or breadth-first, W in every idle slot or only where it fits,
  // and the warm-up depth: microbatches in flight per rank capped at v x
  // {p/2, p, 3p/2, 2p} or only by memory (then also 1F1B's warm-up depth,
  // and F before B).
  absl::Status ListGrid(const Context& c) {
    // Without a cap first: the reference for what memory costs (and a
    // candidate when it happens to fit).
    ASSIGN_OR_RETURN(std::optional<Evaluation> unused, BuildAndJudge(c, Base(c), false, 0));
    (void)unused;
    const int p = options_.pp;
    const std::vector<int> depths = {std::numeric_limits<int>::max(), c.v * ((p + 1) / 2),
                                     c.v * p, c.v * ((3 * p + 1) / 2), c.v * 2 * p};
    for (int depth : depths) {
      for (bool split : {true, false}) {
        for (bool depth_first : {true, false}) {
          for (FillWithW fill : {FillWithW::kGreedy, FillWithW::kWhenItFits}) {
            if (!split && fill != FillWithW::kGreedy) continue;  // no W to place
            ListScheduleParams params = Base(c);
            params.split_backward = split;
            params.depth_first = depth_first;
            params.fill = fill;
            params.max_in_flight = depth;
            params.cap_bytes = c.caps;
            ASSIGN_OR_RETURN(std::optional<Evaluation> e, BuildAndJudge(c, params, true, 3));
            (void)e;
            params.feed_idle_first = true;
            ASSIGN_OR_RETURN(e, BuildAndJudge(c, params, true, 3));
            if (c.v > 1) {  // the same without room kept for the later stage
              params.reserve_for_later_stages = false;
              ASSIGN_OR_RETURN(e, BuildAndJudge(c, params, true, 3));
              params.reserve_for_later_stages = true;
            }
            params.feed_idle_first = false;
            if (depth != std::numeric_limits<int>::max()) continue;
            params.warmup_limit = true;
            ASSIGN_OR_RETURN(e, BuildAndJudge(c, params, true, 3));
            params.warmup_limit = false;
            params.prefer_backward = false;
            ASSIGN_OR_RETURN(e, BuildAndJudge(c, params, true, 3));
          }
        }
      }
    }
    return absl::OkStatus();
  }

  ListScheduleParams Base(const Context& c) const {
    ListScheduleParams p;
    p.pp = options_.pp;
    p.microbatches = options_.microbatches;
    p.stages_per_rank = c.v;
    p.placement = c.placement;
    return p;
  }

  // Judges with receives just in time and, when transfers take time (where
  // to post a receive then decides whether its latency is hidden), early
  // and k computes ahead per receive. Returns the just-in-time evaluation.
  absl::StatusOr<std::optional<Evaluation>> JudgeEveryReceivePlacement(
      Schedule s, const Context& c, const std::string& description, bool simulate_if_over) {
    if (TransfersCost(c)) {
      for (RecvPlacement recv : {RecvPlacement::kEarly, RecvPlacement::kOffset}) {
        ASSIGN_OR_RETURN(std::optional<Evaluation> e,
                         Judge(s, c, recv, description, simulate_if_over));
        (void)e;
      }
    }
    return Judge(std::move(s), c, RecvPlacement::kJit, description, simulate_if_over);
  }

  static bool TransfersCost(const Context& c) {
    for (size_t s = 0; s < c.times.send_forward_us.size(); ++s) {
      if (c.times.send_forward_us[s] > 0 || c.times.send_backward_us[s] > 0) return true;
    }
    return false;
  }

  // Builds under p's caps, lowering a missing rank's cap by one of its
  // stages' activations up to `retries` times.
  absl::StatusOr<std::optional<Evaluation>> BuildAndJudge(const Context& c, ListScheduleParams p,
                                                          bool capped, int retries) {
    std::optional<Evaluation> last;
    for (int attempt = 0; attempt <= retries; ++attempt) {
      // Building is most of a list candidate's cost: check the budget first.
      if (OutOfTime()) return last;
      absl::StatusOr<Schedule> s = BuildListSchedule(p, c.times);
      if (!s.ok()) return last;  // the cap leaves no way forward
      const std::string description =
          absl::StrCat("list schedule, ", PlacementWords(c), ", ", ListDescription(p),
                       capped ? "" : ", no memory cap");
      ASSIGN_OR_RETURN(last, JudgeEveryReceivePlacement(*std::move(s), c, description, !capped));
      if (!last.has_value() || last->fits || !capped) return last;
      for (int r = 0; r < options_.pp; ++r) {
        if (last->memory.ranks[r].fits()) continue;
        int64_t largest = 0;
        for (size_t s2 = 0; s2 < c.stage_to_rank.size(); ++s2) {
          if (c.stage_to_rank[s2] == r) largest = std::max(largest, c.times.activation_bytes[s2]);
        }
        p.cap_bytes[r] -= std::max<int64_t>(largest, 1);
      }
    }
    return last;
  }

  // The three fastest that fit, lowered with receives posted early and k
  // computes ahead per receive.
  absl::Status OtherReceives() {
    std::stable_sort(fitting_.begin(), fitting_.end(), [](const Candidate& a, const Candidate& b) {
      return a.evaluation.makespan_us < b.evaluation.makespan_us;
    });
    std::vector<Candidate> top(fitting_.begin(),
                               fitting_.begin() + std::min<size_t>(3, fitting_.size()));
    for (Candidate& c : top) {
      for (RecvPlacement recv : {RecvPlacement::kEarly, RecvPlacement::kOffset}) {
        ASSIGN_OR_RETURN(std::optional<Evaluation> e,
                         Judge(c.schedule, *c.context, recv, c.description, false));
        (void)e;
      }
    }
    return absl::OkStatus();
  }

  const Context* ContextFor(int v, Placement placement) const {
    for (const Context& c : contexts_) {
      if (c.v == v && c.placement == placement) return &c;
    }
    return nullptr;
  }

  absl::StatusOr<AutoScheduleResult> Result() {
    AutoScheduleResult out;
    out.compute_only = std::move(best_->schedule);
    out.compute_only.name = "auto";
    out.evaluation = std::move(best_->evaluation);
    out.description = std::move(best_->description);
    const Context& c = *best_->context;
    out.layout = c.layout;
    if (file_.layered()) {
      out.cut_method = !options_.partition.layout.empty() ? "layout"
                       : std::string(PartitionMethodName(options_.partition.method));
    }
    // What was judged, as EvaluateSchedule lowered it.
    ASSIGN_OR_RETURN(out.schedule,
                     Lower(out.compute_only,
                           EvaluationLowering(c.model, training_, out.evaluation.recv)));
    ASSIGN_OR_RETURN(const RecvOffsets leads, RecvLeads(out.schedule));
    out.recv_leads = leads.Histogram();
    out.schedule.layout = out.layout;
    out.schedule.model_fingerprint = file_.fingerprint;
    // Two chains (DualPipe) fit no one-chain bound: the busiest rank's busy
    // time is one.
    if (out.compute_only.chains == 1) {
      out.lower_bound_us = c.lower_bound;
      out.lower_bound_rank = c.lower_bound_rank;
    } else {
      for (const RankSimulation& r : out.evaluation.simulation.ranks) {
        if (r.busy_us > out.lower_bound_us) {
          out.lower_bound_us = r.busy_us;
          out.lower_bound_rank = r.rank;
        }
      }
    }
    out.best_lower_bound_us = kInf;
    for (const Context& ctx : contexts_) {
      out.best_lower_bound_us = std::min(out.best_lower_bound_us, ctx.lower_bound);
    }
    for (const Context& ctx : builtin_contexts_) {
      if (ctx.lower_bound > 0) {
        out.best_lower_bound_us = std::min(out.best_lower_bound_us, ctx.lower_bound);
      }
    }
    // The chosen placement's own bound too (DualPipe's is not a one-chain
    // placement's).
    out.best_lower_bound_us = std::min(out.best_lower_bound_us, out.lower_bound_us);
    out.best_builtin = best_builtin_;
    out.best_builtin_us = best_builtin_us_;
    out.heuristic_us = heuristic_us_;
    out.unconstrained_us = unconstrained_;
    out.judged = judged_;
    out.budget_exhausted = exhausted_;
    out.elapsed = absl::Now() - start_;
    return out;
  }

  const ModelFile& file_;
  const AutoScheduleOptions& options_;
  const TrainingMemory training_;
  const absl::Time start_;
  std::vector<Context> contexts_;
  std::deque<Context> builtin_contexts_;  // stable addresses
  std::map<std::pair<int, Placement>, BuiltInCut> builtin_cuts_;
  absl::flat_hash_set<std::string> seen_;
  std::vector<Candidate> fitting_;
  std::optional<Candidate> best_;
  std::string best_builtin_;
  double best_builtin_us_ = 0;
  std::optional<double> heuristic_us_;
  double unconstrained_ = kInf;
  int64_t lightest_need_ = -1;
  int64_t lightest_limit_ = 0;
  int judged_ = 0;
  bool exhausted_ = false;
};

}  // namespace

absl::StatusOr<AutoScheduleResult> AutoSchedule(const ModelFile& model,
                                                const AutoScheduleOptions& options) {
  if (options.pp < 1 || options.microbatches < 1) {
    return absl::InvalidArgumentError(absl::StrCat("pp and microbatches must be >= 1, got ",
                                                   options.pp, " and ", options.microbatches));
  }
  std::vector<int> vs = options.stages_per_rank;
  for (int v : vs) {
    if (v != 1 && v != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("the auto scheduler places 1 or 2 stages per rank, not ", v));
    }
  }
  TrainingMemory training;
  if (model.layered()) training = TrainingMemoryOf(model.layers);
  if (options.memory_limit.has_value()) {
    if (*options.memory_limit <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the memory limit must be > 0 bytes, got ", *options.memory_limit));
    }
    training.device = DeviceSpec{.memory_bytes = *options.memory_limit};
  }
  training.device.reserve = options.reserve;
  bool limited = false;
  for (int r = 0; r < options.pp; ++r) limited = limited || training.device.LimitFor(r) > 0;
  if (!limited) {
    return absl::InvalidArgumentError(
        "the auto scheduler needs a memory limit: give one, or a model with device memory");
  }
  AutoScheduleOptions effective = options;
  if (!model.layered()) {
    if (!options.partition.layout.empty()) {
      return absl::InvalidArgumentError(
          "a layout needs a version 2 model (layers); this one gives per-stage costs");
    }
    effective.stages_per_rank = {1};  // per-stage costs: p stages, as given
  }
  Search search(model, effective, std::move(training));
  return search.Run();
}

}  // namespace jitpipe
