#include "scheduler/ir/schedule_json.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/json_document.h"
#include "base/status_macros.h"

namespace jitpipe {
namespace {

constexpr int64_t kMaxCount = std::numeric_limits<int32_t>::max();

absl::StatusOr<RankProgram> ParseProgram(const nlohmann::json& list, int rank, bool lowered) {
  if (!list.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, ": the program must be an array of action strings"));
  }
  RankProgram program;
  program.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& item = list[i];
    if (item.is_null()) {
      if (lowered) {
        return absl::InvalidArgumentError(absl::StrCat(
            "rank ", rank, ", index ", i, ": a bubble (null) in a lowered program"));
      }
      program.push_back(Action::Bubble());
      continue;
    }
    if (!item.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", rank, ", index ", i, " (",
          item.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
          "): expected an action string or null"));
    }
    const std::string& text = item.get_ref<const std::string&>();
    auto action = ParseAction(text);
    if (!action.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank, ", index ", i, " (",
                                                     JsonQuote(text), "): ",
                                                     action.status().message()));
    }
    program.push_back(*std::move(action));
  }
  return program;
}

absl::StatusOr<Schedule> FromDocument(const nlohmann::json& doc) {
  RETURN_IF_ERROR(CheckFormatAndVersion(doc, kScheduleFormat, kScheduleVersion));
  Schedule s;
  if (auto it = doc.find("schedule"); it != doc.end() && !it->is_null()) {
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
  ASSIGN_OR_RETURN(std::string placement, GetString(doc, "placement", ""));
  ASSIGN_OR_RETURN(s.placement, ParsePlacement(placement));
  ASSIGN_OR_RETURN(s.lowered, GetBool(doc, "lowered", ""));

  auto map = doc.find("stage_to_rank");
  if (map == doc.end() || !map->is_array()) {
    return absl::InvalidArgumentError("\"stage_to_rank\" must be an array of ranks");
  }
  if (static_cast<int64_t>(map->size()) != pp * v) {
    return absl::InvalidArgumentError(absl::StrCat("stage_to_rank has ", map->size(),
                                                   " entries; pp ", pp, " x stages_per_rank ",
                                                   v, " = ", pp * v));
  }
  for (size_t i = 0; i < map->size(); ++i) {
    ASSIGN_OR_RETURN(int64_t r,
                     AsInt((*map)[i], absl::StrCat("stage_to_rank[", i, "]"), 0, pp - 1));
    s.stage_to_rank.push_back(static_cast<int>(r));
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
    ASSIGN_OR_RETURN(RankProgram program,
                     ParseProgram((*ranks)[r], static_cast<int>(r), s.lowered));
    s.ranks.push_back(std::move(program));
  }
  RETURN_IF_ERROR(ValidateHeader(s));
  return s;
}

void AppendProgram(std::string& out, const RankProgram& program) {
  out += "[";
  for (size_t i = 0; i < program.size(); ++i) {
    if (i > 0) out += ", ";
    if (program[i].is_bubble()) {
      out += "null";
    } else {
      absl::StrAppend(&out, "\"", program[i].ToString(), "\"");
    }
  }
  out += "]";
}

}  // namespace

absl::StatusOr<Schedule> ParseScheduleJson(absl::string_view text) {
  ASSIGN_OR_RETURN(nlohmann::json doc, ParseJsonDocument(text));
  return FromDocument(doc);
}

std::string ScheduleToJson(const Schedule& s) {
  std::string out;
  out.reserve(64 + s.TotalActions() * 10);
  absl::StrAppend(&out, "{\"format\": \"", kScheduleFormat, "\", \"version\": ",
                  kScheduleVersion, ", \"schedule\": ", JsonQuote(s.name), ",\n");
  absl::StrAppend(&out, " \"pp\": ", s.pp, ", \"stages_per_rank\": ", s.stages_per_rank,
                  ", \"microbatches\": ", s.microbatches);
  if (s.chains != 1) absl::StrAppend(&out, ", \"chains\": ", s.chains);
  absl::StrAppend(&out, ", \"placement\": \"", PlacementName(s.placement), "\",\n");
  out += " \"stage_to_rank\": [";
  for (size_t i = 0; i < s.stage_to_rank.size(); ++i) {
    absl::StrAppend(&out, i > 0 ? ", " : "", s.stage_to_rank[i]);
  }
  absl::StrAppend(&out, "], \"lowered\": ", s.lowered ? "true" : "false", ",\n \"ranks\": [\n");
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    out += "  ";
    AppendProgram(out, s.ranks[r]);
    out += r + 1 < s.ranks.size() ? ",\n" : "\n";
  }
  out += " ]}\n";
  return out;
}

}  // namespace jitpipe
