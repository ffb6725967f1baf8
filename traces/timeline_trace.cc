#include "traces/timeline_trace.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace jitpipe {
namespace {

constexpr int kComputeTid = 1;
constexpr int kLaneStride = 1000;  // tid = 1 + track * kLaneStride + lane

// One span on its way into the trace.
struct Slice {
  const TimelineSpan* span = nullptr;
  int tid = kComputeTid;
  int step = 0;  // the rank's step the span belongs to
  std::string name;
  std::string flow_in_name, flow_out_name;
  int64_t flow_in = -1, flow_out = -1;
};

int64_t Nanos(double us) { return std::llround(us * 1000.0); }

// The world rank of pipeline rank 0 in `world_rank`'s replica (world rank =
// replica * pp + pipeline rank): add a pipeline rank to name a peer.
int ReplicaBase(int world_rank, int pp) { return world_rank - world_rank % pp; }

absl::string_view TrackName(TimelineTrack track) {
  switch (track) {
    case TimelineTrack::kCompute: return "compute";
    case TimelineTrack::kSend: return "send";
    case TimelineTrack::kRecv: return "recv";
    case TimelineTrack::kReduce: return "reduce";
    case TimelineTrack::kUnshard: return "unshard";
  }
  return "?";
}

absl::string_view TrackCat(TimelineTrack track) {
  switch (track) {
    case TimelineTrack::kCompute: return "compute";
    case TimelineTrack::kSend:
    case TimelineTrack::kRecv: return "p2p";
    case TimelineTrack::kReduce: return "reduce";
    case TimelineTrack::kUnshard: return "fsdp";
  }
  return "?";
}

uint64_t Key(int rank, int step, int index) {
  return (static_cast<uint64_t>(rank) << 48) | (static_cast<uint64_t>(step) << 32) |
         static_cast<uint32_t>(index);
}

// Numbers each rank's steps (a new step starts where the program index goes
// back) and spreads overlapping spans of a non-compute track over lanes.
// Index spaces: slice position, timeline rank, track, lane.
std::vector<Slice> MakeSlices(const Schedule& s, const Timeline& timeline) {
  std::vector<Slice> slices;
  slices.reserve(timeline.spans.size());
  std::map<int, int> last_index, step_of_rank;
  for (const TimelineSpan& span : timeline.spans) {
    auto [it, fresh] = last_index.try_emplace(span.rank, span.index);
    if (!fresh && span.index < it->second) ++step_of_rank[span.rank];
    it->second = span.index;
    Slice slice;
    slice.span = &span;
    slice.step = step_of_rank[span.rank];
    slice.name = s.ranks[span.rank % s.pp][span.index].ToString();
    if (span.track == TimelineTrack::kReduce && span.bucket >= 0) {
      absl::StrAppend(&slice.name, " bucket ", span.bucket);
    }
    slices.push_back(std::move(slice));
  }
  std::map<std::pair<int, int>, std::vector<size_t>> by_track;
  for (size_t k = 0; k < slices.size(); ++k) {
    const TimelineSpan& span = *slices[k].span;
    if (span.track != TimelineTrack::kCompute) {
      by_track[{span.rank, static_cast<int>(span.track)}].push_back(k);
    }
  }
  for (auto& [key, members] : by_track) {
    std::stable_sort(members.begin(), members.end(), [&](size_t a, size_t b) {
      return slices[a].span->start_us < slices[b].span->start_us;
    });
    std::vector<int64_t> lane_end;  // per lane: the end of its last slice, ns
    for (size_t k : members) {
      const int64_t start = Nanos(slices[k].span->start_us);
      size_t lane = 0;
      // >=: a slice starting where the lane's last one ended takes another
      // lane, so an arrival slice (at a RECV's end) starts alone on its thread.
      while (lane < lane_end.size() && lane_end[lane] >= start) ++lane;
      if (lane == lane_end.size()) lane_end.push_back(0);
      lane_end[lane] = Nanos(slices[k].span->end_us);
      slices[k].tid = 1 + key.second * kLaneStride + static_cast<int>(lane);
    }
  }
  return slices;
}

// The table entry of transfer `id` when the table knows both its ends'
// ranks; nullptr otherwise.
const TimelineTransfer* TransferOf(const Timeline& timeline, int32_t id) {
  if (id < 0 || static_cast<size_t>(id) >= timeline.transfers.size()) return nullptr;
  const TimelineTransfer& x = timeline.transfers[id];
  return x.src_rank >= 0 && x.dst_rank >= 0 ? &x : nullptr;
}

uint64_t TransferKey(int world_rank, int step, int transfer, TimelineTrack track) {
  return Key(world_rank, step, transfer * 2 + (track == TimelineTrack::kRecv ? 1 : 0));
}

std::string FlowName(const TimelineTransfer& x) {
  const bool forward = x.kind == ActionKind::kSendF;
  return absl::StrCat(forward ? "act s" : "grad s", x.stage, "->s",
                      forward ? x.stage + 1 : x.stage - 1, " mb", x.microbatch);
}

// Arrows from each SEND slice, at its post, to the data's arrival on the
// receiving side: a zero-length slice at the end of the RECV slice (the RECV
// slice itself when it has no length). A viewer draws an arrow only forwards
// in time, so a transfer that arrives no later than its send was posted (free
// communication) gets none here; `done` marks the (world rank of the sender,
// step, transfer) instances that got one.
void AddTransferFlows(const Schedule& s, const Timeline& timeline, std::vector<Slice>& slices,
                      std::deque<TimelineSpan>& arrivals,
                      absl::flat_hash_set<uint64_t>& done, int64_t& id) {
  absl::flat_hash_map<uint64_t, size_t> p2p;  // TransferKey -> slice
  for (size_t k = 0; k < slices.size(); ++k) {
    const TimelineSpan& span = *slices[k].span;
    if ((span.track == TimelineTrack::kSend || span.track == TimelineTrack::kRecv) &&
        span.transfer >= 0) {
      p2p[TransferKey(span.rank, slices[k].step, span.transfer, span.track)] = k;
    }
  }
  const size_t num_slices = slices.size();
  for (size_t k = 0; k < num_slices; ++k) {
    if (slices[k].span->track != TimelineTrack::kSend || slices[k].span->transfer < 0) continue;
    const TimelineSpan& send = *slices[k].span;
    const TimelineTransfer* known = TransferOf(timeline, send.transfer);
    if (known == nullptr) continue;
    const TimelineTransfer& x = *known;
    auto r = p2p.find(TransferKey(ReplicaBase(send.rank, s.pp) + x.dst_rank, slices[k].step,
                                  send.transfer, TimelineTrack::kRecv));
    if (r == p2p.end()) continue;
    const TimelineSpan& recv = *slices[r->second].span;
    const int64_t posted = Nanos(send.start_us), arrived = Nanos(recv.end_us);
    if (arrived <= posted + 1) continue;
    size_t to = r->second;
    if (Nanos(recv.start_us) != arrived) {
      TimelineSpan& mark = arrivals.emplace_back(recv);
      mark.start_us = mark.end_us = recv.end_us;
      Slice arrival;
      arrival.span = &mark;
      arrival.tid = slices[r->second].tid;
      arrival.step = slices[r->second].step;
      arrival.name = absl::StrCat("arrived ", FlowName(x));
      slices.push_back(std::move(arrival));
      to = slices.size() - 1;
    }
    Slice& from = slices[k];
    from.flow_out = slices[to].flow_in = id++;
    from.flow_out_name = slices[to].flow_in_name = FlowName(x);
    done.insert(Key(send.rank, from.step, send.transfer));
  }
}

// For the transfers AddTransferFlows left without an arrow: one from the
// producing compute slice to the consuming one where the viewers can bind
// them (distinct starts, forwards in time).
void AddComputeFlows(const Schedule& s, const Timeline& timeline, std::vector<Slice>& slices,
                     const absl::flat_hash_set<uint64_t>& done, int64_t& id) {
  absl::flat_hash_map<uint64_t, size_t> compute;  // (rank, step, index) -> slice
  std::map<int, std::vector<int64_t>> starts;     // per rank: compute starts, ns
  int steps = 0, world = 0;
  for (size_t k = 0; k < slices.size(); ++k) {
    const TimelineSpan& span = *slices[k].span;
    if (span.track != TimelineTrack::kCompute) continue;
    compute[Key(span.rank, slices[k].step, span.index)] = k;
    starts[span.rank].push_back(Nanos(span.start_us));
    steps = std::max(steps, slices[k].step + 1);
    world = std::max(world, span.rank + 1);
  }
  for (auto& [rank, list] : starts) std::sort(list.begin(), list.end());
  auto unique_start = [&](int rank, int64_t ns) {
    const std::vector<int64_t>& list = starts[rank];
    auto lo = std::lower_bound(list.begin(), list.end(), ns - 1);
    return lo != list.end() && *lo <= ns + 1 && (lo + 1 == list.end() || *(lo + 1) > ns + 1);
  };
  // Index spaces: replica (world rank = replica * pp + rank), step, transfer.
  for (int replica = 0; replica * s.pp < world; ++replica) {
    for (int step = 0; step < steps; ++step) {
      for (size_t t = 0; t < timeline.transfers.size(); ++t) {
        const TimelineTransfer* x = TransferOf(timeline, static_cast<int32_t>(t));
        if (x == nullptr || x->producer_index < 0 || x->consumer_index < 0) continue;
        if (done.contains(Key(replica * s.pp + x->src_rank, step, static_cast<int>(t)))) continue;
        auto p = compute.find(Key(replica * s.pp + x->src_rank, step, x->producer_index));
        auto c = compute.find(Key(replica * s.pp + x->dst_rank, step, x->consumer_index));
        if (p == compute.end() || c == compute.end()) continue;
        Slice& from = slices[p->second];
        Slice& to = slices[c->second];
        const int64_t from_ns = Nanos(from.span->start_us), to_ns = Nanos(to.span->start_us);
        if (from.flow_out >= 0 || to.flow_in >= 0 || to_ns <= from_ns + 1 ||
            !unique_start(from.span->rank, from_ns) || !unique_start(to.span->rank, to_ns)) {
          continue;
        }
        from.flow_out = to.flow_in = id++;
        from.flow_out_name = to.flow_in_name = FlowName(*x);
      }
    }
  }
}

void WriteNames(const Schedule& s, const std::vector<Slice>& slices, ChromeTraceWriter& writer) {
  std::map<int, std::map<int, std::string>> threads;  // rank -> tid -> name
  for (const Slice& slice : slices) {
    const int lane = (slice.tid - 1) % kLaneStride;
    threads[slice.span->rank][slice.tid] =
        lane == 0 ? std::string(TrackName(slice.span->track))
                  : absl::StrCat(TrackName(slice.span->track), " ", lane + 1);
  }
  for (const auto& [rank, tids] : threads) {
    writer.SetProcessName(rank, rank < s.pp ? absl::StrCat("rank ", rank)
                                            : absl::StrCat("rank ", rank, " (pipeline rank ",
                                                           rank % s.pp, ", replica ",
                                                           rank / s.pp, ")"));
    writer.SetProcessSortIndex(rank, rank);
    for (const auto& [tid, name] : tids) {
      writer.SetThreadName(rank, tid, name);
      writer.SetThreadSortIndex(rank, tid, tid);
    }
  }
}

void WriteSlices(const Schedule& s, const Timeline& timeline, std::vector<Slice>& slices,
                 ChromeTraceWriter& writer) {
  std::stable_sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
    return a.span->start_us < b.span->start_us;
  });
  for (const Slice& slice : slices) {
    const TimelineSpan& span = *slice.span;
    std::vector<TraceArg> args = {TraceArg("index", span.index)};
    if (const TimelineTransfer* x = TransferOf(timeline, span.transfer); x != nullptr) {
      const int base = ReplicaBase(span.rank, s.pp);
      args.emplace_back("bytes", x->bytes);
      args.emplace_back("peer",
                        base + (span.track == TimelineTrack::kSend ? x->dst_rank : x->src_rank));
    }
    TraceSlice out{slice.name, TrackCat(span.track), span.rank, slice.tid, span.start_us,
                   std::max(0.0, span.end_us - span.start_us), args};
    if (slice.flow_out >= 0) out.flow_out = TraceFlow{slice.flow_out_name, slice.flow_out};
    if (slice.flow_in >= 0) out.flow_in = TraceFlow{slice.flow_in_name, slice.flow_in};
    writer.AddSlice(out);
  }
}

