#include "scheduler/ir/model.h"

#include <cmath>
#include <limits>
#include <string>

#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::model_test {
namespace {

using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::Message;
using ::jitpipe::testing::WriteTextFile;

// docs/design.md's example model.
constexpr char kDesignModel[] = R"({"format": "jitpipe.model", "version": 1,
 "defaults": {"forward_us": 1, "backward_input_us": 1, "backward_weight_us": 1,
              "input_bytes": 1048576, "output_bytes": 1048576,
              "stash_bytes": 4194304, "param_bytes": 16777216},
 "stages": [{"index": 7, "forward_us": 2}],
 "p2p": {"latency_us": 0, "gb_per_s": 0},
 "dp": {"size": 1, "reduce": "all_reduce", "param_dtype": "fp32", "grad_dtype": "fp32",
        "reduce_dtype": null, "latency_us": 10, "gb_per_s": 100}})";

std::string ModelWith(const std::string& body) {
  return R"({"format": "jitpipe.model", "version": 1)" + (body.empty() ? "" : ", " + body) + "}";
}

TEST(ModelTest, ParsesDesignExampleWithStageOverride) {
  ASSERT_OK_AND_ASSIGN(Model model, ParseModelJson(kDesignModel));
  StageCost plain = model.ForStage(0);
  EXPECT_EQ(plain.forward_us, 1);
  EXPECT_EQ(plain.backward_us, 2);
  EXPECT_EQ(plain.overlap_f_b_us, 3);
  EXPECT_FALSE(plain.overlap_f_b_given);
  EXPECT_EQ(plain.input_bytes, 1048576);
  EXPECT_EQ(plain.output_bytes, 1048576);
  EXPECT_EQ(plain.stash_bytes, 4194304);
  EXPECT_EQ(plain.param_bytes, 16777216);
  StageCost seventh = model.ForStage(7);
  EXPECT_EQ(seventh.forward_us, 2);
  EXPECT_EQ(seventh.backward_input_us, 1);
  EXPECT_EQ(seventh.stash_bytes, 4194304);
  EXPECT_EQ(model.dp.link.latency_us, 10);
  EXPECT_EQ(model.dp.link.gb_per_s, 100);
  EXPECT_FALSE(model.dp.reduce_dtype.has_value());
  EXPECT_OK(CheckModelFits(model, 8));
}

TEST(ModelTest, AbsentKeysTakeDocumentedDefaults) {
  ASSERT_OK_AND_ASSIGN(Model model, ParseModelJson(ModelWith("")));
  StageCost c = model.ForStage(3);
  EXPECT_EQ(c.forward_us, 0);
  EXPECT_EQ(c.backward_us, 0);
  EXPECT_EQ(c.input_bytes + c.output_bytes + c.stash_bytes + c.param_bytes, 0);
  EXPECT_EQ(model.p2p.latency_us, 0);
  EXPECT_EQ(model.p2p.gb_per_s, 0);
  EXPECT_EQ(model.dp.size, 1);
  EXPECT_EQ(model.dp.reduce, ReduceKind::kAllReduce);
  EXPECT_EQ(model.dp.param_dtype, Dtype::kFp32);
  EXPECT_EQ(model.dp.grad_dtype, Dtype::kFp32);
  EXPECT_EQ(model.dp.EffectiveReduceDtype(), Dtype::kFp32);
  EXPECT_EQ(model.dp.buckets, 1);
}

TEST(ModelTest, ReadsReductionBuckets) {
  ASSERT_OK_AND_ASSIGN(Model model, ParseModelJson(ModelWith(R"("dp": {"buckets": 8})")));
  EXPECT_EQ(model.dp.buckets, 8);
}

