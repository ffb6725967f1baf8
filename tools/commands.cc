#include "tools/commands.h"

namespace jitpipe::cli {

const std::vector<Command>& AllCommands() {
  static const std::vector<Command>* commands = new std::vector<Command>{
      ShowCommand(),
      ConvertCommand(),
      ValidateCommand(),
      LowerCommand(),
      GenerateCommand(),
      PlanCommand(),
      ReplayCommand(),
      FrAnalyzeCommand(),
      SimulateCommand(),
      CompareCommand(),
      RenderCommand(),
  };
  return *commands;
}

}  // namespace jitpipe::cli
