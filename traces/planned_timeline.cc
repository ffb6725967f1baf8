#include "traces/planned_timeline.h"

#include <array>
#include <queue>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "memory/liveness.h"

namespace jitpipe {
namespace {

// Whose data a transfer carries: the forward activation or the backward
// gradient of (stage, microbatch).
enum Direction : int { kForwardData = 0, kBackwardData = 1 };

uint64_t PartKey(Direction direction, int32_t stage, int32_t microbatch) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(stage)) << 33) |
         (static_cast<uint64_t>(static_cast<uint32_t>(microbatch)) << 1) |
         static_cast<uint64_t>(direction);
}

// The transfer id of (direction, sending stage, microbatch), or -1 when out
// of the schedule's range.
int64_t TransferId(const Schedule& s, Direction direction, int32_t stage, int32_t microbatch) {
  if (stage < 0 || stage >= s.num_stages() || microbatch < 0 || microbatch >= s.microbatches) {
    return -1;
  }
  return (2 * static_cast<int64_t>(stage) + direction) * s.microbatches + microbatch;
}

TimelineTrack TrackOf(ActionKind kind) {
  switch (kind) {
    case ActionKind::kSendF:
    case ActionKind::kSendB:
    case ActionKind::kWaitSendF:  // a wait for a send: on the send track
    case ActionKind::kWaitSendB: return TimelineTrack::kSend;
    case ActionKind::kRecvF:
    case ActionKind::kRecvB: return TimelineTrack::kRecv;
    case ActionKind::kReduceGrad:
    case ActionKind::kWaitReduceGrad: return TimelineTrack::kReduce;
    case ActionKind::kUnshard:
    case ActionKind::kReshard: return TimelineTrack::kUnshard;
    default: return TimelineTrack::kCompute;
  }
}

// The first program index of each compute part: F as kForwardData, I or B
// as kBackwardData (what a SEND_F / SEND_B carries, what a RECV_F / RECV_B
// feeds).
absl::flat_hash_map<uint64_t, int32_t> FirstParts(const RankProgram& program) {
  absl::flat_hash_map<uint64_t, int32_t> first;
  for (int32_t i = 0; i < static_cast<int32_t>(program.size()); ++i) {
    ForEachComputePart(program[i], [&](const Action& part) {
      if (part.kind == ActionKind::kBackwardWeight) return;
      const Direction d = part.kind == ActionKind::kForward ? kForwardData : kBackwardData;
      first.try_emplace(PartKey(d, part.stage, part.microbatch), i);
    });
  }
  return first;
}

// Bytes of each buffer a SEND sends: a stage's output (forward) or input
// gradient (backward), by (direction, stage, microbatch).
absl::flat_hash_map<uint64_t, int64_t> SentBytes(const RankBuffers& buffers) {
  absl::flat_hash_map<uint64_t, int64_t> bytes;
  for (const Buffer& b : buffers.buffers) {
    if (b.kind == BufferKind::kOutput) bytes[PartKey(kForwardData, b.stage, b.microbatch)] = b.bytes;
    if (b.kind == BufferKind::kInputGrad) {
      bytes[PartKey(kBackwardData, b.stage, b.microbatch)] = b.bytes;
    }
  }
  return bytes;
}

int32_t Lookup(const absl::flat_hash_map<uint64_t, int32_t>& map, uint64_t key) {
  auto it = map.find(key);
  return it == map.end() ? -1 : it->second;
}

// Fills this rank's end of the transfer of send/recv `action`;
// returns its id (-1 when out of range).
int32_t FillTransferEnd(const Schedule& s, int rank, const Action& action,
                        const absl::flat_hash_map<uint64_t, int32_t>& first,
                        const absl::flat_hash_map<uint64_t, int64_t>& sent, Timeline& timeline) {
  const bool send = IsSend(action.kind);
  const Direction d = action.kind == ActionKind::kSendF || action.kind == ActionKind::kRecvF
                          ? kForwardData
                          : kBackwardData;
  // A RECV names the receiving stage: its sender is the one before (F) or after (B).
  const int32_t sender = send ? action.stage : action.stage + (d == kForwardData ? -1 : 1);
  const int64_t id = TransferId(s, d, sender, action.microbatch);
  if (id < 0) return -1;
  TimelineTransfer& x = timeline.transfers[id];
  x.kind = d == kForwardData ? ActionKind::kSendF : ActionKind::kSendB;
  x.stage = sender;
  x.microbatch = action.microbatch;
  const uint64_t key = PartKey(d, action.stage, action.microbatch);
  if (send) {
    x.src_rank = rank;
    x.producer_index = Lookup(first, key);
    auto b = sent.find(key);
    x.bytes = b == sent.end() ? 0 : b->second;
  } else {
    x.dst_rank = rank;
    x.consumer_index = Lookup(first, key);
  }
  return static_cast<int32_t>(id);
}

