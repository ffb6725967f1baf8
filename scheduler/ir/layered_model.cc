#include "scheduler/ir/layered_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/json_document.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"
#include "scheduler/ir/model_fields.h"

namespace jitpipe {
namespace {

using model_fields::CheckBytes;
using model_fields::CheckLinks;
using model_fields::CheckTime;
using model_fields::CheckWholeElements;
using model_fields::Field;
using model_fields::Found;
using model_fields::NotAWholeNumber;
using model_fields::ParseDataParallel;
using model_fields::ParseLink;
using model_fields::ReadBytes;
using model_fields::ReadDtype;
using model_fields::ReadTime;
using model_fields::Section;
using model_fields::WholeNumber;

using Json = nlohmann::ordered_json;

absl::Status MustBeObject(const nlohmann::json& value, absl::string_view path) {
  if (value.is_object()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("\"", path, "\" must be an object, found ", Found(value)));
}

absl::Status CheckLayer(const LayerCost& layer, const std::string& path, Dtype param_dtype);

// One layer object; its ranges are checked here so that errors name the
// file's path ("layers[1].block[0].stash_bytes").
absl::StatusOr<LayerCost> ParseLayer(const nlohmann::json& obj, absl::string_view path,
                                     LayerKind kind, Dtype param_dtype) {
  RETURN_IF_ERROR(MustBeObject(obj, path));
  LayerCost layer;
  layer.kind = kind;
  if (obj.contains("name")) {
    ASSIGN_OR_RETURN(layer.name, GetString(obj, "name", path));
  }
  std::optional<double> f, i, w;
  RETURN_IF_ERROR(ReadTime(obj, "forward_us", path, f));
  RETURN_IF_ERROR(ReadTime(obj, "backward_input_us", path, i));
  RETURN_IF_ERROR(ReadTime(obj, "backward_weight_us", path, w));
  std::optional<int64_t> out, stash, params;
  RETURN_IF_ERROR(ReadBytes(obj, "output_bytes", path, out));
  RETURN_IF_ERROR(ReadBytes(obj, "stash_bytes", path, stash));
  RETURN_IF_ERROR(ReadBytes(obj, "param_bytes", path, params));
  layer.forward_us = f.value_or(0);
  layer.backward_input_us = i.value_or(0);
  layer.backward_weight_us = w.value_or(0);
  layer.output_bytes = out.value_or(0);
  layer.stash_bytes = stash.value_or(0);
  layer.param_bytes = params.value_or(0);
  RETURN_IF_ERROR(CheckLayer(layer, std::string(path), param_dtype));
  return layer;
}

absl::StatusOr<int> Repeat(const nlohmann::json& entry, absl::string_view path) {
  auto it = entry.find("repeat");
  if (it == entry.end()) return 1;
  const std::string field = Field(path, "repeat");
  ASSIGN_OR_RETURN(int64_t n, WholeNumber(*it, field, 1));
  if (n < 1) return NotAWholeNumber(field, 1, Found(*it));
  if (n > kMaxLayers) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", field, "\" is ", n, "; a model has at most ", kMaxLayers, " layers"));
  }
  return static_cast<int>(n);
}

absl::Status TooManyLayers(absl::string_view path) {
  return absl::InvalidArgumentError(absl::StrCat(
      "\"", path, "\": more than ", kMaxLayers, " layers after repeats are expanded"));
}

// One "layers" entry (a layer or a block), repeats expanded, appended.
absl::Status ParseEntry(const nlohmann::json& entry, absl::string_view path, Dtype param_dtype,
                        std::vector<LayerCost>& out) {
  RETURN_IF_ERROR(MustBeObject(entry, path));
  ASSIGN_OR_RETURN(int repeat, Repeat(entry, path));
  std::vector<LayerCost> unit;
  if (auto block = entry.find("block"); block != entry.end()) {
    const std::string block_path = Field(path, "block");
    if (!block->is_array() || block->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", block_path, "\" must be a non-empty array of layers, found ", Found(*block)));
    }
    for (size_t k = 0; k < block->size(); ++k) {
      const std::string layer_path = absl::StrCat(block_path, "[", k, "]");
      // A block holds layers, not blocks: read as a layer, a nested block
      // would be one layer of no cost (issue 35).
      for (const char* key : {"block", "repeat"}) {
        if ((*block)[k].is_object() && (*block)[k].contains(key)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "\"", layer_path, ".", key, "\": blocks do not nest; a block holds layers (write "
              "the inner block's layers out, or repeat it as an entry of \"layers\")"));
        }
      }
      ASSIGN_OR_RETURN(LayerCost layer, ParseLayer((*block)[k], layer_path,
                                                   LayerKind::kLayer, param_dtype));
      unit.push_back(std::move(layer));
    }
  } else {
    ASSIGN_OR_RETURN(LayerCost layer, ParseLayer(entry, path, LayerKind::kLayer, param_dtype));
    unit.push_back(std::move(layer));
  }
  if (out.size() + unit.size() * static_cast<size_t>(repeat) > kMaxLayers) {
    return TooManyLayers(path);
  }
  for (int r = 0; r < repeat; ++r) out.insert(out.end(), unit.begin(), unit.end());
  return absl::OkStatus();
}

