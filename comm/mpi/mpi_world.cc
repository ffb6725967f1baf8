// The MPI world: MPI's lifetime in this process, the SIGTERM watcher, the
// requested groups and the job-level collectives (contract: mpi_world.h).
#include "comm/mpi/mpi_world.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "comm/launched_process.h"
#include "comm/mpi/mpi_error.h"
#include "comm/mpi/mpi_job.h"
#include "comm/mpi/mpi_transport.h"
#include "comm/record_channel.h"

namespace jitpipe {
namespace {

constexpr absl::string_view kSigtermMessage =
    "terminated by the launcher (SIGTERM): mpirun sends it once another process of the job "
    "has died or exited with an error, or when mpirun itself is interrupted";

// The record channel (comm/record_channel.h): its setup's bound, and the
// longest payload rank 0 takes over it.
constexpr absl::Duration kChannelSetup = absl::Seconds(10);
constexpr int64_t kMaxChannelPayload = int64_t{1} << 30;

// Each process's end of the record channel: rank 0's hub, or a link to it.
// Both null where it could not be opened (the exchange then goes over MPI
// only).
struct RecordChannel {
  std::unique_ptr<RecordHub> hub;
  std::unique_ptr<RecordLink> link;
};

// Opens the record channel while the job is healthy: rank 0 listens and
// broadcasts where (MPI_Bcast on the job's communicator; every process calls
// this once, at creation, before it starts threads); the others connect.
// Best effort, bounded by kChannelSetup: a rank that cannot connect, or a
// rank 0 that cannot listen, leaves that rank on MPI alone.
RecordChannel OpenRecordChannel(MpiJob& job) {
  RecordChannel channel;
  std::string text;
  if (job.rank() == 0) {
    absl::StatusOr<std::unique_ptr<RecordHub>> hub =
        RecordHub::Listen(job.size(), kMaxChannelPayload);
    if (hub.ok()) {
      channel.hub = *std::move(hub);
      text = channel.hub->address().Encode();
    }
  }
  int length = static_cast<int>(text.size());
  absl::Status sent = job.Locked([&] {
    RETURN_IF_ERROR(MPI_STATUS(MPI_Bcast(&length, 1, MPI_INT, 0, job.job())));
    text.resize(static_cast<size_t>(length));
    return MPI_STATUS(MPI_Bcast(text.data(), length, MPI_CHAR, 0, job.job()));
  });
  if (!sent.ok() || length == 0) return {};
  const absl::Time deadline = absl::Now() + kChannelSetup;
  if (job.rank() == 0) {
    channel.hub->AcceptAll(deadline).IgnoreError();  // the missing ones use MPI
    return channel;
  }
  absl::StatusOr<RecordChannelAddress> address = RecordChannelAddress::Decode(text);
  if (!address.ok()) return {};
  absl::StatusOr<std::unique_ptr<RecordLink>> link =
      RecordLink::Connect(*address, job.rank(), deadline);
  if (link.ok()) channel.link = *std::move(link);
  return channel;
}

// SIGTERM, blocked in this thread and every thread started after it, so
// that only the watcher's sigwait takes it.
class SigtermBlock {
 public:
  SigtermBlock() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, &previous_);
  }
  SigtermBlock(const SigtermBlock&) = delete;
  SigtermBlock& operator=(const SigtermBlock&) = delete;
  ~SigtermBlock() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  const sigset_t& set() const { return set_; }

 private:
  sigset_t set_;
  sigset_t previous_;
};

// The fingerprint of a group request (FNV-1a over the ranks, each group
// closed by -1), so that processes can check they asked for the same list.
uint64_t Fingerprint(absl::Span<const Group> groups) {
  uint64_t hash = 14695981039346656037ull;
  auto mix = [&hash](int64_t value) {
    for (int byte = 0; byte < 8; ++byte) {
      hash ^= static_cast<uint64_t>(value >> (8 * byte)) & 0xff;
      hash *= 1099511628211ull;
    }
  };
  for (const Group& group : groups) {
    for (int rank : group.ranks) mix(rank);
    mix(-1);
  }
  return hash;
}