void AppendSpans(const Schedule& s, const RankMemoryPlan& plan, Timeline& timeline) {
  const RankProgram& program = s.ranks[plan.rank];
  const absl::flat_hash_map<uint64_t, int32_t> first = FirstParts(program);
  const absl::flat_hash_map<uint64_t, int64_t> sent = SentBytes(plan.buffers);
  for (int32_t i = 0; i < static_cast<int32_t>(program.size()); ++i) {
    const Action& action = program[i];
    if (action.is_bubble()) continue;
    TimelineSpan span{plan.rank, TrackOf(action.kind), i, -1, static_cast<double>(i),
                      static_cast<double>(i + 1)};
    if (IsSendRecv(action.kind)) {
      span.transfer = FillTransferEnd(s, plan.rank, action, first, sent, timeline);
    }
    timeline.spans.push_back(span);
  }
}

void AppendMemory(const RankMemoryPlan& plan, Timeline& timeline) {
  const auto by_category = LiveBytesByCategory(plan.buffers);
  const std::vector<int64_t> high =
      plan.options.arena ? ArenaHighWater(plan) : std::vector<int64_t>();
  const bool arena = plan.options.arena;
  for (int i = 0; i < plan.buffers.num_actions; ++i) {
    MemorySample sample;
    sample.rank = plan.rank;
    sample.time_us = i;
    for (int c = 0; c < kNumMemoryCategories; ++c) sample.bytes[c] = by_category[c][i];
    sample.arena_high_bytes = arena ? high[i] : kNoArenaSample;
    if (i > 0) {
      const MemorySample& before = timeline.memory.back();
      if (before.bytes == sample.bytes && before.arena_high_bytes == sample.arena_high_bytes) {
        continue;
      }
    }
    timeline.memory.push_back(sample);
  }
}

}  // namespace

std::vector<int64_t> ArenaHighWater(const RankMemoryPlan& plan) {
  const std::vector<Buffer>& buffers = plan.buffers.buffers;
  std::vector<int64_t> high(plan.buffers.num_actions, 0);
  // Buffers are sorted by alloc index: sweep, keeping the live tops in a
  // max-heap and dropping the ones freed before the current index lazily.
  std::priority_queue<std::pair<int64_t, int>> tops;  // (offset + bytes, id)
  size_t next = 0;
  for (int i = 0; i < plan.buffers.num_actions; ++i) {
    for (; next < buffers.size() && buffers[next].alloc_index <= i; ++next) {
      if (buffers[next].bytes > 0) {
        tops.push({plan.arena.offsets[next] + buffers[next].bytes, static_cast<int>(next)});
      }
    }
    while (!tops.empty() && buffers[tops.top().second].free_index < i) tops.pop();
    high[i] = tops.empty() ? 0 : tops.top().first;
  }
  return high;
}

void AppendPlannedRank(const Schedule& schedule, const RankMemoryPlan& plan, Timeline& timeline) {
  if (timeline.transfers.empty()) {
    timeline.transfers.resize(2 * static_cast<size_t>(schedule.num_stages()) *
                              static_cast<size_t>(schedule.microbatches));
  }
  AppendSpans(schedule, plan, timeline);
  AppendMemory(plan, timeline);
}

Timeline PlannedTimeline(const Schedule& schedule, absl::Span<const RankMemoryPlan> plans) {
  Timeline timeline;
  timeline.axis = TimelineAxis::kProgramIndex;
  for (const RankMemoryPlan& plan : plans) AppendPlannedRank(schedule, plan, timeline);
  return timeline;
}

}  // namespace jitpipe
