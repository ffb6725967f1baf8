#include "stages/predict/simulator.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "scheduler/execution/deadlock.h"
#include "scheduler/execution/run_ranks.h"
#include "stages/exec/timeline_transfers.h"

namespace jitpipe {
namespace {

constexpr double kUnknown = -1;

struct TransferState {
  double send_post = kUnknown;
  double recv_post = kUnknown;
  double end = kUnknown;
};

// An allocation (order 1) or release (order 0) of a buffer at a simulated time.
struct TimedEvent {
  double time;
  int order;
  int32_t buffer;
};

// Time order; at equal times frees first (see SweepMemory).
bool Before(const TimedEvent& a, const TimedEvent& b) {
  return a.time != b.time ? a.time < b.time : a.order < b.order;
}

// One rank's memory events, sorted cheaply: the events at times of the
// rank's compute stream come in time order already (the stream only moves
// forward), so only the others -- a sent buffer freed when its transfer
// ends, a buffer freed when a reduction or an unshard on another stream ends
// -- are sorted and merged in. Sorting every event was a third of a
// simulation.
class TimedEvents {
 public:
  void Clear() {
    in_order_.clear();
    late_.clear();
  }
  // An event at the compute stream's time; one that is not (a caller's
  // mistake) is still placed right.
  void Add(const TimedEvent& e) {
    if (in_order_.empty() || !Before(e, in_order_.back())) {
      in_order_.push_back(e);
    } else {
      late_.push_back(e);
    }
  }
  // An event at another stream's time.
  void AddLate(const TimedEvent& e) { late_.push_back(e); }
  // All events in time order (frees first at equal times); the order among
  // events equal in both is unspecified.
  const std::vector<TimedEvent>& Sorted() {
    if (late_.empty()) return in_order_;
    std::sort(late_.begin(), late_.end(), Before);
    merged_.resize(in_order_.size() + late_.size());
    std::merge(in_order_.begin(), in_order_.end(), late_.begin(), late_.end(), merged_.begin(),
               Before);
    return merged_;
  }

 private:
  std::vector<TimedEvent> in_order_, late_, merged_;
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
  double t = 0;            // the compute stream is free from t
  double reduce_free = 0;  // the reduction stream is free from reduce_free
  double unshard_free = 0;
  double first = kUnknown;
  double last = 0;
  double busy = 0;
  double reduce_us = 0;
  double end = 0;     // the rank's step is over: compute and reductions done
  double ready = 0;   // the latest end of what the current action waited for
  std::vector<double> step_start, step_end;
  std::vector<ReduceRecord> reductions;
};

// One simulated step: the ranks' cursors (rank_cursor.h) driven by RunRanks
// on a virtual clock. Index spaces: rank, step (= program index) within a
// rank, transfer id over the schedule, stage, bucket within a reduction.
class Engine {
 public:
  // `free_reductions`: every reduction takes no time (what the exposed
  // reduction is measured against).
  Engine(const Schedule& s, const Executable& exe, const Model& model,
         bool free_reductions = false)
      : s_(s), exe_(exe), model_(model), free_reductions_(free_reductions),
        transfers_(exe.transfers.size()), ranks_(s.pp), gradient_(s.num_stages()) {
    for (int r = 0; r < s.pp; ++r) {
      ranks_[r].step_start.assign(exe.ranks[r].steps.size(), 0);
      ranks_[r].step_end.assign(exe.ranks[r].steps.size(), 0);
    }
  }

  // Every rank runs each of its instructions once: the run is linear in the
  // number of steps. Errors: DeadlockStatus() (InvalidArgument) when ranks
  // block forever.
  absl::Status Run() {
    std::vector<RankCursor> cursors;
    cursors.reserve(s_.pp);
    // Times only: the memory events are placed afterwards (MemoryEvents).
    for (int r = 0; r < s_.pp; ++r) {
      cursors.emplace_back(s_, exe_.positions, r, WaitModel::kRelaxed);
    }
    const bool done = RunRanks(absl::MakeSpan(cursors),
                               [this](int r, const Instruction& in) { Visit(r, in); });
    if (!done) return DeadlockStatus(s_, exe_.positions, cursors);
    return absl::OkStatus();
  }

  const RankState& rank(int r) const { return ranks_[r]; }
  const TransferState& transfer(int id) const { return transfers_[id]; }

 private:
  void Visit(int r, const Instruction& in) {
    RankState& st = ranks_[r];
    switch (in.step) {
      case Step::kWait:
        st.ready = std::max(st.ready, WaitEnd(r, in.wait));
        return;
      case Step::kRun:
        RunStep(r, st, in.index);
        return;
      case Step::kEnd:
        st.end = std::max(st.t, st.reduce_free);
        return;
      default:
        return;
    }
  }

