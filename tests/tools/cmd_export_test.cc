// End-to-end runs of `jitpipe export`: the files written for torchtitan and
// Megatron-LM read back into the schedule's program and cut; where the cut
// comes from (the file's layout, --layout, --model, none); refusals and
// usage errors with their exit codes.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planning/layer_cut.h"
#include "scheduler/ir/schedule_csv.h"
#include "scheduler/ir/schedule_io.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::cmd_export_test {
namespace {

using ::jitpipe::testing::CliResult;
using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::RunCli;
using ::jitpipe::testing::WriteTextFile;
using ::testing::HasSubstr;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Embedding, 16 layers, loss.
constexpr char kModel[] = R"({"format": "jitpipe.model", "version": 2,
 "embedding": {"output_bytes": 1024, "param_bytes": 4096},
 "layers": [{"repeat": 16, "forward_us": 1, "backward_input_us": 1, "backward_weight_us": 1,
             "output_bytes": 1024, "stash_bytes": 65536, "param_bytes": 4096}],
 "loss": {"forward_us": 1, "output_bytes": 4, "stash_bytes": 65536, "param_bytes": 4096}})";

class CmdExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("export");
    model_ = dir_ + "/model.json";
    WriteTextFile(model_, kModel);
  }
  // Generates a built-in schedule into dir_/<file>.
  std::string Generate(const std::string& schedule, const std::string& v,
                       const std::string& file) {
    const std::string path = dir_ + "/" + file;
    CliResult r = RunCli({"generate", "--schedule", schedule, "--pp", "4", "--microbatches", "8",
                          "--stages-per-rank", v, "-o", path});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return path;
  }
  std::string dir_, model_;
};

TEST_F(CmdExportTest, TorchtitanFilesReadBackIntoTheProgramAndTheModelsCut) {
  const std::string in = Generate("interleaved-1f1b", "2", "i.json");
  const std::string out = dir_ + "/tt.csv";
  CliResult r = RunCli({"export", in, "--to", "torchtitan", "--model", model_, "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("pipeline_parallel_schedule: PipelineScheduleMulti\n"
                               "num_pp_microbatches: 8\nlayer cut: --model, cut even\n"
                               "stage 0: E, layers 0-1\n"));
  ASSERT_OK_AND_ASSIGN(Schedule original, LoadSchedule(in));
  ASSERT_OK_AND_ASSIGN(Schedule back, ParseScheduleCsv(Slurp(out)));
  EXPECT_EQ(back.ranks, original.ranks);
  EXPECT_EQ(back.stage_to_rank, original.stage_to_rank);
  const std::string toml = Slurp(dir_ + "/tt.toml");
  EXPECT_THAT(toml, HasSubstr("[parallelism]\npipeline_parallel_degree = 4\n"
                              "pipeline_parallel_schedule = \"PipelineScheduleMulti\"\n"
                              "pipeline_parallel_schedule_csv = \"" + out + "\"\n"
                              "num_pp_microbatches = 8\n"));
  EXPECT_THAT(toml, HasSubstr("    [\"layers.14\", \"layers.15\", \"norm\", \"lm_head\"],\n]"));
  EXPECT_THAT(Slurp(dir_ + "/tt.py"), HasSubstr("def apply_jitpipe_pipeline(config):\n"));
}

TEST_F(CmdExportTest, ALoweredProgramExportsItsComputeOrder) {
  const std::string in = Generate("zbv", "2", "zbv.json");
  const std::string lowered = dir_ + "/zbv_lowered.json";
  CliResult l = RunCli({"lower", in, "--reduce-grad", "-o", lowered});
  ASSERT_EQ(l.exit_code, 0) << l.err;
  const std::string out = dir_ + "/zbv.csv";
  CliResult r = RunCli({"export", lowered, "--to", "torchtitan", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("pipeline_parallel_schedule: ZBVZeroBubble\n"));
  EXPECT_THAT(r.out, HasSubstr("note: the input is lowered: its "));
  EXPECT_THAT(Slurp(out), ::testing::Not(HasSubstr("SEND")));
  EXPECT_THAT(Slurp(out), ::testing::Not(HasSubstr("REDUCE_GRAD")));
}

TEST_F(CmdExportTest, MegatronPrintsTheLayoutFromTheFileOrTheFlag) {
  const std::string in = Generate("interleaved-1f1b", "2", "i.json");
  CliResult r = RunCli({"export", in, "--to", "megatron", "--layout", "Et|(t*2|)*6,tL"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("MEGATRON_PIPELINE_ARGS=(\n  --pipeline-model-parallel-size 4\n"
                               "  --num-layers 14\n"
                               "  --pipeline-model-parallel-layout 'Et|(t*2|)*6,tL'\n)\n"));
  EXPECT_THAT(r.out, HasSubstr("# Closest built-in schedule: interleaved 1F1B"));
  EXPECT_THAT(r.out, HasSubstr("# note: the order is not carried"));

  // The same layout recorded in the file is taken without the flag.
  ASSERT_OK_AND_ASSIGN(Schedule s, LoadSchedule(in));
  s.layout = "Et|(t*2|)*6,tL";
  const std::string recorded = dir_ + "/recorded.json";
  ASSERT_OK(SaveSchedule(recorded, s));
  const std::string args = dir_ + "/args.sh";
  CliResult f = RunCli({"export", recorded, "--to", "megatron", "-o", args});
  ASSERT_EQ(f.exit_code, 0) << f.err;
  EXPECT_THAT(f.out, HasSubstr("layer cut: the layout " + recorded + " records\n"));
  EXPECT_THAT(Slurp(args), HasSubstr(r.out.substr(r.out.find("MEGATRON_PIPELINE_ARGS"))));
  CliResult conflict = RunCli({"export", recorded, "--to", "megatron", "--layout", "Et*7|t*7L"});
  EXPECT_EQ(conflict.exit_code, 1);
  EXPECT_THAT(conflict.err, HasSubstr(recorded + " records layout \"Et|(t*2|)*6,tL\"; --layout "
                                      "\"Et*7|t*7L\" differs"));
}

TEST_F(CmdExportTest, RefusalsAndUsageErrors) {
  const std::string zbv = Generate("zbv", "2", "zbv.json");
  CliResult v = RunCli({"export", zbv, "--to", "megatron"});
  EXPECT_EQ(v.exit_code, 1);
  EXPECT_THAT(v.err, HasSubstr("jitpipe export: " + zbv + ": zbv (pp 4, v 2, 8 microbatches) "
                               "places its stages in a V"));
  CliResult no_to = RunCli({"export", zbv});
  EXPECT_EQ(no_to.exit_code, 2);
  EXPECT_THAT(no_to.err, HasSubstr("missing --to torchtitan|megatron"));
  CliResult no_csv = RunCli({"export", zbv, "--to", "torchtitan", "-o", dir_ + "/x.json"});
  EXPECT_EQ(no_csv.exit_code, 2);
  EXPECT_THAT(no_csv.err, HasSubstr("--to torchtitan needs -o OUT.csv"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/x.json"));
  CliResult help = RunCli({"export", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("usage: jitpipe export FILE --to torchtitan|megatron"));
  EXPECT_THAT(help.out, HasSubstr("--torchtitan-fields"));
}

}  // namespace
}  // namespace jitpipe::cmd_export_test