TEST(ModelTest, OverridesMergeKeyByKeyOverDefaults) {
  ASSERT_OK_AND_ASSIGN(
      Model model,
      ParseModelJson(ModelWith(R"("defaults": {"backward_input_us": 2, "backward_weight_us": 3,
                                              "backward_us": 4, "stash_bytes": 8},
                                  "stages": [{"index": 1, "backward_us": 6, "overlap_f_b_us": 5},
                                             {"index": 2, "stash_bytes": 0}])")));
  EXPECT_EQ(model.ForStage(0).backward_us, 4);  // given in defaults
  EXPECT_EQ(model.ForStage(1).backward_us, 6);
  EXPECT_EQ(model.ForStage(1).overlap_f_b_us, 5);
  EXPECT_TRUE(model.ForStage(1).overlap_f_b_given);
  EXPECT_EQ(model.ForStage(2).stash_bytes, 0);
  EXPECT_EQ(model.ForStage(3).stash_bytes, 8);
}

// Stash segments come with the stash_bytes of the same entry: an override
// that gives either replaces both of the defaults'; segments alone give the
// stash_bytes as their sum.
TEST(ModelTest, StashSegmentsResolveWithTheirEntry) {
  ASSERT_OK_AND_ASSIGN(
      Model model,
      ParseModelJson(ModelWith(R"("defaults": {"stash_bytes": 30, "stash_segments": [10, 20]},
                                  "stages": [{"index": 1, "stash_bytes": 7},
                                             {"index": 2, "stash_segments": [1, 2, 3]},
                                             {"index": 3, "forward_us": 1},
                                             {"index": 4, "stash_segments": []}])")));
  EXPECT_EQ(model.ForStage(0).stash_segments, (std::vector<int64_t>{10, 20}));
  EXPECT_EQ(model.ForStage(1).stash_bytes, 7);
  EXPECT_EQ(model.ForStage(1).StashAllocations(), (std::vector<int64_t>{7}));
  EXPECT_EQ(model.ForStage(2).stash_bytes, 6);
  EXPECT_EQ(model.ForStage(2).StashAllocations(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(model.ForStage(3).StashAllocations(), (std::vector<int64_t>{10, 20}));
  EXPECT_EQ(model.ForStage(4).stash_bytes, 0);  // [] is one buffer of the stash_bytes given
  EXPECT_EQ(model.ForStage(4).StashAllocations(), (std::vector<int64_t>{0}));
}

TEST(ModelTest, ComputeTimesFollowTheDesignRules) {
  ASSERT_OK_AND_ASSIGN(
      Model model,
      ParseModelJson(ModelWith(R"("defaults": {"forward_us": 1, "backward_input_us": 2,
                                              "backward_weight_us": 3},
                                  "stages": [{"index": 4, "overlap_f_b_us": 4.5}])")));
  EXPECT_EQ(model.ComputeUs(*ParseAction("0F0")), 1);
  EXPECT_EQ(model.ComputeUs(*ParseAction("0I0")), 2);
  EXPECT_EQ(model.ComputeUs(*ParseAction("0W0")), 3);
  EXPECT_EQ(model.ComputeUs(*ParseAction("0B0")), 5);  // I + W
  EXPECT_EQ(model.ComputeUs(*ParseAction("(1F1;3B0)OVERLAP_F_B")), 6);  // F + B
  EXPECT_EQ(model.ComputeUs(*ParseAction("(4F1;3B0)OVERLAP_F_B")), 4.5);
  EXPECT_EQ(model.ComputeUs(*ParseAction("0SEND_F0")), 0);
  EXPECT_EQ(model.ForStage(0).overlap_f_b_us, 6);
}

TEST(ModelTest, GradientAndReductionBytesFollowTheDtypes) {
  ASSERT_OK_AND_ASSIGN(
      Model model,
      ParseModelJson(ModelWith(R"("defaults": {"param_bytes": 32},
                                  "dp": {"size": 4, "reduce": "all_reduce", "param_dtype": "bf16",
                                         "grad_dtype": "fp32", "reduce_dtype": "fp8_e5m2"})")));
  EXPECT_EQ(model.ParamElements(0), 16);
  EXPECT_EQ(model.GradBytes(0), 64);
  EXPECT_EQ(model.ReduceBytes(0), 16);
  EXPECT_TRUE(model.dp.ReducesInOtherDtype());
  EXPECT_DOUBLE_EQ(model.ReduceTrafficBytes(0), 16 * 2.0 * 3 / 4);
  model.dp.reduce = ReduceKind::kReduceScatter;
  EXPECT_DOUBLE_EQ(model.ReduceTrafficBytes(0), 16 * 3.0 / 4);
  model.dp.reduce_dtype.reset();  // reduce in the gradient dtype: fp32 moves twice bf16's bytes
  EXPECT_EQ(model.ReduceBytes(0), 64);
  EXPECT_FALSE(model.dp.ReducesInOtherDtype());
  model.dp.size = 1;
  EXPECT_EQ(model.ReduceTrafficBytes(0), 0);
}

TEST(ModelTest, DtypesHaveTheirSizes) {
  struct Case {
    const char* name;
    int bytes;
  };
  for (const Case& c : {Case{"fp32", 4}, Case{"bf16", 2}, Case{"fp16", 2}, Case{"fp8_e4m3", 1},
                        Case{"fp8_e5m2", 1}}) {
    ASSERT_OK_AND_ASSIGN(Dtype d, ParseDtype(c.name));
    EXPECT_EQ(DtypeBytes(d), c.bytes) << c.name;
    EXPECT_EQ(DtypeName(d), c.name);
  }
}

TEST(ModelTest, LinkTransferTimeUsesLatencyAndBandwidth) {
  Link link{.latency_us = 5, .gb_per_s = 2};
  EXPECT_DOUBLE_EQ(link.TransferUs(4000), 5 + 2);  // 4000 bytes at 2e9 B/s = 2 us
  link.gb_per_s = 0;  // infinite bandwidth
  EXPECT_DOUBLE_EQ(link.TransferUs(1e12), 5);
}

struct BadModel {
  const char* body;
  const char* message;
};

class ModelErrorTest : public ::testing::TestWithParam<BadModel> {};

TEST_P(ModelErrorTest, RefusesWithExactMessage) {
  absl::StatusOr<Model> model = ParseModelJson(ModelWith(GetParam().body));
  ASSERT_FALSE(model.ok()) << GetParam().body;
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(model), GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Table, ModelErrorTest,
    ::testing::Values(
        BadModel{R"("defaults": {"stash_bytes": -1})",
                 R"("defaults.stash_bytes" must be a whole number >= 0, found -1)"},
        BadModel{R"("defaults": {"stash_bytes": 8, "stash_segments": [4, 2]})",
                 R"("defaults.stash_segments" sum to 6 bytes but "defaults.stash_bytes" is 8)"},
        BadModel{R"("stages": [{"index": 2, "stash_segments": [4, -2]}])",
                 R"("stages[0].stash_segments[1]" must be a whole number >= 0, found -2)"},
        BadModel{R"("defaults": {"stash_segments": 4096})",
                 R"("defaults.stash_segments" must be an array of byte sizes, found 4096)"},
        BadModel{R"("defaults": {"stash_segments": [1099511627776, 1]})",
                 R"("defaults.stash_segments" sum to 1099511627777 bytes; at most 1099511627776 (1 TiB) per stash)"},
        BadModel{R"("defaults": {"input_bytes": 1.5})",
                 R"("defaults.input_bytes" must be a whole number >= 0, found 1.5)"},
        BadModel{R"("stages": [{"index": 0, "output_bytes": "1MB"}])",
                 R"("stages[0].output_bytes" must be a whole number >= 0, found "1MB")"},
        BadModel{R"("defaults": {"forward_us": -2})",
                 R"("defaults.forward_us" must be a number from 0 to 1e+12, found -2)"},
        BadModel{R"("defaults": {"backward_weight_us": null})",
                 R"("defaults.backward_weight_us" must be a number from 0 to 1e+12, found null)"},
        BadModel{R"("stages": [{"index": -1}])",
                 R"("stages[0].index" must be a whole number >= 0, found -1)"},
        BadModel{R"("stages": [{"forward_us": 1}])", R"(missing "stages[0].index")"},
        BadModel{R"("stages": [{"index": 3}, {"index": 1}, {"index": 3}])",
                 R"("stages[2].index" is 3, already overridden by stages[0])"},
        BadModel{R"("stages": {"index": 3})", R"("stages" must be an array, found {"index":3})"},
        BadModel{R"("defaults": [])", R"("defaults" must be an object, found [])"},
        BadModel{R"("dp": {"grad_dtype": "fp64"})",
                 R"("dp.grad_dtype": unknown dtype "fp64"; expected fp32, bf16, fp16, )"
                 R"(fp8_e4m3 or fp8_e5m2)"},
        BadModel{R"("dp": {"reduce_dtype": "int8"})",
                 R"("dp.reduce_dtype": unknown dtype "int8"; expected fp32, bf16, fp16, )"
                 R"(fp8_e4m3 or fp8_e5m2)"},
        BadModel{R"("dp": {"reduce": "all_gather"})",
                 R"("dp.reduce" is "all_gather"; expected all_reduce or reduce_scatter)"},
        BadModel{R"("dp": {"size": 0})", R"("dp.size" must be a whole number >= 1, found 0)"},
        BadModel{R"("dp": {"buckets": 0})",
                 R"("dp.buckets" must be a whole number >= 1, found 0)"},
        BadModel{R"("dp": {"buckets": 2.5})",
                 R"("dp.buckets" must be a whole number >= 1, found 2.5)"},
        BadModel{R"("dp": {"gb_per_s": -100})",
                 R"("dp.gb_per_s" must be 0 (unlimited) or a number from 1e-06 to 1e+09 )"
                 R"((10^9 bytes per second), found -100)"},
        // Ranges that keep every derived sum finite (model.h): a time of
        // 1e308 us made "makespan inf us", a bandwidth of 1e-300 GB/s a
        // transfer of 1e301 us, 2^31 - 1 buckets an 11 s run to bad_alloc.
        BadModel{R"("defaults": {"forward_us": 1e13})",
                 R"("defaults.forward_us" must be a number from 0 to 1e+12, found 1e+13)"},
        BadModel{R"("p2p": {"gb_per_s": 1e-300})",
                 R"("p2p.gb_per_s" must be 0 (unlimited) or a number from 1e-06 to 1e+09 )"
                 R"((10^9 bytes per second), found 1e-300)"},
        BadModel{R"("dp": {"buckets": 4097})",
                 R"("dp.buckets" must be a whole number from 1 to 4096, found 4097)"},
        BadModel{R"("dp": {"size": 1048577})",
                 R"("dp.size" must be a whole number from 1 to 1048576, found 1048577)"},
        BadModel{R"("p2p": {"latency_us": "fast"})",
                 R"("p2p.latency_us" must be a number from 0 to 1e+12, found "fast")"},
        // fp8 parameters of 2^62 bytes would have 2^64 bytes of fp32 gradients.
        BadModel{R"("defaults": {"param_bytes": 4611686018427387904})",
                 R"("defaults.param_bytes" is 4611686018427387904 bytes; at most )"
                 R"(1099511627776 (1 TiB) per buffer)"},
        BadModel{R"("defaults": {"param_bytes": 6})",
                 R"("defaults.param_bytes" is 6, not a whole number of fp32 elements )"
                 R"((4 bytes each; dp.param_dtype))"}));

TEST(ModelTest, RefusesNewerVersionAndOtherFormats) {
  EXPECT_EQ(Message(ParseModelJson(R"({"format": "jitpipe.model", "version": 3})")),
            "jitpipe.model version 3 was written by a newer jitpipe; this build reads versions "
            "up to 2");
  // Version 2 describes layers: it needs a partition (model_file.h reads both).
  EXPECT_EQ(Message(ParseModelJson(R"({"format": "jitpipe.model", "version": 2})")),
            "a version 2 model describes layers, not stages; this needs version 1 (or a "
            "command that partitions layers into stages)");
  EXPECT_EQ(Message(ParseModelJson(R"({"format": "jitpipe.schedule", "version": 1})")),
            R"("format" is "jitpipe.schedule"; expected "jitpipe.model")");
}

TEST(ModelTest, ValidatesModelsBuiltInCode) {
  Model model;
  model.defaults.forward_us = std::nan("");
  EXPECT_EQ(Message(ValidateModel(model)),
            R"("defaults.forward_us" must be a number from 0 to 1e+12, found nan)");
  model.defaults.forward_us = std::numeric_limits<double>::infinity();
  EXPECT_EQ(Message(ValidateModel(model)),
            R"("defaults.forward_us" must be a number from 0 to 1e+12, found inf)");
  model.defaults.forward_us = 1;
  StageOverride over;
  over.spec.output_bytes = -3;
  model.stages.push_back(over);
  EXPECT_EQ(Message(ValidateModel(model)),
            R"("stages[0].output_bytes" must be a whole number >= 0, found -3)");
  model.stages[0].spec.output_bytes = 3;
  EXPECT_OK(ValidateModel(model));
}

TEST(ModelTest, CheckModelFitsRefusesOverridesBeyondTheSchedule) {
  ASSERT_OK_AND_ASSIGN(Model model, ParseModelJson(kDesignModel));
  EXPECT_EQ(Message(CheckModelFits(model, 4)),
            R"("stages[0].index" is 7 but the schedule has 4 stages (0 to 3))");
}

TEST(ModelTest, LoadModelPrefixesErrorsWithThePath) {
  std::string dir = MakeTempDir("model");
  WriteTextFile(dir + "/m.json", ModelWith(R"("dp": {"size": 0})"));
  EXPECT_EQ(Message(LoadModel(dir + "/m.json")),
            dir + R"(/m.json: "dp.size" must be a whole number >= 1, found 0)");
  WriteTextFile(dir + "/ok.json", kDesignModel);
  EXPECT_OK(LoadModel(dir + "/ok.json"));
  EXPECT_EQ(LoadModel(dir + "/none.json").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace jitpipe::model_test
