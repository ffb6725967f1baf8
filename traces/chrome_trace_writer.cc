#include "traces/chrome_trace_writer.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "base/json_document.h"
#include "base/json_text.h"

namespace jitpipe {

// Where the formatted bytes go. Write errors are kept and reported by Commit.
class ChromeTraceWriter::Sink {
 public:
  virtual ~Sink() = default;
  virtual void Write(absl::string_view bytes) = 0;
  virtual absl::Status Commit() = 0;
};

class ChromeTraceWriter::FileSink : public ChromeTraceWriter::Sink {
 public:
  explicit FileSink(AtomicFile file) : file_(std::move(file)) {}
  void Write(absl::string_view bytes) override { file_.Write(bytes); }
  absl::Status Commit() override { return file_.Commit(); }

 private:
  AtomicFile file_;  // destroyed uncommitted: the temporary file is removed
};

class ChromeTraceWriter::StringSink : public ChromeTraceWriter::Sink {
 public:
  explicit StringSink(std::string* out) : out_(out) {}
  void Write(absl::string_view bytes) override { out_->append(bytes.data(), bytes.size()); }
  absl::Status Commit() override { return absl::OkStatus(); }

 private:
  std::string* out_;  // borrowed
};

namespace {

absl::Status ValidateOptions(const ChromeTraceOptions& options) {
  if (!std::isfinite(options.ts_offset_us) || options.ts_offset_us < 0 ||
      options.ts_offset_us > kMaxTraceTimeUs) {
    return absl::InvalidArgumentError(
        absl::StrCat("ts_offset_us must be in [0, ", kMaxTraceTimeUs, "], found ",
                     options.ts_offset_us));
  }
  return absl::OkStatus();
}

// Returns the JSON path of the first non-finite number in `value`, or "".
std::string FindNonFinite(const nlohmann::json& value, const std::string& path) {
  if (value.is_number_float() && !std::isfinite(value.get<double>())) return path;
  if (value.is_object()) {
    for (const auto& [key, item] : value.items()) {
      std::string found = FindNonFinite(item, absl::StrCat(path, ".", key));
      if (!found.empty()) return found;
    }
  } else if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) {
      std::string found = FindNonFinite(value[i], absl::StrCat(path, "[", i, "]"));
      if (!found.empty()) return found;
    }
  }
  return "";
}

constexpr const char* ScopeText(TraceInstantScope scope) {
  switch (scope) {
    case TraceInstantScope::kProcess:
      return "p";
    case TraceInstantScope::kGlobal:
      return "g";
    case TraceInstantScope::kThread:
      break;
  }
  return "t";
}

}  // namespace

absl::StatusOr<ChromeTraceWriter> ChromeTraceWriter::ToFile(std::string path,
                                                           const ChromeTraceOptions& options) {
  if (absl::Status valid = ValidateOptions(options); !valid.ok()) return valid;
  absl::StatusOr<AtomicFile> file = AtomicFile::Create(std::move(path));
  if (!file.ok()) return file.status();
  return ChromeTraceWriter(std::make_unique<FileSink>(*std::move(file)), options);
}

absl::StatusOr<ChromeTraceWriter> ChromeTraceWriter::ToString(std::string* out,
                                                             const ChromeTraceOptions& options) {
  if (absl::Status valid = ValidateOptions(options); !valid.ok()) return valid;
  if (out == nullptr) return absl::InvalidArgumentError("ChromeTraceWriter::ToString: null output");
  return ChromeTraceWriter(std::make_unique<StringSink>(out), options);
}

ChromeTraceWriter::ChromeTraceWriter(std::unique_ptr<Sink> sink, const ChromeTraceOptions& options)
    : sink_(std::move(sink)), options_(options) {
  buffer_.reserve(options_.buffer_bytes + 1024);
  buffer_.append("{\"traceEvents\":[\n");
}

