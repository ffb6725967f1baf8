#include "comm/flight_analysis.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/atomic_file.h"
#include "base/json_document.h"
#include "base/status_macros.h"

namespace jitpipe {
namespace {

absl::StatusOr<FlightOpKind> ParseKind(const std::string& s) {
  for (FlightOpKind k : {FlightOpKind::kSend, FlightOpKind::kRecv, FlightOpKind::kAllReduce,
                         FlightOpKind::kReduceScatter}) {
    if (FlightOpKindName(k) == s) return k;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown entry kind \"", s, "\""));
}

absl::StatusOr<FlightOpState> ParseState(const std::string& s) {
  for (FlightOpState st : {FlightOpState::kPosted, FlightOpState::kCompleted,
                           FlightOpState::kFailed}) {
    if (FlightOpStateName(st) == s) return st;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown entry state \"", s, "\""));
}

absl::StatusOr<FlightEntry> ParseEntry(const nlohmann::json& j, size_t i) {
  const std::string path = absl::StrCat("entries[", i, "]");
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, " must be an object"));
  FlightEntry e;
  ASSIGN_OR_RETURN(int64_t seq, GetInt(j, "seq", path, 0, INT64_MAX));
  ASSIGN_OR_RETURN(std::string kind, GetString(j, "kind", path));
  ASSIGN_OR_RETURN(e.kind, ParseKind(kind));
  ASSIGN_OR_RETURN(int64_t peer_seq, GetInt(j, "peer_seq", path, 0, INT64_MAX));
  ASSIGN_OR_RETURN(e.bytes, GetInt(j, "bytes", path, 0, INT64_MAX));
  ASSIGN_OR_RETURN(int64_t tag, GetInt(j, "tag", path, 0, INT64_MAX));
  ASSIGN_OR_RETURN(int64_t index, GetInt(j, "index", path, -1, INT32_MAX));
  ASSIGN_OR_RETURN(e.info.action, GetString(j, "action", path));
  ASSIGN_OR_RETURN(std::string state, GetString(j, "state", path));
  ASSIGN_OR_RETURN(e.state, ParseState(state));
  e.seq = static_cast<uint64_t>(seq);
  e.peer_seq = static_cast<uint64_t>(peer_seq);
  e.tag = static_cast<uint64_t>(tag);
  e.info.program_index = static_cast<int>(index);
  if (j.contains("peer")) {
    ASSIGN_OR_RETURN(int64_t peer, GetInt(j, "peer", path, -1, INT32_MAX));
    e.peer = static_cast<int>(peer);
  } else if (j.contains("group") && j["group"].is_array()) {
    for (const auto& r : j["group"]) {
      ASSIGN_OR_RETURN(int64_t rank, AsInt(r, absl::StrCat(path, ".group"), 0, INT32_MAX));
      e.group.push_back(static_cast<int>(rank));
    }
  }
  if (j.contains("posted_us") && j["posted_us"].is_number()) e.posted_us = j["posted_us"];
  if (j.contains("error") && j["error"].is_string()) e.error = j["error"];
  return e;
}

// "index 15 (6SEND_F4)" or "no operation yet".
std::string Describe(const FlightEntry& e) {
  return absl::StrCat("index ", e.info.program_index, " (", e.info.action, ")");
}

class Analyzer {
 public:
  explicit Analyzer(const std::vector<FlightRecord>& records) {
    for (const FlightRecord& r : records) {
      by_rank_[r.rank] = &r;
      world_ = std::max(world_, r.world_size);
    }
  }

  FlightAnalysis Run() {
    for (int r = 0; r < world_; ++r) {
      if (!by_rank_.count(r)) missing_.push_back(absl::StrCat("rank ", r, " wrote no flight record"));
    }
    for (const auto& [rank, record] : by_rank_) {
      for (const FlightEntry& e : record->entries) CheckPointToPoint(*record, e);
    }
    CheckCollectives();
    return Summarise();
  }

 private:
  struct Wait {
    int rank;
    int peer;
    std::string text;
  };

  // The entry of `rank` of `kind` with `peer` and `tag`: the one a
  // tag-matching transport pairs.
  const FlightEntry* FindByTag(int rank, FlightOpKind kind, int peer, uint64_t tag) const {
    auto it = by_rank_.find(rank);
    if (it == by_rank_.end()) return nullptr;
    for (const FlightEntry& e : it->second->entries) {
      if (e.kind == kind && e.peer == peer && e.tag == tag) return &e;
    }
    return nullptr;
  }

  const FlightEntry* Find(int rank, FlightOpKind kind, int peer, uint64_t peer_seq) const {
    auto it = by_rank_.find(rank);
    if (it == by_rank_.end()) return nullptr;
    for (const FlightEntry& e : it->second->entries) {
      if (e.kind == kind && e.peer == peer && e.peer_seq == peer_seq) return &e;
    }
    return nullptr;
  }

