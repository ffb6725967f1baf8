#include "tools/calibration_report.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/json_document.h"
#include "base/status_macros.h"

namespace jitpipe::cli {
namespace {

using Json = nlohmann::ordered_json;

absl::Status Bad(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

absl::StatusOr<double> GetTime(const nlohmann::json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number() || !std::isfinite(it->get<double>()) ||
      it->get<double>() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ".", key, " must be a number of microseconds >= 0"));
  }
  return it->get<double>();
}

absl::StatusOr<MeasuredStage> StageFrom(const nlohmann::json& s, const std::string& where) {
  if (!s.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, " is not an object"));
  MeasuredStage m;
  ASSIGN_OR_RETURN(int64_t first, GetInt(s, "first_layer", where, 0, 1 << 30));
  ASSIGN_OR_RETURN(int64_t end, GetInt(s, "end_layer", where, 0, 1 << 30));
  m.first_layer = static_cast<int>(first);
  m.end_layer = static_cast<int>(end);
  ASSIGN_OR_RETURN(m.forward_us, GetTime(s, "forward_us", where));
  ASSIGN_OR_RETURN(m.backward_input_us, GetTime(s, "backward_input_us", where));
  ASSIGN_OR_RETURN(m.backward_weight_us, GetTime(s, "backward_weight_us", where));
  ASSIGN_OR_RETURN(m.backward_us, GetTime(s, "backward_us", where));
  ASSIGN_OR_RETURN(int64_t inputs, GetInt(s, "backward_input_calls", where, 0, int64_t{1} << 40));
  ASSIGN_OR_RETURN(int64_t weights, GetInt(s, "backward_weight_calls", where, 0, int64_t{1} << 40));
  m.split_backward = inputs > 0 && weights > 0;
  return m;
}

}  // namespace

Json StageTimesJson(const std::vector<StageCallTimes>& times,
                    const std::optional<Partition>& partition, int skipped_steps,
                    int counted_steps) {
  Json stages = Json::array();
  for (const StageCallTimes& t : times) {
    Json s{{"stage", t.stage}};
    if (partition.has_value()) {
      const int k = t.stage % partition->num_stages();
      s["first_layer"] = partition->begin(k);
      s["end_layer"] = partition->end(k);
    }
    s["forward_us"] = t.forward_us;
    s["backward_input_us"] = t.backward_input_us;
    s["backward_weight_us"] = t.backward_weight_us;
    s["backward_us"] = t.backward_us;
    s["forward_calls"] = t.forward_calls;
    s["backward_input_calls"] = t.backward_input_calls;
    s["backward_weight_calls"] = t.backward_weight_calls;
    s["backward_calls"] = t.backward_calls;
    stages.push_back(std::move(s));
  }
  return Json{{"skipped_steps", skipped_steps},
              {"counted_steps", counted_steps},
              {"stages", std::move(stages)}};
}

Json TransformerShapeJson(const TransformerShape& x) {
  return Json{{"layers", x.layers},
              {"hidden", x.hidden},
              {"heads", x.heads},
              {"kv_heads", x.KvHeads()},
              {"ffn", x.Ffn()},
              {"vocab", x.vocab},
              {"seq", x.seq},
              {"microbatch_size", x.microbatch_size},
              {"tp", x.tp},
              {"sequence_parallel", x.sequence_parallel},
              {"swiglu", x.swiglu},
              {"rmsnorm", x.rmsnorm},
              {"recompute", RecomputeName(x.recompute)},
              {"dtype", DtypeName(x.dtype)},
              {"attention", AttentionImplName(x.attention)},
              {"dropout", x.dropout},
              {"loss_dtype", DtypeName(x.loss_dtype)},
              {"tied_embeddings", x.tied_embeddings}};
}

absl::StatusOr<ReplayCalibrationInput> ReadReplayForCalibration(const std::string& path,
                                                                const std::string& report,
                                                                const TransformerShape& flags) {
  absl::StatusOr<nlohmann::json> doc = ParseJsonDocument(report);
  if (!doc.ok()) return Bad(path, std::string(doc.status().message()));
  if (!doc->is_object()) return Bad(path, "is not the JSON object `jitpipe replay --json` prints");
  auto shape = doc->find("transformer_shape");
  if (shape == doc->end() || !shape->is_object()) {
    return Bad(path, "has no transformer_shape: --calibrate takes the --json output of `jitpipe "
                     "replay --stage transformer`");
  }
  // The flags' shape field by field, so the message names the one that differs.
  const Json expected = TransformerShapeJson(flags);
  for (const auto& [key, value] : expected.items()) {
    auto got = shape->find(key);
    if (got == shape->end() || *got != value) {
      return Bad(path, absl::StrCat("was measured with ", key, " ",
                                    got == shape->end() ? "(none)" : got->dump(), "; the flags give ",
                                    key, " ", value.dump(),
                                    ": calibrate with the shape flags the replay ran"));
    }
  }
  auto times = doc->find("stage_times");
  if (times == doc->end() || !times->is_object() || !times->contains("stages") ||
      !(*times)["stages"].is_array()) {
    return Bad(path, "has no stage_times (a replay on a host backend, inproc or mpi, reports them)");
  }
  ReplayCalibrationInput out;
  ASSIGN_OR_RETURN(int64_t counted, GetInt(*times, "counted_steps", "stage_times", 1, 1 << 30));
  out.counted_steps = static_cast<int>(counted);
  const nlohmann::json& stages = (*times)["stages"];
  for (size_t i = 0; i < stages.size(); ++i) {
    absl::StatusOr<MeasuredStage> s = StageFrom(stages[i], absl::StrCat("stage_times.stages[", i, "]"));
    if (!s.ok()) return Bad(path, std::string(s.status().message()));
    out.stages.push_back(*s);
  }
  if (out.stages.empty()) return Bad(path, "stage_times.stages is empty");
  return out;
}

}  // namespace jitpipe::cli
