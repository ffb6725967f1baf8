#include "scheduler/ir/schedule_json.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/json_document.h"
#include "base/status_macros.h"
#include "scheduler/ir/program_facts.h"
#include "scheduler/ir/schedule_json_scan.h"

namespace jitpipe {
namespace {

constexpr int64_t kMaxCount = std::numeric_limits<int32_t>::max();

// Where an action is, for messages: `rank 1, index 3 ("0F1")`.
std::string Describe(const Schedule& s, ActionPosition at) {
  return WhereInProgram(at.rank, static_cast<int64_t>(at.index),
                        JsonQuote(s.ranks[at.rank][at.index].ToString()));
}

// A key that is present and not null.
bool Has(const nlohmann::json& doc, const char* key) {
  auto it = doc.find(key);
  return it != doc.end() && !it->is_null();
}

absl::StatusOr<RankProgram> ParseProgram(const nlohmann::json& list, int rank) {
  if (!list.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, ": the program must be an array of action strings"));
  }
  RankProgram program;
  program.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& item = list[i];
    if (item.is_null()) {
      program.push_back(Action::Bubble());
      continue;
    }
    if (!item.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          WhereInProgram(rank, static_cast<int64_t>(i),
                         AbbreviateForMessage(item.dump(
                             -1, ' ', false, nlohmann::json::error_handler_t::replace))),
          ": expected an action string or null"));
    }
    const std::string& text = item.get_ref<const std::string&>();
    auto action = ParseAction(text);
    if (!action.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(WhereInProgram(rank, static_cast<int64_t>(i), QuoteForMessage(text)), ": ",
                       action.status().message()));
    }
    program.push_back(*std::move(action));
  }
  return program;
}

absl::StatusOr<std::vector<int>> ParseStageToRank(const nlohmann::json& doc, int64_t pp,
                                                  int64_t v) {
  const nlohmann::json& map = doc["stage_to_rank"];
  if (!map.is_array()) {
    return absl::InvalidArgumentError("\"stage_to_rank\" must be an array of ranks");
  }
  if (static_cast<int64_t>(map.size()) != pp * v) {
    return absl::InvalidArgumentError(absl::StrCat("stage_to_rank has ", map.size(),
                                                   " entries; pp ", pp, " x stages_per_rank ",
                                                   v, " = ", pp * v));
  }
  std::vector<int> stage_to_rank;
  stage_to_rank.reserve(map.size());
  for (size_t i = 0; i < map.size(); ++i) {
    ASSIGN_OR_RETURN(int64_t r,
                     AsInt(map[i], absl::StrCat("stage_to_rank[", i, "]"), 0, pp - 1));
    stage_to_rank.push_back(static_cast<int>(r));
  }
  return stage_to_rank;
}

// The optional header fields as the file writes them; empty when absent.
struct WrittenFields {
  std::optional<Placement> placement;
  std::optional<bool> lowered;
  std::optional<std::vector<int>> stage_to_rank;
};

absl::StatusOr<WrittenFields> ParseOptionalFields(const nlohmann::json& doc, int64_t pp,
                                                  int64_t v) {
  WrittenFields written;
  if (Has(doc, "placement")) {
    ASSIGN_OR_RETURN(std::string placement, GetString(doc, "placement", ""));
    ASSIGN_OR_RETURN(written.placement, ParsePlacement(placement));
  }
  if (Has(doc, "lowered")) {
    ASSIGN_OR_RETURN(written.lowered, GetBool(doc, "lowered", ""));
  }
  if (Has(doc, "stage_to_rank")) {
    ASSIGN_OR_RETURN(written.stage_to_rank, ParseStageToRank(doc, pp, v));
  }
  return written;
}

