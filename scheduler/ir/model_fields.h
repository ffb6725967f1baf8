// JSON field readers and range checks shared by the model file versions
// (model.cc reads version 1, layered_model.cc version 2), so that both name a
// bad field the same way:
//   "defaults.stash_bytes" must be a whole number >= 0, found -4096
//   "dp.grad_dtype": unknown dtype "fp64"; expected fp32, bf16, fp16, ...
// `path` is the dotted path of the object holding `key` ("" at top level).
// Internal to scheduler/ir; thread-compatible.
#ifndef JITPIPE_SCHEDULER_IR_MODEL_FIELDS_H_
#define JITPIPE_SCHEDULER_IR_MODEL_FIELDS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "scheduler/ir/model.h"

namespace jitpipe::model_fields {

// "path.key", or "key" when path is empty.
std::string Field(absl::string_view path, absl::string_view key);
// The value as JSON text, for "found ..." in messages.
std::string Found(const nlohmann::json& value);

absl::Status NotATime(absl::string_view field, absl::string_view found);
absl::Status NotAWholeNumber(absl::string_view field, int64_t min, absl::string_view found);

// obj[key] when present: a JSON number (time) or a whole number (bytes).
// Ranges are checked by CheckTime / CheckBytes, so that a file and a value
// built in code share one message.
absl::Status ReadTime(const nlohmann::json& obj, absl::string_view key, absl::string_view path,
                      std::optional<double>& out);
absl::Status ReadBytes(const nlohmann::json& obj, absl::string_view key, absl::string_view path,
                       std::optional<int64_t>& out);
// A whole JSON number (1e3 counts, 1.5 does not), any sign.
absl::StatusOr<int64_t> WholeNumber(const nlohmann::json& value, absl::string_view field,
                                    int64_t min);

// doc[key] when present and of the right type (object or array); nullptr
// when absent. Errors: `"key" must be an object, found ...`.
absl::StatusOr<const nlohmann::json*> Section(const nlohmann::json& doc, absl::string_view key,
                                              bool array);

// obj[key] as a dtype name; `fallback` when absent.
absl::StatusOr<Dtype> ReadDtype(const nlohmann::json& obj, absl::string_view key,
                                absl::string_view path, Dtype fallback);

// "latency_us" and "gb_per_s" of a link object.
absl::Status ParseLink(const nlohmann::json& obj, absl::string_view path, Link& link);
// The "dp" object.
absl::Status ParseDataParallel(const nlohmann::json& dp, DataParallelSpec& out);

// Range checks (model.h): a time in [0, kMaxModelUs]; a bandwidth 0 or in
// [kMinModelGbPerS, kMaxModelGbPerS]; bytes in [0, kMaxModelBytes].
absl::Status CheckTime(const std::optional<double>& t, absl::string_view field);
absl::Status CheckBandwidth(const std::optional<double>& gb_per_s, absl::string_view field);
absl::Status CheckBytes(const std::optional<int64_t>& b, absl::string_view field);
// p2p and dp fields: times, bandwidths, dp.size and dp.buckets in range.
absl::Status CheckLinks(const Link& p2p, const DataParallelSpec& dp);
// "field" is `bytes`, a whole number of `dtype` elements (named by `why`).
absl::Status CheckWholeElements(int64_t bytes, Dtype dtype, absl::string_view field,
                                absl::string_view why);

}  // namespace jitpipe::model_fields

#endif  // JITPIPE_SCHEDULER_IR_MODEL_FIELDS_H_