  // Whether `rank` ever posted the peer_seq-th op of `kind` to `peer`: its
  // record holds a later one, even if this one was evicted from the ring.
  bool Posted(int rank, FlightOpKind kind, int peer, uint64_t peer_seq) const {
    const FlightRecord* r = by_rank_.at(rank);
    return std::any_of(r->entries.begin(), r->entries.end(), [&](const FlightEntry& e) {
      return e.kind == kind && e.peer == peer && e.peer_seq >= peer_seq;
    });
  }

  std::string WhereIs(int rank) const {
    const FlightRecord* r = by_rank_.at(rank);
    std::string out = absl::StrCat("rank ", rank, "'s last op was ");
    if (r->entries.empty()) {
      absl::StrAppend(&out, "none");
    } else {
      absl::StrAppend(&out, Describe(r->entries.back()));
    }
    if (r->position_index >= 0) {
      absl::StrAppend(&out, ", and it is at index ", r->position_index, " (", r->position_action,
                      ")");
    }
    return out;
  }

  void CheckPointToPoint(const FlightRecord& record, const FlightEntry& e) {
    if (e.kind != FlightOpKind::kSend && e.kind != FlightOpKind::kRecv) return;
    const bool recv = e.kind == FlightOpKind::kRecv;
    const FlightOpKind other = recv ? FlightOpKind::kSend : FlightOpKind::kRecv;
    if (!by_rank_.count(e.peer)) {
      // A rank without a record died or stopped answering: an operation
      // still waiting on it points at the culprit (Summarise puts it first).
      if (e.state != FlightOpState::kCompleted && e.peer >= 0) {
        waits_on_missing_.push_back(
            {record.rank, e.peer,
             absl::StrCat("rank ", record.rank, " waits at ", Describe(e), " for it")});
      }
      return;
    }
    // Pair as the transport did (the record says how): a receive posted
    // out of order by --recv jit still finds its send by tag.
    const bool by_tag = record.matching == FlightMatching::kByTag;
    const FlightEntry* match = by_tag ? FindByTag(e.peer, other, record.rank, e.tag)
                                      : Find(e.peer, other, record.rank, e.peer_seq);
    if (match != nullptr) {
      if (match->tag != e.tag && recv) {
        mismatches_.push_back(absl::StrCat(
            "rank ", record.rank, "'s receive #", e.peer_seq, " from rank ", e.peer, " at ",
            Describe(e), " pairs with rank ", e.peer, "'s send at ", Describe(*match),
            ", a different operation (tag ", e.tag, " vs ", match->tag, ")"));
      }
      return;
    }
    if (e.state == FlightOpState::kCompleted ||
        (!by_tag && Posted(e.peer, other, record.rank, e.peer_seq))) {
      return;  // matched long ago; the partner fell out of the ring
    }
    if (recv) {
      waits_.push_back({record.rank, e.peer,
                        absl::StrCat("rank ", record.rank, " waits at ", Describe(e),
                                     " for rank ", e.peer, "; ", WhereIs(e.peer))});
    } else {
      unreceived_.push_back(absl::StrCat("rank ", record.rank, "'s send at ", Describe(e),
                                         " to rank ", e.peer, " was never received; ",
                                         WhereIs(e.peer)));
    }
  }

  void CheckCollectives() {
    // group -> rank -> number of collectives posted
    std::map<std::vector<int>, std::map<int, uint64_t>> posted;
    for (const auto& [rank, record] : by_rank_) {
      for (const FlightEntry& e : record->entries) {
        if (e.group.empty()) continue;
        uint64_t& n = posted[e.group][rank];
        n = std::max(n, e.peer_seq + 1);
      }
    }
    for (const auto& [group, counts] : posted) {
      uint64_t most = 0;
      for (const auto& [rank, n] : counts) most = std::max(most, n);
      for (int rank : group) {
        if (!by_rank_.count(rank)) continue;
        uint64_t n = counts.count(rank) ? counts.at(rank) : 0;
        if (n < most) {
          collective_.push_back(absl::StrCat("rank ", rank, " joined ", n, " collectives of group [",
                                             absl::StrJoin(group, ","), "], others ", most, "; ",
                                             WhereIs(rank)));
        }
      }
    }
  }

