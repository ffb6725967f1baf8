#include "tools/commands.h"

namespace jitpipe::cli {

const std::vector<Command>& AllCommands() {
  static const std::vector<Command>* commands = new std::vector<Command>{
      // In the order of the workflow: make, look, check, lower, predict, hand over, run.
      ModelCommand(),
      GenerateCommand(),
      ShowCommand(),
      ConvertCommand(),
      ValidateCommand(),
      LowerCommand(),
      PlanCommand(),
      SimulateCommand(),
      CompareCommand(),
      RenderCommand(),
      ExportCommand(),
      ReplayCommand(),
      FrAnalyzeCommand(),
  };
  return *commands;
}

}  // namespace jitpipe::cli