absl::Status ParseDevice(const nlohmann::json& device, DeviceSpec& out) {
  std::optional<int64_t> memory;
  RETURN_IF_ERROR(ReadBytes(device, "memory_bytes", "device", memory));
  out.memory_bytes = memory.value_or(0);
  if (auto it = device.find("peak_tflops"); it != device.end() && !it->is_null()) {
    ASSIGN_OR_RETURN(out.peak_tflops, GetNumber(device, "peak_tflops", "device"));
  }
  ASSIGN_OR_RETURN(const nlohmann::json* ranks, Section(device, "rank_memory_bytes", true));
  if (ranks == nullptr) return absl::OkStatus();
  for (size_t r = 0; r < ranks->size(); ++r) {
    ASSIGN_OR_RETURN(int64_t bytes, WholeNumber((*ranks)[r],
                                                absl::StrCat("device.rank_memory_bytes[", r, "]"),
                                                0));
    out.rank_memory_bytes.push_back(bytes);
  }
  return absl::OkStatus();
}

// Ranges are checked by ValidateLayeredModel (CheckWorkload).
absl::Status ParseWorkload(const nlohmann::json& w, WorkloadSpec& out) {
  if (w.contains("microbatch_size")) {
    ASSIGN_OR_RETURN(out.microbatch_size,
                     GetInt(w, "microbatch_size", "workload", 0, kMaxMicrobatchSize));
  }
  if (w.contains("seq_len")) {
    ASSIGN_OR_RETURN(out.seq_len, GetInt(w, "seq_len", "workload", 0, kMaxSeqLen));
  }
  if (w.contains("tp")) {
    ASSIGN_OR_RETURN(int64_t tp, GetInt(w, "tp", "workload", 1, kMaxTp));
    out.tp = static_cast<int>(tp);
  }
  if (w.contains("model_flops_per_microbatch")) {
    ASSIGN_OR_RETURN(out.model_flops_per_microbatch,
                     GetNumber(w, "model_flops_per_microbatch", "workload"));
  }
  return absl::OkStatus();
}

absl::Status ParseOptimizer(const nlohmann::json& opt, OptimizerSpec& out) {
  if (opt.contains("kind")) {
    ASSIGN_OR_RETURN(std::string kind, GetString(opt, "kind", "optimizer"));
    if (kind == "adam") {
      out.kind = OptimizerKind::kAdam;
    } else if (kind == "sgd") {
      out.kind = OptimizerKind::kSgd;
    } else if (kind == "none") {
      out.kind = OptimizerKind::kNone;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("\"optimizer.kind\" is ", JsonQuote(kind),
                                                     "; expected adam, sgd or none"));
    }
  }
  ASSIGN_OR_RETURN(out.state_dtype, ReadDtype(opt, "state_dtype", "optimizer", Dtype::kFp32));
  if (auto it = opt.find("master_weights"); it != opt.end() && !it->is_null()) {
    ASSIGN_OR_RETURN(out.master_weights, GetBool(opt, "master_weights", "optimizer"));
  }
  if (opt.contains("shard_over_dp")) {
    ASSIGN_OR_RETURN(out.shard_over_dp, GetBool(opt, "shard_over_dp", "optimizer"));
  }
  if (opt.contains("zero")) {
    ASSIGN_OR_RETURN(int64_t zero, GetInt(opt, "zero", "optimizer", 0, 3));
    out.zero = static_cast<int>(zero);
  }
  return absl::OkStatus();
}

absl::Status ParseHead(const nlohmann::json& doc, absl::string_view key, LayerKind kind,
                       Dtype param_dtype, std::vector<LayerCost>& out) {
  auto it = doc.find(std::string(key));
  if (it == doc.end() || it->is_null()) return absl::OkStatus();
  ASSIGN_OR_RETURN(LayerCost head, ParseLayer(*it, key, kind, param_dtype));
  out.push_back(std::move(head));
  return absl::OkStatus();
}

