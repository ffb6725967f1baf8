#include "tools/cli.h"

#include <algorithm>
#include <cstdio>

#include "absl/flags/reflection.h"
#include "base/atomic_file.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace jitpipe::cli {
namespace {

bool Accepts(const Command& command, absl::string_view name) {
  return std::find(command.flags.begin(), command.flags.end(), name) != command.flags.end() ||
         std::find(std::begin(kProgramFlags), std::end(kProgramFlags), name) !=
             std::end(kProgramFlags);
}

// How a path-valued flag is written on the command line.
std::string FlagLabel(absl::string_view name) {
  if (name == "output") return "-o";
  std::string label = absl::StrCat("--", name);
  std::replace(label.begin(), label.end(), '_', '-');
  return label;
}

struct NamedPath {
  std::string label;  // "-o", "the input", ...
  std::string path;
};

// Two paths name the same regular file, or (when neither exists yet) are
// the same text.
bool SameRegularFile(const std::string& a, const std::string& b) {
  absl::StatusOr<FileIdentity> ia = IdentifyFile(a);
  absl::StatusOr<FileIdentity> ib = IdentifyFile(b);
  if (ia.ok() && ib.ok()) return ia->regular && ib->regular && *ia == *ib;
  return !ia.ok() && !ib.ok() && a == b;
}

bool IsBoolFlag(const absl::CommandLineFlag& flag) { return flag.IsOfType<bool>(); }

}  // namespace

bool Invocation::IsSet(absl::string_view flag) const {
  return std::find(flags_set.begin(), flags_set.end(), flag) != flags_set.end();
}

absl::Status ParseInvocation(const Command& command, const std::vector<std::string>& args,
                             Invocation& out) {
  bool flags_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (flags_done || arg == "-" || !absl::StartsWith(arg, "-")) {
      out.positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_done = true;
      continue;
    }
    std::string body = arg == "-o" ? "output" : arg.substr(absl::StartsWith(arg, "--") ? 2 : 1);
    std::string name = body, value;
    bool has_value = false;
    if (size_t eq = body.find('='); eq != std::string::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
      has_value = true;
    }
    // The CLI spells flags with dashes (--stages-per-rank); absl names use "_".
    std::replace(name.begin(), name.end(), '-', '_');
    bool negated = false;
    absl::CommandLineFlag* flag = Accepts(command, name) ? absl::FindCommandLineFlag(name) : nullptr;
    if (flag == nullptr && absl::StartsWith(name, "no") && Accepts(command, name.substr(2))) {
      flag = absl::FindCommandLineFlag(name.substr(2));
      negated = flag != nullptr && IsBoolFlag(*flag) && !has_value;
      if (!negated) flag = nullptr;
    }
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown option ", arg, " for '", command.name, "'"));
    }
    if (negated) {
      value = "false";
    } else if (!has_value) {
      if (IsBoolFlag(*flag)) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("option ", arg, " needs a value"));
      }
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad value \"", value, "\" for ", arg, ": ", error));
    }
    out.flags_set.push_back(std::string(flag->Name()));
  }
  const int n = static_cast<int>(out.positional.size());
  if (n < command.min_positional) {
    return absl::InvalidArgumentError(absl::StrCat("missing argument; usage: jitpipe ",
                                                   command.synopsis));
  }
  if (n > command.max_positional) {
    return absl::InvalidArgumentError(absl::StrCat("unexpected argument \"",
                                                   out.positional[command.max_positional],
                                                   "\"; usage: jitpipe ", command.synopsis));
  }
  return absl::OkStatus();
}

absl::Status CheckOutputsAreDistinct(const Command& command, const Invocation& invocation) {
  std::vector<NamedPath> inputs, outputs;
  for (const std::string& p : invocation.positional) inputs.push_back({"the input", p});
  auto value = [&](absl::string_view name) -> std::string {
    if (!Accepts(command, name) || !invocation.IsSet(name)) return "";
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    return flag == nullptr ? "" : flag->CurrentValue();
  };
  for (absl::string_view name : kInputFlags) {
    if (std::string p = value(name); !p.empty()) inputs.push_back({FlagLabel(name), p});
  }
  for (absl::string_view name : kOutputFlags) {
    if (std::string p = value(name); !p.empty()) outputs.push_back({FlagLabel(name), p});
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (const NamedPath& input : inputs) {
      if (!SameRegularFile(outputs[i].path, input.path)) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          outputs[i].label, " ", outputs[i].path, " is ",
          input.label == "the input" ? "the input" : absl::StrCat("the ", input.label, " input"),
          " ", input.path, "; write it elsewhere"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (!SameRegularFile(outputs[i].path, outputs[j].path)) continue;
      return absl::InvalidArgumentError(absl::StrCat(outputs[i].label, " ", outputs[i].path,
                                                     " is also the ", outputs[j].label,
                                                     " output; give each output its own file"));
    }
  }
  return absl::OkStatus();
}

std::string CommandHelp(const Command& command) {
  std::string out = absl::StrCat("usage: jitpipe ", command.synopsis, "\n\n", command.summary,
                                 "\n");
  std::vector<absl::string_view> flags = command.flags;
  flags.insert(flags.end(), std::begin(kProgramFlags), std::end(kProgramFlags));
  out += "\noptions:\n";
  for (absl::string_view name : flags) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) continue;
    std::string label = name == "output" ? "-o, --output" : absl::StrCat("--", name);
    std::replace(label.begin(), label.end(), '_', '-');
    std::string def = flag->DefaultValue();
    absl::StrAppendFormat(&out, "  %-22s %s%s\n", label, flag->Help(),
                          def.empty() || def == "false" ? "" : absl::StrCat(" (default: ", def, ")"));
  }
  return out;
}

std::string ProgramHelp() {
  std::string out =
      "usage: jitpipe <command> [options]   (jitpipe <command> --help for details)\n"
      "       jitpipe --version\n\n"
      "commands:\n";
  for (const Command& c : AllCommands()) {
    std::string first_sentence(c.summary.substr(0, c.summary.find(". ") + 1));
    absl::StrAppendFormat(&out, "  %-10s %s\n", c.name, first_sentence);
  }
  return out;
}

int Fail(const Command& command, const absl::Status& status) {
  std::fprintf(stderr, "jitpipe %s: %s\n", std::string(command.name).c_str(),
               std::string(status.message()).c_str());
  return kExitFailure;
}

int UsageError(const Command& command, absl::string_view message) {
  std::fprintf(stderr, "jitpipe %s: %s\n(see: jitpipe %s --help)\n",
               std::string(command.name).c_str(), std::string(message).c_str(),
               std::string(command.name).c_str());
  return kExitUsage;
}

}  // namespace jitpipe::cli
