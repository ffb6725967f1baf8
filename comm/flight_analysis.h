// Reading flight records back and naming what never matched
// (`jitpipe fr-analyze DIR`).
//
// Point-to-point operations pair by per-peer sequence: the k-th send from A
// to B with the k-th receive at B from A. A receive whose send the peer
// never posted is the classic hang: the analysis names the waiting rank, its
// program index and action, and where the peer stood ("rank 2 waits at index
// 17 (5RECV_B3) for rank 3; rank 3's last op was index 15 (6SEND_F4)").
// Among several waiting ranks it picks the root: the one whose peer is not
// itself waiting on a receive (a chain of waits ends there); ranks waiting
// on each other in a cycle are reported as a deadlock. Also reported: sends
// never received, pairs whose tags differ (a misordered schedule),
// collectives some group member never joined, ranks without a record.
#ifndef JITPIPE_COMM_FLIGHT_ANALYSIS_H_
#define JITPIPE_COMM_FLIGHT_ANALYSIS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/flight_recorder.h"

namespace jitpipe {

struct FlightRecord {
  int rank = -1;
  int world_size = 0;
  // Records without the field predate it and were paired by order.
  FlightMatching matching = FlightMatching::kByOrder;
  std::string reason;
  int position_index = -1;
  std::string position_action;
  std::vector<FlightEntry> entries;
};

// Parses one rank's record. Errors: InvalidArgument naming the field, a
// wrong format or a newer version.
absl::StatusOr<FlightRecord> ParseFlightRecord(absl::string_view json);

// Reads DIR/rank_*.json. Errors: NotFound when DIR holds no record; the
// parse error prefixed with the file name otherwise.
absl::StatusOr<std::vector<FlightRecord>> LoadFlightRecords(const std::string& dir);

struct FlightAnalysis {
  std::string first;                  // the root cause, "" when all matched
  std::vector<std::string> findings;  // everything else, most important first
  bool ok() const { return first.empty() && findings.empty(); }
  std::string ToString() const;
};

FlightAnalysis AnalyzeFlightRecords(const std::vector<FlightRecord>& records);

}  // namespace jitpipe

#endif  // JITPIPE_COMM_FLIGHT_ANALYSIS_H_