absl::StatusOr<LayeredModel> FromDocument(const nlohmann::json& doc) {
  LayeredModel model;
  // dp first: it gives the parameters' dtype the layers are checked against.
  ASSIGN_OR_RETURN(const nlohmann::json* dp, Section(doc, "dp", false));
  if (dp != nullptr) RETURN_IF_ERROR(ParseDataParallel(*dp, model.dp));
  const Dtype param_dtype = model.dp.param_dtype;
  std::optional<int64_t> input;
  RETURN_IF_ERROR(ReadBytes(doc, "input_bytes", "", input));
  model.input_bytes = input.value_or(0);
  RETURN_IF_ERROR(ParseHead(doc, "embedding", LayerKind::kEmbedding, param_dtype, model.layers));
  ASSIGN_OR_RETURN(const nlohmann::json* layers, Section(doc, "layers", true));
  if (layers == nullptr) return absl::InvalidArgumentError("missing \"layers\"");
  for (size_t i = 0; i < layers->size(); ++i) {
    RETURN_IF_ERROR(
        ParseEntry((*layers)[i], absl::StrCat("layers[", i, "]"), param_dtype, model.layers));
  }
  RETURN_IF_ERROR(ParseHead(doc, "loss", LayerKind::kLoss, param_dtype, model.layers));
  if (model.layers.size() > kMaxLayers) return TooManyLayers("loss");
  ASSIGN_OR_RETURN(const nlohmann::json* device, Section(doc, "device", false));
  if (device != nullptr) RETURN_IF_ERROR(ParseDevice(*device, model.device));
  ASSIGN_OR_RETURN(const nlohmann::json* workload, Section(doc, "workload", false));
  if (workload != nullptr) RETURN_IF_ERROR(ParseWorkload(*workload, model.workload));
  ASSIGN_OR_RETURN(const nlohmann::json* opt, Section(doc, "optimizer", false));
  if (opt != nullptr) RETURN_IF_ERROR(ParseOptimizer(*opt, model.optimizer));
  ASSIGN_OR_RETURN(const nlohmann::json* p2p, Section(doc, "p2p", false));
  if (p2p != nullptr) RETURN_IF_ERROR(ParseLink(*p2p, "p2p", model.p2p));
  RETURN_IF_ERROR(ValidateLayeredModel(model));
  return model;
}

// How messages name model.layers[i] of a model built in code: "embedding",
// "loss" or "layer k" (k counts every layer, repeats expanded).
std::string LayerPath(const LayeredModel& model, size_t i) {
  const LayerCost& layer = model.layers[i];
  if (layer.kind == LayerKind::kEmbedding) return "embedding";
  if (layer.kind == LayerKind::kLoss) return "loss";
  return absl::StrCat("layer ", i);
}

absl::Status CheckLayer(const LayerCost& layer, const std::string& path, Dtype param_dtype) {
  RETURN_IF_ERROR(CheckTime(layer.forward_us, Field(path, "forward_us")));
  RETURN_IF_ERROR(CheckTime(layer.backward_input_us, Field(path, "backward_input_us")));
  RETURN_IF_ERROR(CheckTime(layer.backward_weight_us, Field(path, "backward_weight_us")));
  RETURN_IF_ERROR(CheckBytes(layer.output_bytes, Field(path, "output_bytes")));
  RETURN_IF_ERROR(CheckBytes(layer.stash_bytes, Field(path, "stash_bytes")));
  RETURN_IF_ERROR(CheckBytes(layer.param_bytes, Field(path, "param_bytes")));
  return CheckWholeElements(layer.param_bytes, param_dtype, Field(path, "param_bytes"),
                            "dp.param_dtype");
}

absl::Status CheckDeviceBytes(int64_t bytes, absl::string_view field) {
  if (bytes >= 0 && bytes <= kMaxDeviceBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("\"", field, "\" is ", bytes,
                                                 "; expected 0 to ", kMaxDeviceBytes,
                                                 " (1 PiB)"));
}

absl::Status CheckInRange(double value, double max, absl::string_view field) {
  if (std::isfinite(value) && value >= 0 && value <= max) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("\"", field, "\" is ", value, "; expected a finite number from 0 to ", max));
}

