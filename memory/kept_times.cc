// Peak live bytes and kept time points (kept_times.h).
#include "memory/kept_times.h"

#include <algorithm>

namespace jitpipe {

int64_t PeakLive(absl::Span<const LiveInterval> intervals, int num_times) {
  std::vector<int64_t> delta(num_times + 1, 0);
  for (const LiveInterval& in : intervals) {
    delta[in.start] += in.bytes;
    delta[in.end + 1] -= in.bytes;
  }
  int64_t live = 0, peak = 0;
  for (int t = 0; t < num_times; ++t) peak = std::max(peak, live += delta[t]);
  return peak;
}

KeptTimes KeepTimes(absl::Span<const LiveInterval> intervals, int num_times) {
  std::vector<char> starts(num_times, 0), ends(num_times, 0);
  for (const LiveInterval& in : intervals) {
    if (in.bytes == 0) continue;
    starts[in.start] = 1;
    ends[in.end] = 1;
  }
  std::vector<char> kept(num_times, 0);
  int last_start = -1;
  for (int t = 0; t < num_times; ++t) {
    if (starts[t]) last_start = t;
    if (ends[t] && last_start >= 0) kept[last_start] = 1;
  }
  // point_before[t]: kept points <= t, minus one; so a start maps to
  // point_before[t - 1] + 1 and an end to point_before[t].
  std::vector<int32_t> point_before(num_times + 1, -1);
  for (int t = 0; t < num_times; ++t) point_before[t + 1] = point_before[t] + kept[t];
  KeptTimes out;
  out.num_points = std::max(point_before[num_times] + 1, 1);
  out.start.assign(intervals.size(), 0);
  out.end.assign(intervals.size(), 0);
  for (size_t id = 0; id < intervals.size(); ++id) {
    if (intervals[id].bytes == 0) continue;
    out.start[id] = point_before[intervals[id].start] + 1;
    out.end[id] = point_before[intervals[id].end + 1];
  }
  return out;
}

}  // namespace jitpipe