class ProcessWorld final : public MpiWorld {
 public:
  ProcessWorld(std::unique_ptr<MpiJob> job, std::string host,
               std::unique_ptr<SigtermBlock> sigterm, RecordChannel channel)
      : job_(std::move(job)),
        transport_(NewMpiTransport(job_.get())),
        host_(std::move(host)),
        sigterm_(std::move(sigterm)),
        channel_(std::move(channel)) {
    if (sigterm_ != nullptr) watcher_ = std::thread([this] { WatchSigterm(); });
    if (channel_.link != nullptr) notice_watcher_ = std::thread([this] { WatchNotice(); });
  }
  ProcessWorld(const ProcessWorld&) = delete;
  ProcessWorld& operator=(const ProcessWorld&) = delete;
  ~ProcessWorld() override;

  int rank() const override { return job_->rank(); }
  int size() const override { return job_->size(); }
  std::string name() const override { return "MPI"; }
  const std::vector<int>& local_ranks() const override { return local_ranks_; }
  Transport& transport(int world_rank) override {
    (void)world_rank;  // REQUIRES: the local rank, rank()
    return *transport_;
  }
  SendCompletion send_completion() const override { return SendCompletion::kRendezvous; }
  absl::Status CheckSize(int needed, absl::string_view needed_by) const override {
    if (size() == needed) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("the MPI world has ", size(), size() == 1 ? " process" : " processes",
                     " but ", needed_by, " needs ", needed, " (mpirun -np ", needed, ")"));
  }
  absl::Status CreateGroups(absl::Span<const Group> groups, absl::Duration timeout) override;
  absl::Status Barrier(int world_rank, absl::Duration timeout) override {
    (void)world_rank;
    return Barrier(timeout);
  }
  absl::StatusOr<std::vector<std::string>> Gather(absl::Span<const std::string> local,
                                                  absl::Duration timeout) override {
    if (local.size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("Gather: an MPI process runs one rank, not ", local.size()));
    }
    return Gather(absl::string_view(local[0]), timeout);
  }
  std::vector<std::optional<std::string>> CollectAfterFailure(absl::Span<const std::string> local,
                                                              absl::Duration grace) override {
    return CollectAfterFailure(local.empty() ? absl::string_view() : absl::string_view(local[0]),
                               grace);
  }
  void Abort(int world_rank, const std::string& reason) override {
    (void)world_rank;
    transport_->Abort(reason);
  }
  int64_t PeakInFlightBytes() const override { return 0; }  // Open MPI buffers eagerly itself
  const std::string& host() const override { return host_; }
  Transport& transport() override { return *transport_; }
  void RetainUntilEnd(std::shared_ptr<const void> object) override {
    absl::MutexLock lock(&retained_mu_);
    retained_.push_back(std::move(object));
  }

  absl::Status Barrier(absl::Duration timeout) override;
  absl::Status Broadcast(std::string* bytes, absl::Duration timeout) override;
  absl::StatusOr<std::vector<std::string>> Gather(absl::string_view bytes,
                                                  absl::Duration timeout) override;
  std::vector<std::optional<std::string>> CollectAfterFailure(absl::string_view payload,
                                                              absl::Duration grace) override;
  bool aborted() override { return job_->aborted(); }
  void LeaveBeforeExit() override { End(); }

 private:
  void WatchSigterm();
  // Rank 0's failure notice over the record channel aborts this process's
  // part, as SIGTERM does: a rank waiting on a dead peer on another host
  // would hear of the failure only from its own SIGTERM, which mpirun sends
  // host by host, after rank 0 has gone. The channel closing (rank 0 ended
  // or died) says nothing by itself.
  void WatchNotice();
  void StopNoticeWatcher();
  // Stops the watcher and ends MPI: MPI_Finalize when this process's part
  // ended in order (a failure report handed over, or no failure), else
  // MPI_Abort, which has the launcher end every process. Once.
  void End();
  // Posts a job-level collective through `post` and waits for it.
  absl::Status RunJobCollective(absl::string_view call, absl::string_view what, absl::Time deadline,
                                absl::Duration timeout, absl::FunctionRef<int(MPI_Request*)> post);
  std::vector<std::optional<std::string>> CollectAtRoot(absl::string_view payload,
                                                        absl::Time deadline);
  // The deadline of a failure exchange: `deadline`, or sooner once SIGTERM
  // has arrived (it may arrive during the exchange).
  absl::Time ExchangeDeadline(absl::Time deadline) const {
    const int64_t sigterm_at = sigterm_at_ns_.load();
    if (sigterm_at == INT64_MAX) return deadline;
    return std::min(deadline, absl::FromUnixNanos(sigterm_at) + grace_after_sigterm_);
  }

  // Destroyed last (members go in reverse order): after MPI_Finalize.
  absl::Mutex retained_mu_;
  std::vector<std::shared_ptr<const void>> retained_ ABSL_GUARDED_BY(retained_mu_);
  std::unique_ptr<MpiJob> job_;
  const std::vector<int> local_ranks_{job_->rank()};
  std::unique_ptr<Transport> transport_;
  const std::string host_;
  std::unique_ptr<SigtermBlock> sigterm_;  // null: SIGTERM keeps its default
  std::thread watcher_;
  RecordChannel channel_;
  std::thread notice_watcher_;  // with channel_.link
  std::atomic<bool> stopping_{false};
  // When SIGTERM arrived, in Unix nanoseconds (INT64_MAX until then):
  // SIGKILL follows odls_base_sigkill_timeout seconds later (1 by default).
  std::atomic<int64_t> sigterm_at_ns_{INT64_MAX};
  // How long the failure exchange may go on after SIGTERM, before SIGKILL.
  const absl::Duration grace_after_sigterm_ =
      GraceAfterLauncherSigterm([](const char* name) { return std::getenv(name); });
  // CollectAfterFailure: called, and this process's part completed.
  std::atomic<bool> collected_{false};
  std::atomic<bool> collected_all_{false};
  bool ended_ = false;  // End() ran (on the thread that created the world)
};