// The counter series of a rank: one per MemoryCategory, then "mem.live",
// "mem.arena_high" and the resident parts (Timeline::resident).
constexpr int kLiveSeries = kNumMemoryCategories;
constexpr int kArenaSeries = kNumMemoryCategories + 1;
constexpr int kResidentParameters = kNumMemoryCategories + 2;
constexpr int kResidentOptimizer = kNumMemoryCategories + 3;
constexpr int kNumSeries = kNumMemoryCategories + 4;

std::array<std::string, kNumSeries> SeriesNames() {
  std::array<std::string, kNumSeries> names;
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    names[c] = absl::StrCat("mem.", MemoryCategoryName(static_cast<MemoryCategory>(c)));
  }
  names[kLiveSeries] = "mem.live";
  names[kArenaSeries] = "mem.arena_high";
  names[kResidentParameters] = "mem.resident_parameters";
  names[kResidentOptimizer] = "mem.optimizer";
  return names;
}

// Memory counters per rank, each sampled where it changes, and every one
// once more at the rank's end when that is later than its last sample, so
// the final step has width.
void WriteCounters(const Timeline& timeline, ChromeTraceWriter& writer) {
  std::map<int, double> rank_end;
  for (const TimelineSpan& span : timeline.spans) {
    rank_end[span.rank] = std::max(rank_end[span.rank], span.end_us);
  }
  const std::array<std::string, kNumSeries> names = SeriesNames();
  std::map<int, std::array<std::optional<int64_t>, kNumSeries>> written;  // per rank
  std::map<int, const MemorySample*> last;
  std::map<int, ResidentMemory> resident;
  for (const ResidentMemory& r : timeline.resident) resident[r.rank] = r;
  auto emit = [&](const MemorySample& m, double ts, bool always) {
    std::array<int64_t, kNumSeries> values{};
    for (int c = 0; c < kNumMemoryCategories; ++c) {
      values[c] = m.bytes[c];
      values[kLiveSeries] += m.bytes[c];
    }
    values[kArenaSeries] = m.arena_high_bytes;
    const auto held = resident.find(m.rank);
    if (held != resident.end()) {
      values[kResidentParameters] = held->second.parameters;
      values[kResidentOptimizer] = held->second.optimizer;
      values[kLiveSeries] += held->second.parameters + held->second.optimizer;
    }
    std::array<std::optional<int64_t>, kNumSeries>& previous = written[m.rank];
    for (int k = 0; k < kNumSeries; ++k) {
      if (k == kArenaSeries && m.arena_high_bytes == kNoArenaSample) continue;
      if ((k == kResidentParameters || k == kResidentOptimizer) && held == resident.end()) {
        continue;
      }
      if (!always && previous[k] == values[k]) continue;
      previous[k] = values[k];
      writer.AddCounter({names[k], "memory", m.rank, 0, ts, "bytes",
                         static_cast<double>(values[k])});
    }
  };
  for (const MemorySample& m : timeline.memory) {
    emit(m, m.time_us, /*always=*/false);
    last[m.rank] = &m;
  }
  for (const auto& [rank, m] : last) {
    if (rank_end[rank] > m->time_us) emit(*m, rank_end[rank], /*always=*/true);
  }
}

}  // namespace

void AddTimelineToTrace(const Schedule& schedule, const Timeline& timeline,
                        ChromeTraceWriter& writer) {
  std::vector<Slice> slices = MakeSlices(schedule, timeline);
  std::deque<TimelineSpan> arrivals;  // the spans of the arrival slices
  absl::flat_hash_set<uint64_t> done;
  int64_t flow_id = 0;
  AddTransferFlows(schedule, timeline, slices, arrivals, done, flow_id);
  AddComputeFlows(schedule, timeline, slices, done, flow_id);
  WriteNames(schedule, slices, writer);
  WriteSlices(schedule, timeline, slices, writer);
  WriteCounters(timeline, writer);
  writer.SetMetadata("time_axis", std::string(TimelineAxisName(timeline.axis)));
}

}  // namespace jitpipe