absl::Status CheckWorkload(const WorkloadSpec& w, double peak_tflops) {
  RETURN_IF_ERROR(CheckInRange(static_cast<double>(w.microbatch_size),
                               static_cast<double>(kMaxMicrobatchSize),
                               "workload.microbatch_size"));
  RETURN_IF_ERROR(CheckInRange(static_cast<double>(w.seq_len), static_cast<double>(kMaxSeqLen),
                               "workload.seq_len"));
  if (w.tp < 1 || w.tp > kMaxTp) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"workload.tp\" is ", w.tp, "; expected 1 to ", kMaxTp));
  }
  RETURN_IF_ERROR(CheckInRange(w.model_flops_per_microbatch, kMaxModelFlops,
                               "workload.model_flops_per_microbatch"));
  return CheckInRange(peak_tflops, kMaxPeakTflops, "device.peak_tflops");
}

absl::Status CheckOrder(const LayeredModel& model) {
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const LayerKind kind = model.layers[i].kind;
    if (kind == LayerKind::kEmbedding && i != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer ", i, " is an embedding; only the first layer may be one"));
    }
    if (kind == LayerKind::kLoss && i + 1 != model.layers.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer ", i, " is a loss; only the last layer may be one"));
    }
  }
  if (model.NumBodyLayers() == 0) {
    return absl::InvalidArgumentError("\"layers\" must hold at least one layer");
  }
  if (model.layers.size() > kMaxLayers) {
    return absl::InvalidArgumentError(
        absl::StrCat("a model has at most ", kMaxLayers, " layers, found ", model.layers.size()));
  }
  return absl::OkStatus();
}

Json LayerJson(const LayerCost& layer, bool with_name) {
  Json j;
  if (with_name && !layer.name.empty()) j["name"] = layer.name;
  j["forward_us"] = layer.forward_us;
  j["backward_input_us"] = layer.backward_input_us;
  j["backward_weight_us"] = layer.backward_weight_us;
  j["output_bytes"] = layer.output_bytes;
  j["stash_bytes"] = layer.stash_bytes;
  j["param_bytes"] = layer.param_bytes;
  return j;
}

Json LinkJson(const Link& link) {
  return Json{{"latency_us", link.latency_us}, {"gb_per_s", link.gb_per_s}};
}

Json DataParallelJson(const DataParallelSpec& dp) {
  Json j{{"size", dp.size},
         {"reduce", ReduceKindName(dp.reduce)},
         {"param_dtype", DtypeName(dp.param_dtype)},
         {"grad_dtype", DtypeName(dp.grad_dtype)}};
  j["reduce_dtype"] = dp.reduce_dtype ? Json(DtypeName(*dp.reduce_dtype)) : Json(nullptr);
  j["latency_us"] = dp.link.latency_us;
  j["gb_per_s"] = dp.link.gb_per_s;
  j["buckets"] = dp.buckets;
  return j;
}

}  // namespace

absl::string_view LayerKindName(LayerKind kind) {
  switch (kind) {
    case LayerKind::kEmbedding: return "embedding";
    case LayerKind::kLayer: return "layer";
    case LayerKind::kLoss: return "loss";
  }
  return "?";
}

absl::string_view OptimizerKindName(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kAdam: return "adam";
    case OptimizerKind::kSgd: return "sgd";
    case OptimizerKind::kNone: return "none";
  }
  return "?";
}

int OptimizerSpec::StatesPerParameter() const {
  switch (kind) {
    case OptimizerKind::kAdam: return 2;
    case OptimizerKind::kSgd: return 1;
    case OptimizerKind::kNone: return 0;
  }
  return 0;
}

int64_t OptimizerSpec::StateBytes(int64_t elements, Dtype param_dtype, int dp_size) const {
  const int64_t per_element = int64_t{StatesPerParameter()} * DtypeBytes(state_dtype) +
                              (HasMasterWeights(param_dtype) ? 4 : 0);
  const int64_t total = elements * per_element;
  if (ZeroStage() < 1 || dp_size <= 1) return total;
  return (total + dp_size - 1) / dp_size;
}

int64_t DeviceSpec::ReserveFor(int rank) const {
  const int64_t limit = LimitFor(rank);
  if (limit <= 0) return 0;
  const double share = kStandardReserveFraction * static_cast<double>(limit);
  const double reserved =
      reserve.standard
          ? share + std::min(static_cast<double>(kStandardReserveContextBytes), share)
          : static_cast<double>(reserve.bytes) + reserve.fraction * static_cast<double>(limit);
  return std::min(limit, static_cast<int64_t>(reserved));
}

int64_t DeviceSpec::LimitFor(int rank) const {
  if (!rank_memory_bytes.empty()) {
    return rank < static_cast<int>(rank_memory_bytes.size()) ? rank_memory_bytes[rank] : 0;
  }
  return memory_bytes;
}

