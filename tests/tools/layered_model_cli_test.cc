// Version 2 (layered) models on the commands that take --model: even cuts,
// --layout, --partition balanced, and the same layers for every schedule.
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/testdata.h"

namespace jitpipe::layered_model_cli_test {
namespace {

using ::jitpipe::testing::CliResult;
using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::RunCli;
using ::jitpipe::testing::WriteTextFile;
using ::testing::HasSubstr;

// Embedding, 8 layers (F 1, I 1, W 1), loss; 1 MiB stash per layer.
constexpr char kLayered[] = R"({"format": "jitpipe.model", "version": 2,
 "embedding": {"output_bytes": 1024, "param_bytes": 4096},
 "layers": [{"repeat": 8, "forward_us": 1, "backward_input_us": 1, "backward_weight_us": 1,
             "output_bytes": 1024, "stash_bytes": 1048576, "param_bytes": 4096}],
 "loss": {"forward_us": 2, "backward_input_us": 2, "backward_weight_us": 2, "output_bytes": 4,
          "stash_bytes": 2097152, "param_bytes": 4096}})";

class LayeredModelCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("layered");
    model_ = dir_ + "/layered.json";
    WriteTextFile(model_, kLayered);
  }
  std::string Generate(const std::string& name, int v) {
    const std::string out = dir_ + "/" + name + ".json";
    CliResult r = RunCli({"generate", "--schedule", name, "--pp", "4", "--microbatches", "8",
                          "--stages-per-rank", std::to_string(v), "-o", out});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return out;
  }
  nlohmann::json Simulate(const std::string& schedule, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"simulate", schedule, "--model", model_, "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    CliResult r = RunCli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
  }
  static double TotalBusy(const nlohmann::json& sim) {
    double sum = 0;
    for (const nlohmann::json& rank : sim["ranks"]) sum += rank["busy_us"].get<double>();
    return sum;
  }
  std::string dir_, model_;
};

// 1F1B (4 stages), interleaved (8) and ZB-V (8, V placement) run the same
// 8 microbatches of the same model: 8 x (3 x 8 + 6) = 240 us of compute.
TEST_F(LayeredModelCliTest, EverySchedulesRunsTheSameLayers) {
  for (const auto& [name, v] : {std::pair{"1f1b", 1}, std::pair{"interleaved-1f1b", 2},
                                std::pair{"zbv", 2}, std::pair{"dualpipe", 2}}) {
    EXPECT_DOUBLE_EQ(TotalBusy(Simulate(Generate(name, v))), 240) << name;
  }
}

TEST_F(LayeredModelCliTest, LayoutAndBalancedCuts) {
  const std::string s = Generate("1f1b", 1);
  const double even = Simulate(s)["makespan_us"].get<double>();
  const double skewed = Simulate(s, {"--layout", "Et*5|t|t|tL"})["makespan_us"].get<double>();
  EXPECT_GT(skewed, even);
  const double balanced = Simulate(s, {"--partition", "balanced"})["makespan_us"].get<double>();
  EXPECT_LE(balanced, even);
  CliResult plan = RunCli({"plan", s, "--model", model_, "--layout", "Et*5|t|t|tL", "--json"});
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  nlohmann::json j = nlohmann::json::parse(plan.out);
  EXPECT_EQ(j["worst_rank"], 0);  // five layers' stashes
  CliResult svg = RunCli({"render", s, "--model", model_, "-o", dir_ + "/s.svg"});
  EXPECT_EQ(svg.exit_code, 0) << svg.err;
  CliResult lowered = RunCli({"lower", s, "--reduce-grad", "--overlap", "--model", model_});
  EXPECT_EQ(lowered.exit_code, 0) << lowered.err;
}

