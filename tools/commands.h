// One function per subcommand, each defined in its cmd_<name>.cc.
#ifndef JITPIPE_TOOLS_COMMANDS_H_
#define JITPIPE_TOOLS_COMMANDS_H_

#include "tools/cli.h"

namespace jitpipe::cli {

Command ShowCommand();
Command ConvertCommand();
Command ValidateCommand();
Command LowerCommand();
Command GenerateCommand();
Command ModelCommand();
Command PlanCommand();
Command ReplayCommand();
Command FrAnalyzeCommand();
Command SimulateCommand();
Command CompareCommand();
Command RenderCommand();
Command ExportCommand();

}  // namespace jitpipe::cli

#endif  // JITPIPE_TOOLS_COMMANDS_H_
