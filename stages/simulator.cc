#include "stages/simulator.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace jitpipe {
namespace {

constexpr double kUnknown = -1;

struct TransferState {
  double send_post = kUnknown;
  double recv_post = kUnknown;
  double end = kUnknown;
  int32_t waiter = -1;  // the rank blocked on this transfer's data
};

struct RankState {
  size_t pc = 0;
  double t = 0;            // the compute stream is free from t
  double reduce_free = 0;  // the reduction stream is free from reduce_free
  double unshard_free = 0;
  double first = kUnknown;
  double last = 0;
  double busy = 0;
  double reduce_us = 0;
  std::vector<double> step_start, step_end;
};

// One simulated step. Index spaces: rank, step (= program index) within a
// rank, transfer id over the schedule, stage.
class Engine {
 public:
  Engine(const Schedule& s, const Executable& exe, const Model& model, bool free_reductions)
      : s_(s), exe_(exe), model_(model), free_reductions_(free_reductions),
        transfers_(exe.transfers.size()), ranks_(s.pp),
        unshard_ready_(s.num_stages(), 0.0) {
    for (int r = 0; r < s.pp; ++r) {
      ranks_[r].step_start.assign(exe.ranks[r].steps.size(), 0);
      ranks_[r].step_end.assign(exe.ranks[r].steps.size(), 0);
    }
  }

  absl::Status Run() {
    std::vector<int> runnable;
    for (int r = s_.pp - 1; r >= 0; --r) runnable.push_back(r);
    while (!runnable.empty()) {
      int r = runnable.back();
      runnable.pop_back();
      Advance(r, runnable);
    }
    return CheckAllDone();
  }

  const RankState& rank(int r) const { return ranks_[r]; }
  const TransferState& transfer(int id) const { return transfers_[id]; }
  double RankEnd(int r) const { return std::max(ranks_[r].t, ranks_[r].reduce_free); }

 private:
  // Runs rank r's steps until one waits on a transfer not yet posted by its
  // peer, or the program ends.
  void Advance(int r, std::vector<int>& runnable) {
    RankState& st = ranks_[r];
    const RankExecutable& exe = exe_.ranks[r];
    while (st.pc < exe.steps.size()) {
      const ExecStep& step = exe.steps[st.pc];
      double start = st.t, end = st.t;
      if (IsCompute(step.kind)) {
        for (const ExecPart& part : exe.PartsOf(step)) {
          if (part.waits_for != kNoTransfer) {
            TransferState& x = transfers_[part.waits_for];
            if (x.end == kUnknown) {
              x.waiter = r;
              return;
            }
            start = std::max(start, x.end);
          }
          start = std::max(start, unshard_ready_[part.stage]);
        }
        end = start + step.cost_us;
        st.t = end;
        st.busy += step.cost_us;
        if (st.first == kUnknown) st.first = start;
        st.last = end;
      } else if (IsSendRecv(step.kind)) {
        Post(step.transfer, IsSend(step.kind), st.t, runnable);
      } else if (step.kind == ActionKind::kReduceGrad) {
        start = std::max(st.t, st.reduce_free);
        const double us = ReduceUs(step.stage);
        end = start + us;
        st.reduce_free = end;
        st.reduce_us += us;
      } else if (step.kind == ActionKind::kUnshard) {
        start = std::max(st.t, st.unshard_free);
        end = start + GatherUs(step.stage);
        st.unshard_free = end;
        unshard_ready_[step.stage] = end;
      }
      st.step_start[st.pc] = start;
      st.step_end[st.pc] = end;
      ++st.pc;
    }
  }

  void Post(int32_t id, bool send, double t, std::vector<int>& runnable) {
    TransferState& x = transfers_[id];
    (send ? x.send_post : x.recv_post) = t;
    if (x.send_post == kUnknown || x.recv_post == kUnknown) return;
    x.end = std::max(x.send_post, x.recv_post) +
            model_.p2p.TransferUs(static_cast<double>(exe_.transfers[id].bytes));
    if (x.waiter >= 0) {
      runnable.push_back(x.waiter);
      x.waiter = -1;
    }
  }

  double ReduceUs(int stage) const {
    if (free_reductions_ || model_.dp.size <= 1) return 0;
    return model_.dp.link.TransferUs(model_.ReduceTrafficBytes(stage));
  }

  double GatherUs(int stage) const {
    if (model_.dp.size <= 1) return 0;
    const double bytes = static_cast<double>(model_.ForStage(stage).param_bytes) *
                         (model_.dp.size - 1) / model_.dp.size;
    return model_.dp.link.TransferUs(bytes);
  }

  absl::Status CheckAllDone() const {
    std::string stuck;
    for (int r = 0; r < s_.pp; ++r) {
      const RankState& st = ranks_[r];
      if (st.pc >= exe_.ranks[r].steps.size()) continue;
      const ExecStep& step = exe_.ranks[r].steps[st.pc];
      absl::StrAppend(&stuck, stuck.empty() ? "" : "; ", "rank ", r, " at index ", step.index,
                      " (", s_.ranks[r][step.index].ToString(), ")");
    }
    if (stuck.empty()) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("simulation cannot progress (the program deadlocks): ", stuck));
  }