  // When what the wait names is over, in simulated time: a transfer's end
  // (both ends are posted once the wait holds; the transfer of the RECV a
  // compute consumes, or of the SEND a WAIT_SEND waits for), or this rank's
  // UNSHARD's or REDUCE_GRAD's (its last bucket's).
  double WaitEnd(int r, const Wait& w) const {
    if (w.kind == WaitKind::kLocal || w.kind == WaitKind::kReduction) {
      return ranks_[r].step_end[w.local];
    }
    const int32_t id = exe_.ranks[r].steps[w.local].transfer;
    return transfers_[id].end;
  }

  // Runs step `in.index` of rank r at simulated time: a compute once the
  // stream is free and what it waited for is over; SEND/RECV posted when
  // the rank reaches them; REDUCE_GRAD on the reduction stream; UNSHARD on
  // the gather stream; a WAIT holds the stream until what it waits for is
  // over (it takes no time of its own).
  void RunStep(int r, RankState& st, int32_t i) {
    const ExecStep& step = exe_.ranks[r].steps[i];
    double start = st.t, end = st.t;
    if (IsCompute(step.kind)) {
      start = std::max(st.t, st.ready);
      end = start + step.cost_us;
      st.t = end;
      st.busy += step.cost_us;
      if (st.first == kUnknown) st.first = start;
      st.last = end;
      for (const ExecPart& part : exe_.ranks[r].PartsOf(step)) {
        if (part.kind == ActionKind::kBackward || part.kind == ActionKind::kBackwardWeight) {
          gradient_[part.stage] = {start, end};
        }
      }
    } else if (IsSendRecv(step.kind)) {
      Post(step.transfer, IsSend(step.kind), st.t);
    } else if (IsWait(step.kind)) {
      start = end = st.t = std::max(st.t, st.ready);
    } else if (step.kind == ActionKind::kReduceGrad) {
      std::tie(start, end) = Reduce(st, i, step.stage);
    } else if (step.kind == ActionKind::kUnshard) {
      start = std::max(st.t, st.unshard_free);
      end = start + GatherUs(step.stage);
      st.unshard_free = end;
    }
    st.ready = 0;
    st.step_start[i] = start;
    st.step_end[i] = end;
  }

  // Runs the stage's reduction as dp.buckets buckets on the rank's
  // reduction stream (model.h: bucket i < k-1 ready at (i+1)/k of the
  // stage's last gradient action, the last one now). Returns the first
  // bucket's start and the last one's end.
  std::pair<double, double> Reduce(RankState& st, int32_t step, int stage) {
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
      st.reductions.push_back({step, i, start, st.reduce_free});
      if (first_start == kUnknown) first_start = start;
    }
    return {first_start, st.reduce_free};
  }

  // A transfer starts once both ends are posted, as NCCL's do.
  void Post(int32_t id, bool send, double t) {
    TransferState& x = transfers_[id];
    (send ? x.send_post : x.recv_post) = t;
    if (x.send_post == kUnknown || x.recv_post == kUnknown) return;
    x.end = std::max(x.send_post, x.recv_post) +
            model_.p2p.TransferUs(static_cast<double>(exe_.transfers[id].bytes));
  }

  // One of k buckets of the stage's reduction: a collective of 1/k of the
  // traffic, each paying the link latency.
  double BucketUs(int stage, int k) const {
    if (model_.dp.size <= 1 || free_reductions_) return 0;
    return model_.dp.link.TransferUs(model_.ReduceTrafficBytes(stage) / k);
  }

  double GatherUs(int stage) const {
    if (model_.dp.size <= 1) return 0;
    const double bytes = static_cast<double>(model_.ForStage(stage).param_bytes) *
                         (model_.dp.size - 1) / model_.dp.size;
    return model_.dp.link.TransferUs(bytes);
  }