// The notice carries rank 0's cause, which is the cause the transport's own
// abort notice would have brought (rank 0 learned it from one): this rank
// fails as it would have without the channel, whichever arrives first.
void ProcessWorld::WatchNotice() {
  std::string reason;
  if (channel_.link->WaitForNotice(&reason) == RecordLink::Event::kNotice) {
    job_->AbortLocally(!reason.empty()
                           ? reason
                           : absl::StrCat("rank ", rank(),
                                          " was told by rank 0 that the job failed (a failure "
                                          "notice over the record channel)"));
  }
}

void ProcessWorld::StopNoticeWatcher() {
  if (!notice_watcher_.joinable()) return;
  channel_.link->Wake();
  notice_watcher_.join();
}

void ProcessWorld::WatchSigterm() {
  int signal = 0;
  while (sigwait(&sigterm_->set(), &signal) == 0 && !stopping_) {
    int64_t never = INT64_MAX;
    sigterm_at_ns_.compare_exchange_strong(never, absl::ToUnixNanos(absl::Now()));
    job_->AbortLocally(absl::StrCat("rank ", rank(), " was ", kSigtermMessage));
  }
}

ProcessWorld::~ProcessWorld() { End(); }

void ProcessWorld::End() {
  if (ended_) return;
  ended_ = true;
  StopNoticeWatcher();
  if (watcher_.joinable()) {
    stopping_ = true;
    pthread_kill(watcher_.native_handle(), SIGTERM);
    watcher_.join();
  }
  const bool clean = collected_ ? collected_all_.load() : !job_->aborted();
  job_->Shutdown();
  // The transport, the world and what callers retained are destroyed after
  // MPI has ended: until then MPI may still write into their buffers.
  if (clean) {
    MPI_Finalize();
  } else {
    MPI_Abort(MPI_COMM_WORLD, 1);  // the launcher ends every process
  }
}

absl::Status ProcessWorld::RunJobCollective(absl::string_view call, absl::string_view what,
                                       absl::Time deadline, absl::Duration timeout,
                                       absl::FunctionRef<int(MPI_Request*)> post) {
  RETURN_IF_ERROR(job_->AbortStatus());
  MPI_Request request = MPI_REQUEST_NULL;
  RETURN_IF_ERROR(
      job_->Locked([&] { return MpiStatus(post(&request), call, __FILE__, __LINE__); }));
  return job_->Wait(&request, nullptr, deadline, timeout, what, /*ignore_abort=*/false);
}

// Every process checks the others' fingerprints (bounded: a nonblocking
// all-gather), so that the splits below, which block, start only once
// every process has arrived with the same list.
absl::Status ProcessWorld::CreateGroups(absl::Span<const Group> groups, absl::Duration timeout) {
  RETURN_IF_ERROR(CheckGroups(groups, size()));
  uint64_t mine = Fingerprint(groups);
  std::vector<uint64_t> all(static_cast<size_t>(size()));
  RETURN_IF_ERROR(RunJobCollective(
      "MPI_Iallgather", "the group request", absl::Now() + timeout, timeout,
      [&](MPI_Request* r) {
        return MPI_Iallgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, job_->job(), r);
      }));
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] != all[0]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", r, " requested other groups than rank 0 (World::CreateGroups takes the same "
          "list on every process)"));
    }
  }
  return job_->AddGroups(groups);
}

