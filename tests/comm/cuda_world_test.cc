// The one-GPU CUDA backend (comm/cuda/cuda_world.h) on a device: transfers
// between ranks' device buffers in either posting order, a receive turned
// into a stream dependency, collectives in fp32 and on a bf16 wire, and the
// watchdog ending a transfer that never matches. Every test skips without
// a CUDA device; the first one checks what a machine without one says.
#include "comm/cuda/cuda_world.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::cuda_world_test {
namespace {

using ::jitpipe::testing::Message;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr absl::Duration kLong = absl::Seconds(20);

// Device memory of `n` floats, filled and read back through the host.
class DeviceFloats {
 public:
  explicit DeviceFloats(size_t n) : n_(n) {
    if (cudaMalloc(&data_, n * sizeof(float) + 1) != cudaSuccess) data_ = nullptr;
  }
  ~DeviceFloats() { (void)cudaFree(data_); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;

  void Set(const std::vector<float>& values) {
    ASSERT_EQ(cudaMemcpy(data_, values.data(), n_ * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  std::vector<float> Get() const {
    std::vector<float> out(n_);
    EXPECT_EQ(cudaMemcpy(out.data(), data_, n_ * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return out;
  }
  float* data() { return static_cast<float*>(data_); }
  absl::Span<float> span() { return {data(), n_}; }
  absl::Span<std::byte> bytes() { return {static_cast<std::byte*>(data_), n_ * sizeof(float)}; }

 private:
  size_t n_;
  void* data_ = nullptr;
};

std::vector<float> Iota(size_t n, float start) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

class CudaWorldTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::Status device = CheckCudaDevice(0); !device.ok()) GTEST_SKIP() << device.message();
  }
  std::unique_ptr<CudaWorld> MakeWorld(int size, CudaOptions options = {}) {
    absl::StatusOr<std::unique_ptr<CudaWorld>> world = CreateCudaWorld(size, options);
    EXPECT_OK(world.status());
    return world.ok() ? *std::move(world) : nullptr;
  }
};

// Runs on every machine: without a device the factory says so, with the
// words the CLI shows ("no CUDA device"), and never crashes.
TEST(CudaWorldNoDeviceTest, WithoutADeviceTheFactorySaysSo) {
  int count = 0;
  if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) {
    GTEST_SKIP() << "this machine has a CUDA device";
  }
  (void)cudaGetLastError();
  const absl::Status checked = CheckCudaDevice(0);
  EXPECT_EQ(checked.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(Message(checked), StartsWith("no CUDA device"));
  absl::StatusOr<std::unique_ptr<CudaWorld>> world = CreateCudaWorld(4, {});
  EXPECT_EQ(world.status(), checked);
}

// Receive first (one copy once the send posts) or send first (staged, then
// copied out): the bytes arrive; the staged bytes are counted while staged.
TEST_F(CudaWorldTest, DeliversDeviceBuffersInEitherPostingOrder) {
  std::unique_ptr<CudaWorld> world = MakeWorld(2);
  ASSERT_NE(world, nullptr);
  Transport& sender = world->transport(0);
  Transport& receiver = world->transport(1);
  for (bool recv_first : {true, false}) {
    SCOPED_TRACE(recv_first ? "receive first" : "send first");
    DeviceFloats out(1000), in(1000);
    out.Set(Iota(1000, recv_first ? 1 : 5000));
    RequestId recv = 0, send = 0;
    if (recv_first) {
      ASSERT_OK_AND_ASSIGN(recv, receiver.PostRecv(0, 7, in.bytes(), {.action = "1RECV_F0"}));
      ASSERT_OK_AND_ASSIGN(bool issued, receiver.StreamWait(recv, receiver.device_streams()->compute));
      EXPECT_FALSE(issued);  // its send is not posted yet
      ASSERT_OK_AND_ASSIGN(send, sender.PostSend(1, 7, out.bytes(), {}));
    } else {
      ASSERT_OK_AND_ASSIGN(send, sender.PostSend(1, 7, out.bytes(), {}));
      ASSERT_OK(sender.Wait(send, kLong));  // staged: complete without the receive
      EXPECT_EQ(world->InFlightBytes(), 4000);
      ASSERT_OK_AND_ASSIGN(recv, receiver.PostRecv(0, 7, in.bytes(), {}));
    }
    ASSERT_OK(receiver.Wait(recv, kLong));
    if (recv_first) {
      ASSERT_OK(sender.Wait(send, kLong));
    }
    EXPECT_EQ(in.Get(), Iota(1000, recv_first ? 1 : 5000));
    EXPECT_EQ(world->InFlightBytes(), 0);
  }
}

// The compute stream waits for the receive on the device: a copy enqueued
// after StreamWait on the compute stream reads the received bytes, with no
// host wait in between.
TEST_F(CudaWorldTest, AStreamWaitOrdersTheComputeStreamAfterTheReceive) {
  std::unique_ptr<CudaWorld> world = MakeWorld(2);
  ASSERT_NE(world, nullptr);
  DeviceFloats out(1 << 20), in(1 << 20), copy(1 << 20);
  out.Set(std::vector<float>(1 << 20, 3.5f));
  Transport& receiver = world->transport(1);
  ASSERT_OK_AND_ASSIGN(RequestId recv, receiver.PostRecv(0, 1, in.bytes(), {}));
  ASSERT_OK_AND_ASSIGN(RequestId send, world->transport(0).PostSend(1, 1, out.bytes(), {}));
  cudaStream_t compute = static_cast<cudaStream_t>(receiver.device_streams()->compute);
  ASSERT_OK_AND_ASSIGN(bool ordered, receiver.StreamWait(recv, compute));
  ASSERT_TRUE(ordered);
  ASSERT_EQ(cudaMemcpyAsync(copy.data(), in.data(), (1 << 20) * sizeof(float),
                            cudaMemcpyDeviceToDevice, compute),
            cudaSuccess);
  ASSERT_OK_AND_ASSIGN(RequestId marker, receiver.PostMarker({}));
  ASSERT_OK(receiver.Wait(marker, kLong));
  EXPECT_EQ(copy.Get(), std::vector<float>(1 << 20, 3.5f));
  ASSERT_OK(receiver.Wait(recv, kLong));
  ASSERT_OK(world->transport(0).Wait(send, kLong));
}

// All-reduce (sum, average) and reduce-scatter over requested groups of 4
// ranks posted from 4 threads, in 3 buckets.
TEST_F(CudaWorldTest, ReducesOverGroupsInBuckets) {
  CudaOptions options;
  options.reduction.buckets = 3;
  std::unique_ptr<CudaWorld> world = MakeWorld(4, options);
  ASSERT_NE(world, nullptr);
  ASSERT_OK(world->CreateGroups({Group{{0, 2}}, Group{{1, 3}}}, kLong));
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      Transport& t = world->transport(w);
      const Group group{{w % 2, w % 2 + 2}};
      DeviceFloats sum(10), average(10), scatter(8);
      sum.Set(Iota(10, static_cast<float>(w)));
      average.Set(Iota(10, static_cast<float>(w)));
      scatter.Set(Iota(8, static_cast<float>(10 * w)));
      ASSERT_OK_AND_ASSIGN(RequestId a, t.PostAllReduce(group, sum.span(), ReduceOp::kSum, {}));
      ASSERT_OK_AND_ASSIGN(RequestId b,
                           t.PostAllReduce(group, average.span(), ReduceOp::kAverage, {}));
      const int index = group.IndexOf(w);
      ASSERT_OK_AND_ASSIGN(RequestId c,
                           t.PostReduceScatter(group, scatter.span(),
                                               scatter.span().subspan(4 * index, 4),
                                               ReduceOp::kSum, {}));
      for (RequestId id : {a, b, c}) ASSERT_OK(t.Wait(id, kLong));
      const float ranks = static_cast<float>(group.ranks[0] + group.ranks[1]);
      std::vector<float> want_sum(10), want_average(10);
      for (int i = 0; i < 10; ++i) {
        want_sum[i] = ranks + 2.0f * i;
        want_average[i] = want_sum[i] / 2;
      }
      EXPECT_EQ(sum.Get(), want_sum);
      EXPECT_EQ(average.Get(), want_average);
      const std::vector<float> got = scatter.Get();
      for (int i = 0; i < 4; ++i) EXPECT_EQ(got[4 * index + i], 10 * ranks + 2.0f * (4 * index + i));
    });
  }
  for (std::thread& t : threads) t.join();
}

// A bf16 wire rounds the operands and the sum to bf16: 1 + 2^-10 is 1 in
// bf16, so two of them sum to exactly 2.
TEST_F(CudaWorldTest, ABf16WireRoundsToBf16) {
  CudaOptions options;
  options.reduction.wire = WireType::kBf16;
  std::unique_ptr<CudaWorld> world = MakeWorld(2, options);
  ASSERT_NE(world, nullptr);
  DeviceFloats a(2), b(2);
  a.Set({1.0f + std::ldexp(1.0f, -10), 3.0f});
  b.Set({1.0f + std::ldexp(1.0f, -10), 5.0f});
  const Group all{{0, 1}};
  ASSERT_OK_AND_ASSIGN(RequestId x, world->transport(0).PostAllReduce(all, a.span(), ReduceOp::kSum, {}));
  ASSERT_OK_AND_ASSIGN(RequestId y, world->transport(1).PostAllReduce(all, b.span(), ReduceOp::kSum, {}));
  ASSERT_OK(world->transport(0).Wait(x, kLong));
  ASSERT_OK(world->transport(1).Wait(y, kLong));
  EXPECT_EQ(a.Get(), (std::vector<float>{2.0f, 8.0f}));
  EXPECT_EQ(b.Get(), (std::vector<float>{2.0f, 8.0f}));
}

TEST_F(CudaWorldTest, CollectivesRefuseHostMemory) {
  std::unique_ptr<CudaWorld> world = MakeWorld(2);
  ASSERT_NE(world, nullptr);
  std::vector<float> host(4);
  absl::StatusOr<RequestId> posted = world->transport(0).PostAllReduce(
      Group{{0, 1}}, absl::MakeSpan(host), ReduceOp::kSum, {.action = "0REDUCE_GRAD"});
  EXPECT_EQ(posted.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(posted), "rank 0: all-reduce 0REDUCE_GRAD over 2 ranks: the buffer is host "
                             "memory; the device backends reduce device memory");
}

// A receive whose send never comes: the watchdog hands its handler the
// rank and the operation, then aborts the job, which fails the receive.
TEST_F(CudaWorldTest, TheWatchdogEndsATransferThatNeverMatches) {
  std::unique_ptr<CudaWorld> world = MakeWorld(2);
  ASSERT_NE(world, nullptr);
  absl::Notification fired;
  int rank = -1;
  absl::Status why;
  world->StartWatchdog(absl::Milliseconds(100), [&](int w, const absl::Status& status) {
    rank = w;
    why = status;
    fired.Notify();
  });
  DeviceFloats in(4);
  ASSERT_OK_AND_ASSIGN(RequestId recv,
                       world->transport(1).PostRecv(0, 3, in.bytes(),
                                                    {.program_index = 2, .action = "1RECV_B0"}));
  ASSERT_TRUE(fired.WaitForNotificationWithTimeout(kLong));
  EXPECT_EQ(rank, 1);
  EXPECT_EQ(why.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(Message(why), "watchdog: rank 1: receive 1RECV_B0 from rank 0 (index 2) not "
                          "complete after 100ms");
  const absl::Status waited = world->transport(1).Wait(recv, kLong);
  EXPECT_EQ(waited.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(Message(waited), StartsWith("rank 1 failed: watchdog: rank 1: receive 1RECV_B0"));
  EXPECT_TRUE(world->aborted());
  EXPECT_EQ(world->Barrier(0, kLong).code(), absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace jitpipe::cuda_world_test
