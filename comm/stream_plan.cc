#include "comm/stream_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace jitpipe {
namespace {

std::string StreamName(const StreamRef& s) {
  switch (s.kind) {
    case StreamKind::kCompute:
      return "compute";
    case StreamKind::kP2p:
      return absl::StrCat("p2p[", s.index, "]");
    case StreamKind::kReduce:
      return "reduce";
  }
  return "?";
}

absl::string_view EventName(EventSlot e) {
  switch (e) {
    case EventSlot::kReady:
      return "ready";
    case EventSlot::kPeerReady:
      return "peer-ready";
    case EventSlot::kDone:
      return "done";
    case EventSlot::kPeerDone:
      return "peer-done";
  }
  return "?";
}

absl::string_view WorkName(DeviceWork w) {
  switch (w) {
    case DeviceWork::kSend:
      return "send";
    case DeviceWork::kRecv:
      return "recv";
    case DeviceWork::kCopy:
      return "copy";
    case DeviceWork::kStage:
      return "stage";
    case DeviceWork::kToWire:
      return "to-wire";
    case DeviceWork::kCollective:
      return "collective";
    case DeviceWork::kFromWire:
      return "from-wire";
  }
  return "?";
}

DeviceStep Record(StreamRef s, EventSlot e) { return {DeviceStep::Kind::kRecord, s, e}; }
DeviceStep WaitFor(StreamRef s, EventSlot e) { return {DeviceStep::Kind::kWait, s, e}; }
DeviceStep Work(StreamRef s, DeviceWork w, int bucket = -1) {
  return {DeviceStep::Kind::kWork, s, EventSlot::kReady, w, bucket};
}

constexpr StreamRef kCompute{StreamKind::kCompute, 0};
constexpr StreamRef kReduce{StreamKind::kReduce, 0};

}  // namespace

std::string StepsToString(absl::Span<const DeviceStep> steps) {
  std::vector<std::string> parts;
  for (const DeviceStep& s : steps) {
    switch (s.kind) {
      case DeviceStep::Kind::kRecord:
        parts.push_back(absl::StrCat("record ", EventName(s.event), " on ", StreamName(s.stream)));
        break;
      case DeviceStep::Kind::kWait:
        parts.push_back(absl::StrCat("wait ", EventName(s.event), " on ", StreamName(s.stream)));
        break;
      case DeviceStep::Kind::kWork:
        parts.push_back(absl::StrCat(WorkName(s.work), s.bucket >= 0 ? absl::StrCat(" ", s.bucket) : "",
                                     " on ", StreamName(s.stream)));
        break;
    }
  }
  return absl::StrJoin(parts, "; ");
}

std::vector<DeviceStep> PlanPointToPoint(P2pDirection direction, int p2p) {
  const StreamRef stream{StreamKind::kP2p, p2p};
  return {Record(kCompute, EventSlot::kReady), WaitFor(stream, EventSlot::kReady),
          Work(stream, direction == P2pDirection::kSend ? DeviceWork::kSend : DeviceWork::kRecv),
          Record(stream, EventSlot::kDone)};
}

std::vector<DeviceStep> PlanOneGpuCopy(bool send_pending) {
  const StreamRef stream{StreamKind::kP2p, 0};
  std::vector<DeviceStep> steps = {WaitFor(stream, EventSlot::kReady),
                                   WaitFor(stream, EventSlot::kPeerReady),
                                   Work(stream, DeviceWork::kCopy), Record(stream, EventSlot::kDone)};
  if (send_pending) steps.push_back(Record(stream, EventSlot::kPeerDone));
  return steps;
}

std::vector<DeviceStep> PlanOneGpuStagedSend() {
  const StreamRef stream{StreamKind::kP2p, 0};
  return {WaitFor(stream, EventSlot::kReady), Work(stream, DeviceWork::kStage),
          Record(stream, EventSlot::kDone)};
}

absl::string_view WireTypeName(WireType wire) { return wire == WireType::kBf16 ? "bf16" : "fp32"; }
int WireTypeBytes(WireType wire) { return wire == WireType::kBf16 ? 2 : 4; }

absl::StatusOr<ReductionPlan> PlanReduction(CollectiveKind kind, WireType wire, int64_t elements,
                                            int members, int buckets) {
  if (elements < 0 || members < 1 || buckets < 1) {
    return absl::InvalidArgumentError(absl::StrCat("a reduction of ", elements, " elements over ",
                                                   members, " members in ", buckets,
                                                   " buckets"));
  }
  ReductionPlan plan;
  plan.kind = kind;
  plan.wire = wire;
  int64_t span = elements;  // what the buckets cut: the buffer or one shard
  if (kind == CollectiveKind::kReduceScatter) {
    plan.shard = elements / members;
    span = plan.shard;
    plan.elements = plan.shard * members;
  } else {
    plan.elements = elements;
  }
  plan.wire_bytes = plan.elements * WireTypeBytes(wire);
  const int64_t k = std::min<int64_t>(buckets, span);
  if (k > 0) {
    const int64_t size = span / k;
    for (int64_t b = 0; b < k; ++b) {
      plan.buckets.push_back({b * size, b + 1 == k ? span - b * size : size});
    }
  }
  return plan;
}

std::vector<DeviceStep> PlanReductionSteps(const ReductionPlan& plan) {
  std::vector<DeviceStep> steps = {Record(kCompute, EventSlot::kReady),
                                   WaitFor(kReduce, EventSlot::kReady)};
  if (plan.converts()) steps.push_back(Work(kReduce, DeviceWork::kToWire));
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    steps.push_back(Work(kReduce, DeviceWork::kCollective, static_cast<int>(b)));
  }
  if (plan.converts()) steps.push_back(Work(kReduce, DeviceWork::kFromWire));
  steps.push_back(Record(kReduce, EventSlot::kDone));
  return steps;
}

}  // namespace jitpipe