absl::Status ProcessWorld::Barrier(absl::Duration timeout) {
  return RunJobCollective("MPI_Ibarrier", "the job's barrier", absl::Now() + timeout, timeout,
                          [&](MPI_Request* r) { return MPI_Ibarrier(job_->job(), r); });
}

absl::Status ProcessWorld::Broadcast(std::string* bytes, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  int64_t length = rank() == 0 ? static_cast<int64_t>(bytes->size()) : 0;
  RETURN_IF_ERROR(RunJobCollective(
      "MPI_Ibcast", "the broadcast from rank 0", deadline, timeout,
      [&](MPI_Request* r) { return MPI_Ibcast(&length, 1, MPI_INT64_T, 0, job_->job(), r); }));
  if (length > INT_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("a broadcast of ", length, " bytes exceeds MPI's count limit"));
  }
  bytes->resize(static_cast<size_t>(length));
  return RunJobCollective(
      "MPI_Ibcast", "the broadcast from rank 0", deadline, timeout, [&](MPI_Request* r) {
        return MPI_Ibcast(bytes->data(), static_cast<int>(length), MPI_CHAR, 0, job_->job(), r);
      });
}

absl::StatusOr<std::vector<std::string>> ProcessWorld::Gather(absl::string_view bytes,
                                                         absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  // All-gather the lengths so that every rank takes the same decision.
  int64_t length = static_cast<int64_t>(bytes.size());
  std::vector<int64_t> lengths(static_cast<size_t>(size()));
  RETURN_IF_ERROR(RunJobCollective("MPI_Iallgather", "the gather to rank 0", deadline, timeout,
                                   [&](MPI_Request* r) {
                                     return MPI_Iallgather(&length, 1, MPI_INT64_T, lengths.data(),
                                                           1, MPI_INT64_T, job_->job(), r);
                                   }));
  const int64_t total = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
  if (total > INT_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("a gather of ", total, " bytes exceeds MPI's count limit"));
  }
  std::vector<int> counts(lengths.begin(), lengths.end());
  std::vector<int> offsets(counts.size(), 0);
  std::partial_sum(counts.begin(), counts.end() - 1, offsets.begin() + 1);
  std::string all(rank() == 0 ? static_cast<size_t>(total) : 0, '\0');
  RETURN_IF_ERROR(RunJobCollective(
      "MPI_Igatherv", "the gather to rank 0", deadline, timeout, [&](MPI_Request* r) {
        return MPI_Igatherv(bytes.data(), static_cast<int>(bytes.size()), MPI_CHAR, all.data(),
                            counts.data(), offsets.data(), MPI_CHAR, 0, job_->job(), r);
      }));
  std::vector<std::string> parts;
  if (rank() != 0) return parts;
  for (size_t r = 0; r < counts.size(); ++r) parts.push_back(all.substr(offsets[r], counts[r]));
  return parts;
}

std::vector<std::optional<std::string>> ProcessWorld::CollectAfterFailure(absl::string_view payload,
                                                                     absl::Duration grace) {
  collected_ = true;
  const absl::Time deadline = absl::Now() + grace;
  if (rank() == 0) return CollectAtRoot(payload, deadline);
  if (channel_.link != nullptr) {
    StopNoticeWatcher();
    const absl::Status sent = channel_.link->Send(payload, ExchangeDeadline(deadline));
    collected_all_ = sent.ok();
    return {};
  }
  const std::string text(payload.substr(0, INT_MAX));
  MPI_Request request = MPI_REQUEST_NULL;
  absl::Status status = job_->Locked([&] {
    return MPI_STATUS(MPI_Isend(text.data(), static_cast<int>(text.size()), MPI_CHAR, 0,
                                MpiJob::kPayloadTag, job_->control(), &request));
  });
  bool taken = false;
  if (status.ok()) {
    absl::StatusOr<bool> done = job_->PollUntil(
        [&]() -> absl::StatusOr<bool> {
          int flag = 0;
          RETURN_IF_ERROR(job_->Locked(
              [&] { return MPI_STATUS(MPI_Test(&request, &flag, MPI_STATUS_IGNORE)); }));
          taken = flag != 0;
          return taken || absl::Now() >= ExchangeDeadline(deadline);
        },
        deadline);
    taken = taken && done.ok();
  }
  // A send rank 0 never took is abandoned; MPI_Abort follows at the end.
  collected_all_ = taken;
  return {};
}