bool LayeredModel::HasEmbedding() const {
  return !layers.empty() && layers.front().kind == LayerKind::kEmbedding;
}

bool LayeredModel::HasLoss() const {
  return !layers.empty() && layers.back().kind == LayerKind::kLoss;
}

int LayeredModel::NumBodyLayers() const {
  int n = 0;
  for (const LayerCost& layer : layers) n += layer.kind == LayerKind::kLayer ? 1 : 0;
  return n;
}

int64_t LayeredModel::ParamElements() const {
  int64_t bytes = 0;
  for (const LayerCost& layer : layers) bytes += layer.param_bytes;
  return bytes / DtypeBytes(dp.param_dtype);
}

absl::Status ValidateLayeredModel(const LayeredModel& model) {
  RETURN_IF_ERROR(model_fields::CheckBytes(model.input_bytes, "input_bytes"));
  RETURN_IF_ERROR(CheckOrder(model));
  for (size_t i = 0; i < model.layers.size(); ++i) {
    RETURN_IF_ERROR(CheckLayer(model.layers[i], LayerPath(model, i), model.dp.param_dtype));
  }
  RETURN_IF_ERROR(CheckDeviceBytes(model.device.memory_bytes, "device.memory_bytes"));
  for (size_t r = 0; r < model.device.rank_memory_bytes.size(); ++r) {
    RETURN_IF_ERROR(CheckDeviceBytes(model.device.rank_memory_bytes[r],
                                     absl::StrCat("device.rank_memory_bytes[", r, "]")));
  }
  RETURN_IF_ERROR(CheckWorkload(model.workload, model.device.peak_tflops));
  return CheckLinks(model.p2p, model.dp);
}

absl::StatusOr<LayeredModel> ParseLayeredModelJson(absl::string_view text) {
  ASSIGN_OR_RETURN(nlohmann::json doc, ParseJsonDocument(text));
  RETURN_IF_ERROR(CheckFormatAndVersion(doc, kModelFormat, kLayeredModelVersion));
  if (doc["version"] != kLayeredModelVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("a version ", doc["version"].dump(), " model gives per-stage costs; "
                     "expected version ", kLayeredModelVersion, " (layers)"));
  }
  return FromDocument(doc);
}

std::string LayeredModelToJson(const LayeredModel& model) {
  Json j{{"format", kModelFormat}, {"version", kLayeredModelVersion}};
  j["input_bytes"] = model.input_bytes;
  if (model.HasEmbedding()) j["embedding"] = LayerJson(model.layers.front(), true);
  Json layers = Json::array();
  const size_t begin = model.HasEmbedding() ? 1 : 0;
  const size_t end = model.layers.size() - (model.HasLoss() ? 1 : 0);
  for (size_t i = begin; i < end;) {
    size_t run = 1;
    while (i + run < end && model.layers[i + run] == model.layers[i]) ++run;
    Json entry = LayerJson(model.layers[i], true);
    if (run > 1) entry["repeat"] = run;
    layers.push_back(std::move(entry));
    i += run;
  }
  j["layers"] = std::move(layers);
  if (model.HasLoss()) j["loss"] = LayerJson(model.layers.back(), true);
  Json device{{"memory_bytes", model.device.memory_bytes}};
  if (!model.device.rank_memory_bytes.empty()) {
    device["rank_memory_bytes"] = model.device.rank_memory_bytes;
  }
  if (model.device.peak_tflops > 0) device["peak_tflops"] = model.device.peak_tflops;
  j["device"] = std::move(device);
  // Written only when known, so that a model without it reads back equal.
  if (const WorkloadSpec& w = model.workload; w != WorkloadSpec{}) {
    j["workload"] = Json{{"microbatch_size", w.microbatch_size},
                         {"seq_len", w.seq_len},
                         {"tp", w.tp},
                         {"model_flops_per_microbatch", w.model_flops_per_microbatch}};
  }
  const OptimizerSpec& opt = model.optimizer;
  j["optimizer"] = Json{{"kind", OptimizerKindName(opt.kind)},
                        {"state_dtype", DtypeName(opt.state_dtype)},
                        {"master_weights", opt.HasMasterWeights(model.dp.param_dtype)},
                        {"shard_over_dp", opt.ZeroStage() >= 1},
                        {"zero", opt.ZeroStage()}};
  j["p2p"] = LinkJson(model.p2p);
  j["dp"] = DataParallelJson(model.dp);
  return j.dump(1) + "\n";
}

}  // namespace jitpipe