ChromeTraceWriter::ChromeTraceWriter(ChromeTraceWriter&& other) noexcept = default;
ChromeTraceWriter& ChromeTraceWriter::operator=(ChromeTraceWriter&& other) noexcept = default;
ChromeTraceWriter::~ChromeTraceWriter() = default;

bool ChromeTraceWriter::Accepting() const { return sink_ != nullptr && !finished_ && status_.ok(); }

void ChromeTraceWriter::Fail(absl::string_view ph, absl::string_view name, absl::string_view what) {
  if (!status_.ok()) return;
  status_ = absl::InvalidArgumentError(absl::StrCat("trace event ", events_written_, " (ph \"", ph,
                                                    "\", name ", JsonQuote(name), "): ", what));
}

bool ChromeTraceWriter::CheckFiniteNonNegative(double us, absl::string_view field,
                                               absl::string_view ph, absl::string_view name) {
  if (std::isfinite(us) && us >= 0) return true;
  Fail(ph, name, absl::StrCat(field, " is ", us, "; times must be finite and >= 0"));
  return false;
}

bool ChromeTraceWriter::ToNanos(double us, absl::string_view field, absl::string_view ph,
                                absl::string_view name, int64_t* nanos) {
  if (!CheckFiniteNonNegative(us, field, ph, name)) return false;
  double written = us + options_.ts_offset_us;
  if (written > kMaxTraceTimeUs) {
    Fail(ph, name,
         absl::StrCat(field, " is ", us, " us, beyond ", kMaxTraceTimeUs,
                      " us; write times relative to the start of the run"));
    return false;
  }
  *nanos = std::llround(written * 1000.0);
  return true;
}

bool ChromeTraceWriter::CheckTrack(int pid, int tid, absl::string_view ph, absl::string_view name) {
  if (pid >= 0 && tid >= 0) return true;
  Fail(ph, name, absl::StrCat("pid ", pid, " / tid ", tid, ": both must be >= 0"));
  return false;
}

bool ChromeTraceWriter::AppendArgs(absl::Span<const TraceArg> args, absl::string_view ph,
                                   absl::string_view name) {
  for (const TraceArg& arg : args) {
    if (arg.kind() == TraceArg::Kind::kDouble && !std::isfinite(arg.double_value())) {
      Fail(ph, name, absl::StrCat("args.", arg.key(), " is ", arg.double_value(),
                                  "; numbers must be finite"));
      return false;
    }
  }
  if (args.empty()) return true;
  buffer_.append(",\"args\":{");
  for (size_t i = 0; i < args.size(); ++i) {
    const TraceArg& arg = args[i];
    if (i > 0) buffer_.push_back(',');
    AppendJsonString(&buffer_, arg.key());
    buffer_.push_back(':');
    switch (arg.kind()) {
      case TraceArg::Kind::kInt:
        AppendJsonInt(&buffer_, arg.int_value());
        break;
      case TraceArg::Kind::kDouble:
        AppendJsonDouble(&buffer_, arg.double_value());
        break;
      case TraceArg::Kind::kBool:
        buffer_.append(arg.bool_value() ? "true" : "false");
        break;
      case TraceArg::Kind::kString:
        AppendJsonString(&buffer_, arg.string_value());
        break;
    }
  }
  buffer_.push_back('}');
  return true;
}

void ChromeTraceWriter::BeginEvent(absl::string_view name, absl::string_view cat, char ph,
                                   int64_t ts_nanos, int pid, int tid) {
  if (events_written_ > 0) buffer_.append(",\n");
  buffer_.append("{\"name\":");
  AppendJsonString(&buffer_, name);
  buffer_.append(",\"cat\":");
  AppendJsonString(&buffer_, cat);
  buffer_.append(",\"ph\":\"");
  buffer_.push_back(ph);
  buffer_.append("\",\"ts\":");
  AppendMicrosFromNanos(&buffer_, ts_nanos);
  buffer_.append(",\"pid\":");
  AppendJsonInt(&buffer_, pid);
  buffer_.append(",\"tid\":");
  AppendJsonInt(&buffer_, tid);
}