// Rank 0: matched probes (MPI_Improbe / MPI_Imrecv) take each payload, of a
// size known only on arrival, from whichever rank sends it first.
std::vector<std::optional<std::string>> ProcessWorld::CollectAtRoot(absl::string_view payload,
                                                               absl::Time deadline) {
  struct Incoming {
    int source = 0;
    MPI_Request request = MPI_REQUEST_NULL;
    std::string bytes;
  };
  std::vector<std::optional<std::string>> payloads(static_cast<size_t>(size()));
  payloads[0] = std::string(payload);
  // Every rank hears of the failure now, while this process still collects.
  if (channel_.hub != nullptr) {
    const absl::Status cause = job_->AbortStatus();
    channel_.hub->NotifyFailure(cause.ok() ? absl::string_view() : cause.message());
  }
  auto missing = [&] {
    return std::count(payloads.begin(), payloads.end(), std::nullopt);
  };
  std::vector<std::unique_ptr<Incoming>> incoming;
  // Under the MPI lock: take what has arrived, finish what has been taken.
  auto take = [&]() -> absl::Status {
    for (int found = 1; found;) {
      MPI_Message message;
      MPI_Status status;
      MPI_CALL(MPI_Improbe(MPI_ANY_SOURCE, MpiJob::kPayloadTag, job_->control(), &found,
                           &message, &status));
      if (!found) break;
      auto in = std::make_unique<Incoming>();
      int count = 0;
      MPI_Get_count(&status, MPI_CHAR, &count);
      in->source = status.MPI_SOURCE;
      in->bytes.resize(static_cast<size_t>(count));
      MPI_CALL(MPI_Imrecv(in->bytes.data(), count, MPI_CHAR, &message, &in->request));
      incoming.push_back(std::move(in));
    }
    for (auto& in : incoming) {
      if (in->request == MPI_REQUEST_NULL) continue;
      int done = 0;
      MPI_CALL(MPI_Test(&in->request, &done, MPI_STATUS_IGNORE));
      if (done) {
        std::optional<std::string>& slot = payloads[static_cast<size_t>(in->source)];
        if (!slot.has_value()) slot = std::move(in->bytes);  // else came over the channel
      }
    }
    return absl::OkStatus();
  };
  auto poll = [&]() -> absl::StatusOr<bool> {
    RETURN_IF_ERROR(job_->Locked(take));
    if (channel_.hub != nullptr) channel_.hub->Receive(&payloads);
    return missing() == 0 || absl::Now() >= ExchangeDeadline(deadline);
  };
  absl::StatusOr<bool> polled = job_->PollUntil(poll, deadline);
  collected_all_ = polled.ok() && missing() == 0;
  return payloads;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MpiWorld>> CreateMpiWorld(int* argc, char*** argv,
                                                         const MpiOptions& options) {
  if (options.spin_polls < 0 || options.poll_sleep < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("MPI options out of range: spin_polls ", options.spin_polls,
                     ", poll_sleep ", absl::FormatDuration(options.poll_sleep)));
  }
  int initialized = 0;
  MPI_CALL(MPI_Initialized(&initialized));
  if (initialized) return absl::FailedPreconditionError("MPI is already initialised");
  // Blocked before MPI_Init, so that MPI's own threads inherit the mask.
  auto sigterm = options.abort_on_sigterm ? std::make_unique<SigtermBlock>() : nullptr;
  int provided = 0;
  MPI_CALL(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided));
  auto fail = [](absl::Status status) {
    MPI_Finalize();
    return status;
  };
  if (provided < MPI_THREAD_SERIALIZED) {
    return fail(absl::FailedPreconditionError(
        absl::StrCat("this MPI provides thread level ", provided,
                     "; the MPI backend needs MPI_THREAD_SERIALIZED")));
  }
  absl::StatusOr<std::unique_ptr<MpiJob>> job =
      MpiJob::Create({options.spin_polls, options.poll_sleep});
  if (!job.ok()) return fail(job.status());
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  if (MPI_Get_processor_name(name, &length) != MPI_SUCCESS) length = 0;
  RecordChannel channel = OpenRecordChannel(**job);
  return std::make_unique<ProcessWorld>(*std::move(job),
                                        std::string(name, static_cast<size_t>(length)),
                                        std::move(sigterm), std::move(channel));
}

}  // namespace jitpipe