// Sets s.lowered: as written, or inferred from the programs (lowered when
// any action communicates). A written false contradicted by the programs is
// an error naming the first communication, as is a bubble in a lowered
// program.
absl::Status ResolveLowered(Schedule& s, std::optional<bool> written, const ProgramFacts& facts) {
  if (written == false && facts.first_comm) {
    const ActionPosition at = *facts.first_comm;
    return absl::InvalidArgumentError(absl::StrCat(
        "\"lowered\" is false but ", Describe(s, at), " is a ",
        KindName(s.ranks[at.rank][at.index].kind),
        "; a compute-only program has no SEND/RECV, WAIT, UNSHARD, RESHARD or REDUCE_GRAD"));
  }
  s.lowered = written.value_or(facts.first_comm.has_value());
  if (!s.lowered) return absl::OkStatus();
  for (int r = 0; r < s.pp; ++r) {
    for (size_t i = 0; i < s.ranks[r].size(); ++i) {
      if (!s.ranks[r][i].is_bubble()) continue;
      std::string why;
      if (!written) {
        why = absl::StrCat(" (lowered because ", Describe(s, *facts.first_comm), " is a ",
                           KindName(s.ranks[facts.first_comm->rank][facts.first_comm->index].kind),
                           ")");
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", r, ", index ", i, ": a bubble (null) in a lowered program", why));
    }
  }
  return absl::OkStatus();
}

// Whether stage_to_rank must come from the programs: neither it nor a
// loop or v placement is written.
bool MapFromPrograms(const WrittenFields& written) {
  return !written.stage_to_rank &&
         (!written.placement || *written.placement == Placement::kCustom);
}

// Whether every rank holds s.stages_per_rank of the stages in stage_to_rank.
bool HoldsStagesPerRank(const Schedule& s, const std::vector<int>& stage_to_rank) {
  std::vector<int> count(s.pp, 0);
  for (int r : stage_to_rank) ++count[r];
  return std::all_of(count.begin(), count.end(), [&](int n) { return n == s.stages_per_rank; });
}

// Sets s.stage_to_rank and s.placement, in this order of precedence: the
// written map (placement detected if not written); a written loop or v
// placement; the programs (where each stage's actions are; placement
// detected, or "custom" as written); the loop placement when the programs
// leave a stage out or do not give each rank stages_per_rank stages (so that
// CheckStageRanks names an action on the wrong rank). Returns what the map came from, for CheckStageRanks,
// or "" when it came from the programs themselves.
absl::StatusOr<std::string> ResolveStageToRank(Schedule& s, const WrittenFields& written,
                                               const ProgramFacts& facts) {
  if (written.stage_to_rank) {
    s.stage_to_rank = *written.stage_to_rank;
    s.placement = written.placement.value_or(DetectPlacement(s.stage_to_rank, s.pp));
    return std::string("\"stage_to_rank\"");
  }
  if (!MapFromPrograms(written)) {
    s.placement = *written.placement;
    s.stage_to_rank = StageToRank(s.placement, s.pp, s.stages_per_rank);
    return absl::StrCat("the ", PlacementName(s.placement), " placement");
  }
  auto unnamed = std::find(facts.stage_to_rank.begin(), facts.stage_to_rank.end(), kNoRank);
  if (unnamed == facts.stage_to_rank.end() &&
      (written.placement || HoldsStagesPerRank(s, facts.stage_to_rank))) {
    s.stage_to_rank = facts.stage_to_rank;
    s.placement = written.placement.value_or(DetectPlacement(s.stage_to_rank, s.pp));
    return std::string();
  }
  if (written.placement) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stage ", unnamed - facts.stage_to_rank.begin(),
        " appears in no program, so the \"custom\" placement needs \"stage_to_rank\""));
  }
  s.placement = Placement::kLoop;
  s.stage_to_rank = StageToRank(s.placement, s.pp, s.stages_per_rank);
  return std::string(
      "the loop placement (the default without \"placement\" and \"stage_to_rank\")");
}

// Every action runs on the rank its stage is placed on (`source` says what
// placed it). Stages out of range are left to validation, which names them.
absl::Status CheckStageRanks(const Schedule& s, absl::string_view source) {
  for (int r = 0; r < s.pp; ++r) {
    for (size_t i = 0; i < s.ranks[r].size(); ++i) {
      const Action& a = s.ranks[r][i];
      auto misplaced = [&](const Action& part) {
        return part.stage >= 0 && part.stage < s.num_stages() && s.RankOf(part.stage) != r;
      };
      const Action* bad = nullptr;
      if (a.is_compound()) {
        for (const Action& sub : a.sub_actions) {
          if (bad == nullptr && misplaced(sub)) bad = &sub;
        }
      } else if (!a.is_bubble() && misplaced(a)) {
        bad = &a;
      }
      if (bad == nullptr) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          Describe(s, {r, i}), ": stage ", bad->stage, " appears on rank ", r, ", but ", source,
          " puts it on rank ", s.RankOf(bad->stage)));
    }
  }
  return absl::OkStatus();
}