  // The root: a rank that wrote no record while others wait on it (it died
  // or stopped answering); else a wait whose peer is not waiting itself; a
  // cycle otherwise.
  FlightAnalysis Summarise() {
    FlightAnalysis out;
    if (!waits_on_missing_.empty()) {
      // The silent rank most waited on (the lowest on a tie).
      std::map<int, std::vector<std::string>> waiters;
      for (const Wait& w : waits_on_missing_) waiters[w.peer].push_back(w.text);
      int culprit = waiters.begin()->first;
      for (const auto& [rank, list] : waiters) {
        if (list.size() > waiters[culprit].size()) culprit = rank;
      }
      const std::vector<std::string>& by = waiters[culprit];
      out.first = absl::StrCat("rank ", culprit,
                               " wrote no flight record: it died or stopped answering; ",
                               by.front(), by.size() > 1
                                               ? absl::StrCat(" (and ", by.size() - 1,
                                                              " more operations wait on it)")
                                               : "");
      const std::string silent = absl::StrCat("rank ", culprit, " wrote no flight record");
      missing_.erase(std::remove(missing_.begin(), missing_.end(), silent), missing_.end());
    }
    std::set<int> waiting;
    for (const Wait& w : waits_) waiting.insert(w.rank);
    std::vector<std::string> rest;
    for (const Wait& w : waits_) {
      if (out.first.empty() && !waiting.count(w.peer)) {
        out.first = w.text;
      } else {
        rest.push_back(w.text);
      }
    }
    if (out.first.empty() && !waits_.empty()) {
      std::vector<std::string> parts;
      for (const Wait& w : waits_) parts.push_back(w.text);
      out.first = absl::StrCat("deadlock: ranks wait on each other: ", absl::StrJoin(parts, "; "));
      rest.clear();
    }
    for (auto* list : {&mismatches_, &rest, &unreceived_, &collective_, &missing_}) {
      out.findings.insert(out.findings.end(), list->begin(), list->end());
    }
    if (out.first.empty() && !out.findings.empty()) {
      out.first = out.findings.front();
      out.findings.erase(out.findings.begin());
    }
    return out;
  }

  std::map<int, const FlightRecord*> by_rank_;
  int world_ = 0;
  std::vector<Wait> waits_;
  std::vector<Wait> waits_on_missing_;  // pending operations whose peer wrote no record
  std::vector<std::string> mismatches_, unreceived_, collective_, missing_;
};

}  // namespace

absl::StatusOr<FlightRecord> ParseFlightRecord(absl::string_view json) {
  ASSIGN_OR_RETURN(nlohmann::json doc, ParseJsonDocument(json));
  RETURN_IF_ERROR(CheckFormatAndVersion(doc, kFlightRecordFormat, kFlightRecordVersion));
  FlightRecord r;
  ASSIGN_OR_RETURN(int64_t rank, GetInt(doc, "rank", "", 0, INT32_MAX));
  ASSIGN_OR_RETURN(int64_t world, GetInt(doc, "world_size", "", 1, INT32_MAX));
  r.rank = static_cast<int>(rank);
  r.world_size = static_cast<int>(world);
  if (doc.contains("reason") && doc["reason"].is_string()) r.reason = doc["reason"];
  if (doc.contains("matching")) {
    ASSIGN_OR_RETURN(std::string matching, GetString(doc, "matching", ""));
    if (matching == "tag") {
      r.matching = FlightMatching::kByTag;
    } else if (matching != "order") {
      return absl::InvalidArgumentError(
          absl::StrCat("\"matching\" is \"", matching, "\"; expected tag or order"));
    }
  }
  if (auto p = doc.find("position"); p != doc.end() && p->is_object()) {
    ASSIGN_OR_RETURN(int64_t index, GetInt(*p, "index", "position", -1, INT32_MAX));
    r.position_index = static_cast<int>(index);
    ASSIGN_OR_RETURN(r.position_action, GetString(*p, "action", "position"));
  }
  auto entries = doc.find("entries");
  if (entries == doc.end() || !entries->is_array()) {
    return absl::InvalidArgumentError("\"entries\" must be an array");
  }
  for (size_t i = 0; i < entries->size(); ++i) {
    ASSIGN_OR_RETURN(FlightEntry e, ParseEntry((*entries)[i], i));
    r.entries.push_back(std::move(e));
  }
  return r;
}

absl::StatusOr<std::vector<FlightRecord>> LoadFlightRecords(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (absl::StartsWith(name, "rank_") && absl::EndsWith(name, ".json")) {
      files.push_back(entry.path().string());
    }
  }
  if (ec) return absl::NotFoundError(absl::StrCat(dir, ": ", ec.message()));
  if (files.empty()) return absl::NotFoundError(absl::StrCat(dir, ": no rank_*.json flight records"));
  std::sort(files.begin(), files.end());
  std::vector<FlightRecord> records;
  for (const std::string& file : files) {
    ASSIGN_OR_RETURN(std::string text, ReadFile(file));
    absl::StatusOr<FlightRecord> record = ParseFlightRecord(text);
    if (!record.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": ", record.status().message()));
    }
    records.push_back(*std::move(record));
  }
  return records;
}

std::string FlightAnalysis::ToString() const {
  if (ok()) return "all operations matched\n";
  std::string out = absl::StrCat("first unmatched: ", first, "\n");
  for (const std::string& f : findings) absl::StrAppend(&out, "  also: ", f, "\n");
  return out;
}

FlightAnalysis AnalyzeFlightRecords(const std::vector<FlightRecord>& records) {
  return Analyzer(records).Run();
}

}  // namespace jitpipe