void ChromeTraceWriter::EndEvent() {
  buffer_.push_back('}');
  ++events_written_;
  FlushIfFull();
}

void ChromeTraceWriter::FlushIfFull() {
  if (buffer_.size() < options_.buffer_bytes) return;
  sink_->Write(buffer_);
  buffer_.clear();
}

void ChromeTraceWriter::AddSlice(const TraceSlice& slice) {
  if (!Accepting()) return;
  int64_t ts = 0, end = 0;
  if (!CheckTrack(slice.pid, slice.tid, "X", slice.name) ||
      !ToNanos(slice.ts_us, "ts_us", "X", slice.name, &ts) ||
      !CheckFiniteNonNegative(slice.dur_us, "dur_us", "X", slice.name) ||
      !ToNanos(slice.ts_us + slice.dur_us, "ts_us + dur_us", "X", slice.name, &end)) {
    return;
  }
  for (const std::optional<TraceFlow>& flow : {slice.flow_in, slice.flow_out}) {
    if (flow.has_value() && (flow->id < 0 || flow->id > kMaxTraceFlowId)) {
      Fail("X", slice.name, absl::StrCat("flow id ", flow->id, " is outside [0, 2^53 - 1]"));
      return;
    }
  }
  // The args are validated before the first byte of the event is written.
  size_t event_start = buffer_.size();
  BeginEvent(slice.name, slice.cat, 'X', ts, slice.pid, slice.tid);
  buffer_.append(",\"dur\":");
  AppendMicrosFromNanos(&buffer_, end - ts);
  if (!AppendArgs(slice.args, "X", slice.name)) {
    buffer_.resize(event_start);
    return;
  }
  EndEvent();
  if (slice.flow_in.has_value()) AppendFlow(slice, *slice.flow_in, ts, 'f');
  if (slice.flow_out.has_value()) AppendFlow(slice, *slice.flow_out, ts, 's');
}

void ChromeTraceWriter::AppendFlow(const TraceSlice& slice, const TraceFlow& flow,
                                   int64_t ts_nanos, char ph) {
  BeginEvent(flow.name, slice.cat, ph, ts_nanos, slice.pid, slice.tid);
  buffer_.append(",\"id\":");
  AppendJsonInt(&buffer_, flow.id);
  if (ph == 'f') buffer_.append(",\"bp\":\"e\"");
  EndEvent();
}

void ChromeTraceWriter::AddCounter(const TraceCounter& counter) {
  if (!Accepting()) return;
  int64_t ts = 0;
  if (!CheckTrack(counter.pid, counter.tid, "C", counter.name) ||
      !ToNanos(counter.ts_us, "ts_us", "C", counter.name, &ts)) {
    return;
  }
  if (counter.key.empty()) return Fail("C", counter.name, "the counter key is empty");
  if (!std::isfinite(counter.value)) {
    return Fail("C", counter.name,
                absl::StrCat("value is ", counter.value, "; counter values must be finite"));
  }
  BeginEvent(counter.name, counter.cat, 'C', ts, counter.pid, counter.tid);
  buffer_.append(",\"args\":{");
  AppendJsonString(&buffer_, counter.key);
  buffer_.push_back(':');
  AppendJsonDouble(&buffer_, counter.value);
  buffer_.push_back('}');
  EndEvent();
}

void ChromeTraceWriter::AddInstant(const TraceInstant& instant) {
  if (!Accepting()) return;
  int64_t ts = 0;
  if (!CheckTrack(instant.pid, instant.tid, "i", instant.name) ||
      !ToNanos(instant.ts_us, "ts_us", "i", instant.name, &ts)) {
    return;
  }
  size_t event_start = buffer_.size();
  BeginEvent(instant.name, instant.cat, 'i', ts, instant.pid, instant.tid);
  buffer_.append(",\"s\":\"");
  buffer_.append(ScopeText(instant.scope));
  buffer_.push_back('"');
  if (!AppendArgs(instant.args, "i", instant.name)) {
    buffer_.resize(event_start);
    return;
  }
  EndEvent();
}