  const Schedule& s_;
  const Executable& exe_;
  const Model& model_;
  const bool free_reductions_;
  std::vector<TransferState> transfers_;
  std::vector<RankState> ranks_;
  std::vector<GradientAction> gradient_;  // per stage
};

// Rank r's memory events at simulated time, in the order its cursor hands
// them out (the instructions of a run, waits passed: every time is known):
// an allocation when its action starts, a release when it ends, a sent
// buffer's release when its transfer ends (not when the SEND is posted),
// step-start buffers at 0 and step-end ones at the rank's end.
void MemoryEvents(const Schedule& s, const Executable& exe, const Engine& engine, int r,
                  TimedEvents& events) {
  const RankState& st = engine.rank(r);
  events.Clear();
  for (RankCursor c = CursorOf(s, exe, r); !c.done(); c.Advance()) {
    const Instruction& in = c.current();
    switch (in.step) {
      case Step::kBegin:
        for (int32_t id : in.buffers) events.Add({0, 1, id});
        break;
      case Step::kAllocate:
        for (int32_t id : in.buffers) events.Add({st.step_start[in.index], 1, id});
        break;
      case Step::kRun: {
        const double sent = in.buffers.empty()
                                ? 0
                                : engine.transfer(exe.ranks[r].steps[in.index].transfer).end;
        for (int32_t id : in.buffers) events.AddLate({sent, 0, id});
        break;
      }
      case Step::kRelease: {
        const ActionKind kind = exe.ranks[r].steps[in.index].kind;
        const bool on_compute_stream = IsCompute(kind) || IsSendRecv(kind);
        for (int32_t id : in.buffers) {
          const TimedEvent e{st.step_end[in.index], 0, id};
          on_compute_stream ? events.Add(e) : events.AddLate(e);
        }
        break;
      }
      case Step::kEnd:
        for (int32_t id : in.buffers) events.Add({st.end, 0, id});
        break;
      default:
        break;
    }
  }
}

// Live bytes of a rank over simulated time: the peak, and the samples when
// `samples` is given. At equal times frees come first: a step that ends at t
// releases before the next one, starting at t, allocates (program order).
// Events equal in time and order may come in any order: within such a group
// the live bytes only rise (allocations) or only fall (frees), so the peak
// is the same, and a sample is taken only after the whole group.
int64_t SweepMemory(TimedEvents& timed, const RankExecutable& exe, int r,
                    std::vector<MemorySample>* samples) {
  const std::vector<TimedEvent>& events = timed.Sorted();
  std::array<int64_t, kNumMemoryCategories> bytes{};
  int64_t live = 0, peak = 0;
  for (size_t k = 0; k < events.size(); ++k) {
    const TimedEvent& e = events[k];
    const int64_t delta = e.order == 1 ? exe.buffer_bytes[e.buffer] : -exe.buffer_bytes[e.buffer];
    live += delta;
    bytes[static_cast<int>(exe.buffer_category[e.buffer])] += delta;
    peak = std::max(peak, live);
    const bool last_at_time = k + 1 == events.size() || events[k + 1].time != e.time;
    if (samples != nullptr && last_at_time) samples->push_back({r, e.time, bytes});
  }
  return peak;
}

bool HasWaitReduceGrad(const Schedule& s) {
  for (const RankProgram& program : s.ranks) {
    for (const Action& a : program) {
      if (a.kind == ActionKind::kWaitReduceGrad) return true;
    }
  }
  return false;
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
  RETURN_IF_ERROR(CheckExecutableFits(schedule, executable));
  Engine engine(schedule, executable, model);
  RETURN_IF_ERROR(engine.Run());

  SimulationResult result;
  if (options.record_timeline) result.timeline.transfers = TimelineTransfersOf(executable);
  double compute_end = 0, longest_span = 0;
  TimedEvents events;  // one rank's at a time
  for (int r = 0; r < schedule.pp; ++r) {
    const RankState& st = engine.rank(r);
    RankSimulation rank;
    rank.rank = r;
    rank.busy_us = st.busy;
    rank.first_start_us = st.first == kUnknown ? 0 : st.first;
    rank.span_us = st.first == kUnknown ? 0 : st.last - st.first;
    rank.end_us = st.end;
    rank.reduce_us = st.reduce_us;
    MemoryEvents(schedule, executable, engine, r, events);
    rank.peak_bytes = SweepMemory(events, executable.ranks[r], r,
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
  // Without WAIT_REDUCE_GRAD no compute waits for a reduction (only the step
  // end does), so with free reductions every step runs at the same times and
  // the makespan is the latest compute end. With one, computes after it may
  // wait: the run with free reductions says how long the step takes then.
  if (HasWaitReduceGrad(schedule)) {
    Engine free(schedule, executable, model, /*free_reductions=*/true);
    RETURN_IF_ERROR(free.Run());
    compute_end = 0;
    for (int r = 0; r < schedule.pp; ++r) compute_end = std::max(compute_end, free.rank(r).end);
  }
  result.exposed_reduce_us = result.makespan_us - compute_end;
  return result;
}

}  // namespace jitpipe
