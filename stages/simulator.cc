#include "stages/simulator.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "stages/timeline_transfers.h"

namespace jitpipe {
namespace {

constexpr double kUnknown = -1;

struct TransferState {
  double send_post = kUnknown;
  double recv_post = kUnknown;
  double end = kUnknown;
  int32_t waiter = -1;  // the rank blocked on this transfer's data
};

// One bucket of a reduction on the reduction stream.
struct ReduceRecord {
  int32_t step = 0;  // position in the rank's steps
  int32_t bucket = 0;
  double start = 0;
  double end = 0;
};

// The last compute step of a stage that held one of its B or W parts: the
// action whose duration a stage's reduction buckets become ready over.
struct GradientAction {
  double start = kUnknown;
  double end = kUnknown;
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
  std::vector<ReduceRecord> reductions;
};

// One simulated step. Index spaces: rank, step (= program index) within a
// rank, transfer id over the schedule, stage, bucket within a reduction.
class Engine {
 public:
  Engine(const Schedule& s, const Executable& exe, const Model& model)
      : s_(s), exe_(exe), model_(model), transfers_(exe.transfers.size()), ranks_(s.pp),
        unshard_ready_(s.num_stages(), 0.0), gradient_(s.num_stages()) {
    for (int r = 0; r < s.pp; ++r) {
      ranks_[r].step_start.assign(exe.ranks[r].steps.size(), 0);
      ranks_[r].step_end.assign(exe.ranks[r].steps.size(), 0);
    }
  }

  // Ranks run until they block on a transfer whose peer has not posted yet;
  // posting the peer's half wakes the blocked rank. Every rank runs each of
  // its steps once, so the whole run is linear in the number of steps.
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
  // When rank r's step is over: compute and reductions done.
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
        if (!ComputeStart(exe, step, r, start)) return;
        end = start + step.cost_us;
        st.t = end;
        st.busy += step.cost_us;
        if (st.first == kUnknown) st.first = start;
        st.last = end;
        for (const ExecPart& part : exe.PartsOf(step)) {
          if (part.kind == ActionKind::kBackward || part.kind == ActionKind::kBackwardWeight) {
            gradient_[part.stage] = {start, end};
          }
        }
      } else if (IsSendRecv(step.kind)) {
        Post(step.transfer, IsSend(step.kind), st.t, runnable);
      } else if (step.kind == ActionKind::kReduceGrad) {
        std::tie(start, end) = Reduce(st, step.stage);
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

  // The start of a compute step: after the stream is free, the transfers its
  // parts consume have completed and their stages' parameters are gathered.
  // False when a transfer is not yet posted by the peer (the rank blocks).
  bool ComputeStart(const RankExecutable& exe, const ExecStep& step, int r, double& start) {
    for (const ExecPart& part : exe.PartsOf(step)) {
      if (part.waits_for != kNoTransfer) {
        TransferState& x = transfers_[part.waits_for];
        if (x.end == kUnknown) {
          x.waiter = r;
          return false;
        }
        start = std::max(start, x.end);
      }
      start = std::max(start, unshard_ready_[part.stage]);
    }
    return true;
  }

  // Runs the stage's reduction as dp.buckets buckets on the rank's
  // reduction stream (model.h: bucket i < k-1 ready at (i+1)/k of the
  // stage's last gradient action, the last one now). Returns the first
  // bucket's start and the last one's end.
  std::pair<double, double> Reduce(RankState& st, int stage) {
    const int k = model_.dp.buckets;
    const double bucket_us = BucketUs(stage, k);
    const GradientAction& g = gradient_[stage];
    double first_start = kUnknown;
    for (int i = 0; i < k; ++i) {
      double ready = st.t;
      if (i + 1 < k && g.start != kUnknown) {
        ready = g.start + (g.end - g.start) * (i + 1) / k;
      }
      const double start = std::max(ready, st.reduce_free);
      st.reduce_free = start + bucket_us;
      st.reduce_us += bucket_us;
      st.reductions.push_back({static_cast<int32_t>(st.pc), i, start, st.reduce_free});
      if (first_start == kUnknown) first_start = start;
    }
    return {first_start, st.reduce_free};
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

  // One of k buckets of the stage's reduction: a collective of 1/k of the
  // traffic, each paying the link latency.
  double BucketUs(int stage, int k) const {
    if (model_.dp.size <= 1) return 0;
    return model_.dp.link.TransferUs(model_.ReduceTrafficBytes(stage) / k);
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
  std::vector<TransferState> transfers_;
  std::vector<RankState> ranks_;
  std::vector<double> unshard_ready_;
  std::vector<GradientAction> gradient_;  // per stage
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
  events.reserve(2 * exe.buffer_bytes.size());
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
  auto reduction = st.reductions.begin();
  for (size_t i = 0; i < rank.steps.size(); ++i) {
    const ExecStep& step = rank.steps[i];
    TimelineSpan span{r, TimelineTrack::kCompute, step.index, -1, st.step_start[i], st.step_end[i]};
    if (IsSendRecv(step.kind)) {
      span.track = IsSend(step.kind) ? TimelineTrack::kSend : TimelineTrack::kRecv;
      span.transfer = step.transfer;
      span.end_us = engine.transfer(step.transfer).end;
    } else if (step.kind == ActionKind::kReduceGrad) {
      // One span per bucket (the records are in step order).
      for (; reduction != st.reductions.end() && reduction->step == static_cast<int32_t>(i);
           ++reduction) {
        timeline.spans.push_back({r, TimelineTrack::kReduce, step.index, -1, reduction->start,
                                  reduction->end, reduction->bucket});
      }
      continue;
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
  RETURN_IF_ERROR(CheckModelFits(model, schedule.num_stages()));
  Engine engine(schedule, executable, model);
  RETURN_IF_ERROR(engine.Run());

  SimulationResult result;
  if (options.record_timeline) result.timeline.transfers = TimelineTransfersOf(executable);
  double compute_end = 0, longest_span = 0;
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
    result.max_rank_reduce_us = std::max(result.max_rank_reduce_us, rank.reduce_us);
    compute_end = std::max(compute_end, st.t);
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
  // No compute waits for a reduction (only the step end does), so with free
  // reductions every step runs at the same times and the makespan is the
  // latest compute end.
  result.exposed_reduce_us = result.makespan_us - compute_end;
  return result;
}

}  // namespace jitpipe