void ChromeTraceWriter::AppendMetadataEvent(absl::string_view name, int pid, int tid,
                                            absl::string_view arg_key,
                                            absl::string_view string_value, int int_value) {
  if (!Accepting() || !CheckTrack(pid, tid, "M", name)) return;
  BeginEvent(name, "__metadata", 'M', 0, pid, tid);
  buffer_.append(",\"args\":{");
  AppendJsonString(&buffer_, arg_key);
  buffer_.push_back(':');
  if (arg_key == "name") {
    AppendJsonString(&buffer_, string_value);
  } else {
    AppendJsonInt(&buffer_, int_value);
  }
  buffer_.push_back('}');
  EndEvent();
}

void ChromeTraceWriter::SetProcessName(int pid, absl::string_view name) {
  AppendMetadataEvent("process_name", pid, 0, "name", name, 0);
}

void ChromeTraceWriter::SetThreadName(int pid, int tid, absl::string_view name) {
  AppendMetadataEvent("thread_name", pid, tid, "name", name, 0);
}

void ChromeTraceWriter::SetProcessSortIndex(int pid, int sort_index) {
  AppendMetadataEvent("process_sort_index", pid, 0, "sort_index", "", sort_index);
}

void ChromeTraceWriter::SetThreadSortIndex(int pid, int tid, int sort_index) {
  AppendMetadataEvent("thread_sort_index", pid, tid, "sort_index", "", sort_index);
}

void ChromeTraceWriter::SetMetadata(absl::string_view key, nlohmann::json value) {
  if (!Accepting()) return;
  if (key == "format" || key == "version" || key == "ts_offset_us") {
    status_ = absl::InvalidArgumentError(
        absl::StrCat("trace metadata key \"", key, "\" is reserved"));
    return;
  }
  if (std::string path = FindNonFinite(value, std::string(key)); !path.empty()) {
    status_ = absl::InvalidArgumentError(
        absl::StrCat("trace metadata ", JsonQuote(path), " is not a finite number"));
    return;
  }
  for (auto& [existing, existing_value] : metadata_) {
    if (existing == key) {
      existing_value = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(std::string(key), std::move(value));
}

void ChromeTraceWriter::AppendOtherData() {
  buffer_.append("{\"format\":");
  AppendJsonString(&buffer_, kTraceFormat);
  buffer_.append(",\"version\":");
  AppendJsonInt(&buffer_, kTraceVersion);
  buffer_.append(",\"ts_offset_us\":");
  AppendJsonDouble(&buffer_, options_.ts_offset_us);
  for (const auto& [key, value] : metadata_) {
    buffer_.push_back(',');
    AppendJsonString(&buffer_, key);
    buffer_.push_back(':');
    buffer_.append(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  buffer_.push_back('}');
}

absl::Status ChromeTraceWriter::Finish() {
  if (sink_ == nullptr && !finished_) {
    return absl::FailedPreconditionError("ChromeTraceWriter::Finish() on a moved-from writer");
  }
  if (finished_) return absl::FailedPreconditionError("ChromeTraceWriter::Finish() called twice");
  finished_ = true;
  if (status_.ok()) {
    buffer_.append("\n],\n\"otherData\":");
    AppendOtherData();
    buffer_.append("}\n");
    sink_->Write(buffer_);
    status_ = sink_->Commit();
  }
  buffer_.clear();
  buffer_.shrink_to_fit();
  sink_.reset();  // an uncommitted file sink removes its temporary file
  return status_;
}

}  // namespace jitpipe