// Fills lowered and stage_to_rank, as written or inferred from the programs
// (ScanPrograms, as the CSV reader infers them), and checks the header
// against itself (ValidateHeader) and against the programs.
absl::StatusOr<Schedule> ResolveHeader(Schedule s, const WrittenFields& written) {
  const int64_t num_stages = int64_t{s.pp} * s.stages_per_rank;
  const int64_t actions = static_cast<int64_t>(s.TotalActions());
  if (!written.stage_to_rank && num_stages > kMaxPairsBeyondPrograms && num_stages > actions) {
    // The map is built here, so its size must be bounded by the file's.
    return absl::InvalidArgumentError(absl::StrCat(
        "pp ", s.pp, " x stages_per_rank ", s.stages_per_rank, " = ", num_stages,
        " stages, but the programs hold only ", actions,
        " actions; each stage needs a forward and a backward"));
  }
  // Only a map inferred from the programs needs their stages; otherwise the
  // scan is for the communication that makes a program lowered.
  const ScanOptions scan{.num_stages = MapFromPrograms(written) ? num_stages : 0};
  ASSIGN_OR_RETURN(ProgramFacts facts, ScanPrograms(s.ranks, scan, [&](ActionPosition at) {
                     return Describe(s, at);
                   }));
  RETURN_IF_ERROR(ResolveLowered(s, written.lowered, facts));
  ASSIGN_OR_RETURN(std::string source, ResolveStageToRank(s, written, facts));
  RETURN_IF_ERROR(ValidateHeader(s));
  if (!source.empty()) RETURN_IF_ERROR(CheckStageRanks(s, source));
  return s;
}

// The schedule `doc` describes. Its programs are read from doc["ranks"],
// or taken from *scanned_ranks when the fast path (schedule_json_scan.h)
// has read them already.
absl::StatusOr<Schedule> FromDocument(const nlohmann::json& doc,
                                      std::vector<RankProgram>* scanned_ranks) {
  RETURN_IF_ERROR(CheckFormatAndVersion(doc, kScheduleFormat, kScheduleVersion));
  Schedule s;
  if (Has(doc, "schedule")) {
    ASSIGN_OR_RETURN(s.name, GetString(doc, "schedule", ""));
  }
  ASSIGN_OR_RETURN(int64_t pp, GetInt(doc, "pp", "", 1, kMaxCount));
  ASSIGN_OR_RETURN(int64_t v, GetInt(doc, "stages_per_rank", "", 1, kMaxCount));
  ASSIGN_OR_RETURN(int64_t m, GetInt(doc, "microbatches", "", 1, kMaxCount));
  s.pp = static_cast<int>(pp);
  s.stages_per_rank = static_cast<int>(v);
  s.microbatches = static_cast<int>(m);
  if (doc.contains("chains")) {
    ASSIGN_OR_RETURN(int64_t chains, GetInt(doc, "chains", "", 1, kMaxCount));
    s.chains = static_cast<int>(chains);
  }
  if (Has(doc, "layout")) {
    ASSIGN_OR_RETURN(s.layout, GetString(doc, "layout", ""));
  }
  ASSIGN_OR_RETURN(WrittenFields written, ParseOptionalFields(doc, pp, v));

  if (scanned_ranks != nullptr) {
    if (static_cast<int64_t>(scanned_ranks->size()) != pp) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"ranks\" has ", scanned_ranks->size(), " programs but pp is ", pp));
    }
    s.ranks = std::move(*scanned_ranks);
    return ResolveHeader(std::move(s), written);
  }
  auto ranks = doc.find("ranks");
  if (ranks == doc.end() || !ranks->is_array()) {
    return absl::InvalidArgumentError("\"ranks\" must be an array with one program per rank");
  }
  if (static_cast<int64_t>(ranks->size()) != pp) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"ranks\" has ", ranks->size(), " programs but pp is ", pp));
  }
  for (size_t r = 0; r < ranks->size(); ++r) {
    ASSIGN_OR_RETURN(RankProgram program, ParseProgram((*ranks)[r], static_cast<int>(r)));
    s.ranks.push_back(std::move(program));
  }
  return ResolveHeader(std::move(s), written);
}

