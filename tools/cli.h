// The jitpipe command line: subcommands over absl flags.
//
// Each subcommand lives in its own cmd_<name>.cc, defines its own ABSL_FLAGs
// and describes itself with a Command. ParseInvocation() reads argv with
// absl's flag registry but with our own rules, so that a usage error exits
// with 2 (absl's parser exits with 1) and each subcommand accepts only its
// own flags:
//   --name=value, --name value, --bool, --nobool, -o FILE (= --output);
//   dashes in names are underscores in absl (--stages-per-rank);
//   "--" ends the flags; anything else is positional.
//
// Exit status (docs/design.md): 0 success, 1 invalid input or a failed check, 2
// usage error. Errors go to stderr as one line "jitpipe <cmd>: <message>".
#ifndef JITPIPE_TOOLS_CLI_H_
#define JITPIPE_TOOLS_CLI_H_

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"

namespace jitpipe::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

struct Invocation {
  std::vector<std::string> positional;
  std::vector<std::string> flags_set;  // names given on the command line
  bool IsSet(absl::string_view flag) const;
};

struct Command {
  absl::string_view name;
  absl::string_view synopsis;  // "validate FILE [--strict]"
  absl::string_view summary;   // one paragraph for --help
  std::vector<absl::string_view> flags;
  int min_positional = 0;
  int max_positional = 0;
  int (*run)(const Command& command, const Invocation& invocation) = nullptr;
};

// Flags every command accepts besides its own (--max-input-bytes).
inline constexpr absl::string_view kProgramFlags[] = {"max_input_bytes"};
// Flags that name files the command writes, and ones that name files it
// reads (its positional arguments are inputs too).
inline constexpr absl::string_view kOutputFlags[] = {"output", "trace", "svg"};
inline constexpr absl::string_view kInputFlags[] = {"model"};

// Every subcommand, in the order `jitpipe --help` lists them.
const std::vector<Command>& AllCommands();

// Parses args (everything after the subcommand name) into the command's
// flags. Errors: InvalidArgument describing the usage error.
absl::Status ParseInvocation(const Command& command, const std::vector<std::string>& args,
                             Invocation& out);

// Refuses outputs that would replace an input or another output: the same
// regular file after following links (an output that does not exist yet
// is compared by its path). Outputs that are not regular files (/dev/null,
// a FIFO) may be shared. Errors: InvalidArgument
//   "--trace s.json is the input s.json; write it elsewhere"
absl::Status CheckOutputsAreDistinct(const Command& command, const Invocation& invocation);

// --help text for one command, and for the program.
std::string CommandHelp(const Command& command);
std::string ProgramHelp();

// Prints "jitpipe <cmd>: <status message>" and returns kExitFailure.
int Fail(const Command& command, const absl::Status& status);
// Prints the usage error and a pointer to --help; returns kExitUsage.
int UsageError(const Command& command, absl::string_view message);

}  // namespace jitpipe::cli

#endif  // JITPIPE_TOOLS_CLI_H_