// plan prints every rank's memory, all of it, and the heaviest rank against
// the device: 1F1B pp 4, m 8 under an even cut holds 4 microbatches of 2
// layers (8 MiB of stashes) and the embedding on rank 0.
TEST_F(LayeredModelCliTest, PlanReportsTheHeaviestRankAgainstTheDevice) {
  const std::string s = Generate("1f1b", 1);
  const std::string small = dir_ + "/small.json";
  std::string text = kLayered;
  text.insert(text.rfind('}'), R"(, "device": {"memory_bytes": 8388608})");
  WriteTextFile(small, text);
  CliResult r = RunCli({"plan", s, "--model", small});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("memory per rank, all of it (jit activations, even cut; fp32 "
                               "parameters, fp32 gradients, optimizer adam (2 fp32 states))"));
  EXPECT_THAT(r.out, HasSubstr("heaviest rank: 0, "));
  // The standard reserve: 5% + min(1 GiB, 5%) of 8 MiB = 838860 B.
  EXPECT_THAT(r.out, HasSubstr(" of 8.00 MiB less a 819.20 KiB reserve: misses by "));
  EXPECT_THAT(r.out, HasSubstr("(out of memory)\n"));
  CliResult j = RunCli({"plan", s, "--model", small, "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  nlohmann::json memory = nlohmann::json::parse(j.out)["memory"];
  EXPECT_EQ(memory["heaviest_rank"], 0);
  EXPECT_EQ(memory["fits"], false);
  const nlohmann::json& r0 = memory["ranks"][0];
  EXPECT_EQ(r0["parameters_bytes"], 3 * 4096);   // embedding + 2 layers
  EXPECT_EQ(r0["gradients_bytes"], 3 * 4096);
  EXPECT_EQ(r0["optimizer_bytes"], 2 * 3 * 4096);  // Adam, fp32: two states, no master copy
  EXPECT_GE(r0["activations_bytes"].get<int64_t>(), 4 * 2 * 1048576);
  EXPECT_EQ(r0["reserve_bytes"], 838860);
  EXPECT_EQ(r0["margin_bytes"].get<int64_t>(),
            8388608 - 838860 - r0["total_bytes"].get<int64_t>());
  // --memory-limit replaces the device's limit; --reserve sets what it keeps.
  CliResult big = RunCli({"plan", s, "--model", small, "--json", "--memory-limit", "1GiB",
                          "--reserve", "0"});
  ASSERT_EQ(big.exit_code, 0) << big.err;
  const nlohmann::json big_json = nlohmann::json::parse(big.out);
  const nlohmann::json& b0 = big_json["memory"]["ranks"][0];
  EXPECT_EQ(b0["limit_bytes"], 1073741824);
  EXPECT_EQ(b0["reserve_bytes"], 0);
  EXPECT_EQ(b0["fits"], true);
  CliResult pct = RunCli({"plan", s, "--model", small, "--json", "--memory-limit", "1GiB",
                          "--reserve", "10%"});
  ASSERT_EQ(pct.exit_code, 0) << pct.err;
  EXPECT_EQ(nlohmann::json::parse(pct.out)["memory"]["ranks"][0]["reserve_bytes"], 107374182);
  CliResult bad = RunCli({"plan", s, "--model", small, "--reserve", "lots"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--reserve \"lots\" is neither standard, a percentage (8%) "
                                 "nor a byte size (2GiB)"));
}

// One set of numbers: plan's trace counts what each rank holds the whole
// step (mem.resident_parameters, mem.optimizer) in mem.live, so that its
// peak is the rank's total in the all-of-it table; the jit peak of the first
// table is that total less the parameters and the optimizer state. (A model
// without times: the trace is over program index, the plan's own order.)
TEST_F(LayeredModelCliTest, PlanTraceAndTablesShowTheSameTotals) {
  const std::string s = Generate("1f1b", 1);
  const std::string sizes = dir_ + "/sizes.json";
  std::string text = kLayered;  // every time 0: a model of sizes only
  for (const std::string key : {"forward_us", "backward_input_us", "backward_weight_us"}) {
    for (const std::string value : {"1", "2"}) {
      const std::string from = "\"" + key + "\": " + value;
      for (size_t at; (at = text.find(from)) != std::string::npos;) {
        text.replace(at, from.size(), "\"" + key + "\": 0");
      }
    }
  }
  WriteTextFile(sizes, text);
  const std::string trace = dir_ + "/plan.trace.json";
  CliResult r = RunCli({"plan", s, "--model", sizes, "--json", "--trace", trace});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json plan = nlohmann::json::parse(r.out);
  std::ifstream in(trace);
  const nlohmann::json t = nlohmann::json::parse(in);
  std::map<int, double> live;
  std::map<int, double> parameters;
  for (const nlohmann::json& e : t["traceEvents"]) {
    if (e.value("ph", "") != "C") continue;
    const int pid = e["pid"];
    const double bytes = e["args"]["bytes"];
    if (e["name"] == "mem.live") live[pid] = std::max(live[pid], bytes);
    if (e["name"] == "mem.resident_parameters") parameters[pid] = bytes;
  }
  for (const nlohmann::json& rank : plan["memory"]["ranks"]) {
    const int r0 = rank["rank"];
    EXPECT_EQ(live[r0], rank["total_bytes"].get<double>()) << "rank " << r0;
    EXPECT_EQ(parameters[r0], rank["parameters_bytes"].get<double>()) << "rank " << r0;
    EXPECT_EQ(plan["ranks"][r0]["jit_peak_bytes"].get<int64_t>(),
              rank["total_bytes"].get<int64_t>() - rank["parameters_bytes"].get<int64_t>() -
                  rank["optimizer_bytes"].get<int64_t>())
        << "rank " << r0;
  }
}

// compare on a layered model: every schedule and v doing the same work,
// sorted among those that fit, --json, the winner's SVG.
TEST_F(LayeredModelCliTest, CompareRanksEverySchedule) {
  const std::string svg = dir_ + "/best.svg";
  CliResult r = RunCli({"compare", "--pp", "4", "--microbatches", "8", "--model", model_,
                        "--svg", svg});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(": pp 4, 8 microbatches; 10 layers cut evenly; every row runs "
                               "the same layers (60 us of compute per rank on average)\n"));
  EXPECT_THAT(r.out, HasSubstr("the device (no limit in the model)"));
  EXPECT_THAT(r.out, HasSubstr("\n* "));
  // step, bubble = pipeline + imbalance, span bubble; no workload: no
  // tokens or MFU.
  EXPECT_THAT(r.out, HasSubstr("\n  zbv                 2      96.00   50.00%"));
  EXPECT_THAT(r.out, HasSubstr("tok/s/GPU, MFU: the model gives no workload"));
  std::string drawn;
  {
    std::ifstream in(svg);
    drawn.assign(std::istreambuf_iterator<char>(in), {});
  }
  EXPECT_THAT(drawn, HasSubstr("<svg"));
  CliResult j = RunCli({"compare", "--pp", "4", "--microbatches", "8", "--model", model_,
                        "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  nlohmann::json out = nlohmann::json::parse(j.out);
  const nlohmann::json& rows = out["schedules"];
  ASSERT_GE(rows.size(), 10u);
  EXPECT_EQ(rows[0]["best"], true);
  EXPECT_THAT(drawn, HasSubstr(rows[0]["schedule"].get<std::string>()));
  for (const nlohmann::json& row : rows) {
    EXPECT_DOUBLE_EQ(row["work_us"].get<double>(), 60);
    for (const char* key : {"makespan_us", "bubble_fraction", "exposed_reduce_us",
                            "heaviest_rank", "heaviest_bytes", "fits", "layout", "memory"}) {
      EXPECT_TRUE(row.contains(key)) << key;
    }
  }
  // A device no row fits: every row is OOM, and there is no winner to draw.
  const std::string tiny = dir_ + "/tiny.json";
  std::string text = kLayered;
  text.insert(text.rfind('}'), R"(, "device": {"memory_bytes": 1024})");
  WriteTextFile(tiny, text);
  CliResult oom = RunCli({"compare", "--pp", "4", "--microbatches", "8", "--model", tiny,
                          "--svg", dir_ + "/none.svg"});
  EXPECT_EQ(oom.exit_code, 1);
  EXPECT_THAT(oom.out, HasSubstr("no schedule fits: every row runs out of memory on some rank"));
  EXPECT_THAT(oom.out, HasSubstr("OOM -"));
  EXPECT_THAT(oom.err, HasSubstr("no schedule fits the device, so there is no winner to draw"));
}

// --global-batch G: G / (dp 2 x microbatch size 2) microbatches; tokens
// per step 8 x 2 x 4 x 2 = 128 on pp 4 x dp 2 = 8 GPUs; MFU from the
// model FLOPs (10^6 per microbatch) at --peak-tflops 1.
TEST_F(LayeredModelCliTest, CompareTakesAGlobalBatchAndDerivesTokensAndMfu) {
  const std::string sized = dir_ + "/sized.json";
  std::string text = kLayered;
  text.insert(text.rfind('}'), R"(, "dp": {"size": 2},
      "workload": {"microbatch_size": 2, "seq_len": 4, "model_flops_per_microbatch": 1e6})");
  WriteTextFile(sized, text);
  CliResult j = RunCli({"compare", "--pp", "4", "--global-batch", "32", "--model", sized,
                        "--peak-tflops", "1", "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const nlohmann::json out = nlohmann::json::parse(j.out);
  EXPECT_EQ(out["microbatches"], 8);
  EXPECT_EQ(out["global_batch"], 32);
  EXPECT_EQ(out["gpus"], 8);
  for (const nlohmann::json& row : out["schedules"]) {
    const double step_s = row["makespan_us"].get<double>() * 1e-6;
    EXPECT_DOUBLE_EQ(row["step_s"].get<double>(), step_s);
    EXPECT_EQ(row["tokens_per_step"], 128);
    EXPECT_DOUBLE_EQ(row["tokens_per_s_per_gpu"].get<double>(), 128 / step_s / 8);
    EXPECT_DOUBLE_EQ(row["mfu"].get<double>(), 1e6 * 8 * 2 / (step_s * 8 * 1e12));
    EXPECT_NEAR(row["pipeline_bubble_fraction"].get<double>() +
                    row["imbalance_fraction"].get<double>(),
                row["bubble_fraction"].get<double>(), 1e-12);
  }
  CliResult table = RunCli({"compare", "--pp", "4", "--global-batch", "32", "--model", sized});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr(": pp 4, 8 microbatches;"));
  EXPECT_THAT(table.out, HasSubstr("tok/s/GPU = 128 tokens per step (8 microbatches x b 2 x s 4 "
                                   "x dp 2 = global batch 32 sequences) / step / 8 GPUs"));
  EXPECT_THAT(table.out, HasSubstr("MFU: give --peak-tflops"));
  CliResult uneven = RunCli({"compare", "--pp", "4", "--global-batch", "30", "--model", sized});
  EXPECT_EQ(uneven.exit_code, 1);
  EXPECT_THAT(uneven.err, HasSubstr(sized + ": --global-batch: global batch 30 is not a "
                                    "multiple of dp 2 x microbatch size 2 = 4 sequences (28 or "
                                    "32 is)"));
  CliResult both = RunCli({"compare", "--pp", "4", "--global-batch", "32", "--microbatches", "4",
                           "--model", sized});
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_THAT(both.err, HasSubstr("--global-batch 32 makes 8 microbatches (dp 2 x microbatch "
                                  "size 2), but --microbatches is 4; give one of them"));
  CliResult unsized = RunCli({"compare", "--pp", "4", "--global-batch", "32", "--model", model_});
  EXPECT_EQ(unsized.exit_code, 1);
  EXPECT_THAT(unsized.err, HasSubstr("the model does not give its microbatch size"));
  // The auto scheduler takes the same global batch and prints the same figures.
  CliResult chosen = RunCli({"generate", "--schedule", "auto", "--pp", "4", "--global-batch",
                             "32", "--model", sized, "--memory-limit", "1GiB", "--peak-tflops",
                             "1", "-o", dir_ + "/auto.json"});
  ASSERT_EQ(chosen.exit_code, 0) << chosen.err;
  EXPECT_THAT(chosen.out, HasSubstr("tokens/s per GPU (128 tokens per step on 8 GPUs), MFU "));
  EXPECT_THAT(chosen.out, HasSubstr("of 1 TFLOP/s; derived from the simulated step"));
  EXPECT_EQ(RunCli({"compare", "--pp", "4", "--model", sized}).exit_code, 2);
  EXPECT_EQ(RunCli({"compare", "--pp", "4", "--microbatches", "8", "--model", sized,
                    "--peak-tflops", "-1"}).exit_code, 2);
}

TEST_F(LayeredModelCliTest, Errors) {
  const std::string s = Generate("1f1b", 1);
  CliResult stages = RunCli({"simulate", s, "--model", model_, "--layout", "Et*8|L"});
  EXPECT_EQ(stages.exit_code, 1);
  EXPECT_THAT(stages.err, HasSubstr(model_ + ": layout \"Et*8|L\" has 2 stages; the schedule "
                                    "has 4 per chain\n"));
  const std::string v1 = dir_ + "/v1.json";
  WriteTextFile(v1, R"({"format": "jitpipe.model", "version": 1})");
  CliResult old = RunCli({"plan", s, "--model", v1, "--partition", "balanced"});
  EXPECT_EQ(old.exit_code, 1);
  EXPECT_THAT(old.err, HasSubstr(v1 + ": --layout and --partition balanced need a version 2 "
                                 "model"));
  CliResult bad = RunCli({"simulate", s, "--model", model_, "--partition", "fast"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--partition: unknown partition \"fast\"; expected even or "
                                 "balanced"));
}

}  // namespace
}  // namespace jitpipe::layered_model_cli_test