// Through a buffer: one hand-over per few thousand actions rather than four
// appends per action (the writer's cost was those appends' checks).
void WriteProgram(const RankProgram& program, absl::FunctionRef<void(absl::string_view)> sink) {
  char buffer[1 << 14];
  char* p = buffer;
  // Room after `full` for a separator, the quotes and a simple action.
  const char* const full = buffer + sizeof(buffer) - (kMaxSimpleActionText + 8);
  auto flush = [&] {
    sink(absl::string_view(buffer, static_cast<size_t>(p - buffer)));
    p = buffer;
  };
  *p++ = '[';
  for (size_t i = 0; i < program.size(); ++i) {
    if (p >= full) flush();
    if (i > 0) {
      *p++ = ',';
      *p++ = ' ';
    }
    const Action& action = program[i];
    if (action.is_bubble()) {
      std::memcpy(p, "null", 4);
      p += 4;
      continue;
    }
    *p++ = '"';
    if (char* end = WriteSimpleActionText(action, p)) {
      p = end;
    } else {
      flush();
      sink(action.ToString());
    }
    *p++ = '"';
  }
  *p++ = ']';
  flush();
}

}  // namespace

// Well-formed documents take the fast path; anything it does not take --
// every invalid document among them -- is read the exact way, whose errors
// are the reader's messages (schedule_json_scan.h). A document the fast
// path reads but the header checks refuse is read again the exact way too,
// so that which error comes first does not depend on the path.
absl::StatusOr<Schedule> ParseScheduleJson(absl::string_view text) {
  if (std::optional<ScannedScheduleJson> scanned = ScanScheduleJson(text)) {
    absl::StatusOr<Schedule> schedule = FromDocument(scanned->header, &scanned->ranks);
    if (schedule.ok()) return schedule;
  }
  ASSIGN_OR_RETURN(nlohmann::json doc, ParseJsonDocument(text));
  return FromDocument(doc, nullptr);
}

void WriteScheduleJson(const Schedule& s, absl::FunctionRef<void(absl::string_view)> sink) {
  std::string header = absl::StrCat("{\"format\": \"", kScheduleFormat, "\", \"version\": ",
                                    kScheduleVersion, ", \"schedule\": ", JsonQuote(s.name), ",\n");
  absl::StrAppend(&header, " \"pp\": ", s.pp, ", \"stages_per_rank\": ", s.stages_per_rank,
                  ", \"microbatches\": ", s.microbatches);
  if (s.chains != 1) absl::StrAppend(&header, ", \"chains\": ", s.chains);
  absl::StrAppend(&header, ", \"placement\": \"", PlacementName(s.placement), "\",\n");
  header += " \"stage_to_rank\": [";
  for (size_t i = 0; i < s.stage_to_rank.size(); ++i) {
    absl::StrAppend(&header, i > 0 ? ", " : "", s.stage_to_rank[i]);
  }
  absl::StrAppend(&header, "], \"lowered\": ", s.lowered ? "true" : "false");
  if (!s.layout.empty()) absl::StrAppend(&header, ",\n \"layout\": ", JsonQuote(s.layout));
  header += ",\n \"ranks\": [\n";
  sink(header);
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    sink("  ");
    WriteProgram(s.ranks[r], sink);
    sink(r + 1 < s.ranks.size() ? ",\n" : "\n");
  }
  sink(" ]}\n");
}

std::string ScheduleToJson(const Schedule& s) {
  std::string out;
  // Lowered actions take 10 to 16 bytes ("12SEND_F345", quotes, ", ");
  // capacity never written is never touched.
  out.reserve(256 + s.stage_to_rank.size() * 6 + s.TotalActions() * 16);
  WriteScheduleJson(s, [&out](absl::string_view piece) { out.append(piece.data(), piece.size()); });
  return out;
}

}  // namespace jitpipe