  const Schedule& s_;
  const Executable& exe_;
  const Model& model_;
  const bool free_reductions_;
  std::vector<TransferState> transfers_;
  std::vector<RankState> ranks_;
  std::vector<double> unshard_ready_;
};

// Live bytes of rank r over simulated time: the peak, and the samples when
// `samples` is given. At equal times frees come first: a step that ends at t
// releases before the next one, starting at t, allocates (program order).
int64_t SweepMemory(const Engine& engine, const RankExecutable& exe, int r, double rank_end,
                    std::vector<MemorySample>* samples) {
  struct Event {
    double time;
    int order;  // 0 free, 1 alloc
    int32_t buffer;
  };
  std::vector<Event> events;
  const RankState& st = engine.rank(r);
  for (int32_t id : exe.allocate_at_start) events.push_back({0, 1, id});
  for (int32_t id : exe.release_at_end) events.push_back({rank_end, 0, id});
  for (size_t i = 0; i < exe.steps.size(); ++i) {
    const ExecStep& step = exe.steps[i];
    for (int32_t id : exe.AllocatedBefore(step)) events.push_back({st.step_start[i], 1, id});
    for (int32_t id : exe.ReleasedAfter(step)) events.push_back({st.step_end[i], 0, id});
    for (int32_t id : exe.ReleasedOnSend(step)) {
      events.push_back({engine.transfer(step.transfer).end, 0, id});
    }
  }
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return std::tie(a.time, a.order) < std::tie(b.time, b.order);
  });
  std::array<int64_t, kNumMemoryCategories> bytes{};
  int64_t live = 0, peak = 0;
  for (size_t k = 0; k < events.size(); ++k) {
    const Event& e = events[k];
    const int64_t delta = e.order == 1 ? exe.buffer_bytes[e.buffer] : -exe.buffer_bytes[e.buffer];
    live += delta;
    bytes[static_cast<int>(exe.buffer_category[e.buffer])] += delta;
    peak = std::max(peak, live);
    const bool last_at_time = k + 1 == events.size() || events[k + 1].time != e.time;
    if (samples != nullptr && last_at_time) samples->push_back({r, e.time, bytes});
  }
  return peak;
}

void RecordSpans(const Engine& engine, const Executable& exe, int r, Timeline& timeline) {
  const RankExecutable& rank = exe.ranks[r];
  const RankState& st = engine.rank(r);
  for (size_t i = 0; i < rank.steps.size(); ++i) {
    const ExecStep& step = rank.steps[i];
    TimelineSpan span{r, TimelineTrack::kCompute, step.index, -1, st.step_start[i], st.step_end[i]};
    if (IsSendRecv(step.kind)) {
      span.track = IsSend(step.kind) ? TimelineTrack::kSend : TimelineTrack::kRecv;
      span.transfer = step.transfer;
      span.end_us = engine.transfer(step.transfer).end;
    } else if (step.kind == ActionKind::kReduceGrad) {
      span.track = TimelineTrack::kReduce;
    } else if (step.kind == ActionKind::kUnshard) {
      span.track = TimelineTrack::kUnshard;
    } else if (!IsCompute(step.kind)) {
      continue;  // RESHARD takes no time
    }
    timeline.spans.push_back(span);
  }
}

}  // namespace

absl::StatusOr<SimulationResult> Simulate(const Schedule& schedule, const Executable& executable,
                                          const Model& model, const SimulationOptions& options) {
  Engine engine(schedule, executable, model, /*free_reductions=*/false);
  RETURN_IF_ERROR(engine.Run());
  Engine free_engine(schedule, executable, model, /*free_reductions=*/true);
  RETURN_IF_ERROR(free_engine.Run());

  SimulationResult result;
  double free_makespan = 0, longest_span = 0;
  for (int r = 0; r < schedule.pp; ++r) {
    const RankState& st = engine.rank(r);
    RankSimulation rank;
    rank.rank = r;
    rank.busy_us = st.busy;
    rank.first_start_us = st.first == kUnknown ? 0 : st.first;
    rank.span_us = st.first == kUnknown ? 0 : st.last - st.first;
    rank.end_us = engine.RankEnd(r);
    rank.reduce_us = st.reduce_us;
    rank.peak_bytes = SweepMemory(engine, executable.ranks[r], r, rank.end_us,
                                  options.record_timeline ? &result.timeline.memory : nullptr);
    if (options.record_timeline) RecordSpans(engine, executable, r, result.timeline);
    result.makespan_us = std::max(result.makespan_us, rank.end_us);
    result.total_reduce_us += rank.reduce_us;
    free_makespan = std::max(free_makespan, free_engine.RankEnd(r));
    longest_span = std::max(longest_span, rank.span_us);
    result.ranks.push_back(rank);
  }
  for (const RankSimulation& rank : result.ranks) {
    if (result.makespan_us > 0) {
      result.bubble_fraction =
          std::max(result.bubble_fraction, 1 - rank.busy_us / result.makespan_us);
    }
    if (longest_span > 0) {
      result.span_bubble_fraction =
          std::max(result.span_bubble_fraction, 1 - rank.busy_us / longest_span);
    }
  }
  result.exposed_reduce_us = result.makespan_us - free_makespan;
  return result;
}

}  // namespace jitpipe
