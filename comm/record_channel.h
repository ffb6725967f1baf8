// The record channel: a TCP side channel from every rank to rank 0 that
// carries the failure exchange (World::CollectAfterFailure) independently of
// the transport's state once a peer has died. Plain sockets, no MPI.
//
// Why it exists (issue 35): mpirun ends a failed job host by host. Its
// daemons signal their processes in turn (SIGCONT, wait
// odls_base_sigkill_timeout, SIGTERM, wait, SIGKILL), so a rank on a second
// host that waits for a dead peer learns of the failure only from its own
// SIGTERM -- seen 10 s after rank 0's with a 5 s timeout, when rank 0 had
// already ended. A rank cannot hand its record to a rank 0 that has gone, so
// rank 0 must *tell* the survivors the job failed while it still collects:
// that needs a connection opened while the job was healthy. Hence a
// long-lived connection per rank, opened when the world is created:
//
//   rank r -> 0   hello     "JPRC" token:u64 rank:u32   (once, at connect)
//   0 -> rank r   welcome   token:u64                   (the right job's rank 0)
//   0 -> rank r   notice    'F' length:u32 reason      (the job failed: report)
//   rank r -> 0   payload   length:u64 bytes            (once)
//   0 -> rank r   ack       'A'                         (rank 0 has it)
//
// Integers are little-endian. The token (random, from rank 0) keeps a
// connection to another job's listener, or to a stale port, from counting.
// Every call is bounded by a deadline; sockets are nonblocking.
//
// Thread safety: RecordHub is used by one thread. RecordLink's Wake() may
// be called from any thread while another is in WaitForNotice(); its other
// calls are made by one thread at a time.
#ifndef JITPIPE_COMM_RECORD_CHANNEL_H_
#define JITPIPE_COMM_RECORD_CHANNEL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace jitpipe {

// Where ranks find rank 0's hub: its IPv4 addresses (tried in order), its
// port and the job's token. Encoded as text to travel in a broadcast.
struct RecordChannelAddress {
  std::vector<std::string> hosts;
  int port = 0;
  uint64_t token = 0;

  std::string Encode() const;  // "port token host,host,..."
  // Errors: InvalidArgument naming what is malformed.
  static absl::StatusOr<RecordChannelAddress> Decode(absl::string_view text);
};

// Rank 0's end: a listening socket and one connection per rank that said
// hello. Owns its sockets; closing them (the destructor) ends every link.
class RecordHub {
 public:
  // Listens on every IPv4 interface, on a port the kernel picks, for a job
  // of `size` ranks; a payload longer than `max_payload_bytes` is refused
  // (its connection is closed, the rank counts as not arrived). address()
  // lists this machine's up IPv4 interfaces, loopback last. Errors:
  // Unavailable when the socket cannot be made or bound (errno's text).
  static absl::StatusOr<std::unique_ptr<RecordHub>> Listen(int size, int64_t max_payload_bytes);
  ~RecordHub();
  RecordHub(const RecordHub&) = delete;
  RecordHub& operator=(const RecordHub&) = delete;

  const RecordChannelAddress& address() const { return address_; }

  // Accepts hellos until every rank 1..size-1 has one or `deadline`
  // passes. Errors: DeadlineExceeded naming the ranks that did not connect
  // (the hub stays usable without them; Receive accepts late ones).
  absl::Status AcceptAll(absl::Time deadline);
  // Whether rank `rank` has a connection (said hello, not closed since).
  bool connected(int rank) const;

  // Sends the failure notice, with rank 0's cause of the failure (the first
  // kMaxNoticeReason bytes of `reason`), to every connected rank: a rank
  // told by this notice fails with the same cause as one told by the
  // transport, whichever reaches it first. Never blocks (a rank whose
  // buffer is full already has a notice or is not reading).
  static constexpr size_t kMaxNoticeReason = 4096;
  void NotifyFailure(absl::string_view reason);
  // Without blocking: accepts pending hellos, reads what has arrived, and
  // moves each completed payload into (*payloads)[rank] unless that slot
  // is already filled (a payload that came another way first), acking it
  // either way. REQUIRES: payloads->size() == size.
  void Receive(std::vector<std::optional<std::string>>* payloads);
  // Receive, waiting on the sockets, until every rank still connected has
  // delivered or `deadline` passes.
  void Collect(std::vector<std::optional<std::string>>* payloads, absl::Time deadline);

 private:
  struct Peer;
  RecordHub(int listener, int size, int64_t max_payload_bytes, RecordChannelAddress address);
  void AcceptPending();
  // Reads what `peer` has; closes it on EOF, error, a bad frame.
  void ReadPeer(Peer& peer, std::vector<std::optional<std::string>>* payloads);
  bool AllDelivered() const;

  const int listener_;
  const int size_;
  const int64_t max_payload_bytes_;
  RecordChannelAddress address_;
  std::vector<std::unique_ptr<Peer>> peers_;  // accepted, by arrival
};

// A rank's end: one connection to rank 0's hub.
class RecordLink {
 public:
  // Connects to the first of address.hosts that answers with the job's
  // token and says hello as `rank`. Errors: Unavailable (with each host's
  // reason) when none does before `deadline`.
  static absl::StatusOr<std::unique_ptr<RecordLink>> Connect(const RecordChannelAddress& address,
                                                             int rank, absl::Time deadline);
  ~RecordLink();
  RecordLink(const RecordLink&) = delete;
  RecordLink& operator=(const RecordLink&) = delete;

  enum class Event { kNotice, kClosed, kWoken };
  // Blocks until rank 0 sends the failure notice (its cause in `*reason`;
  // empty if the rest of the notice did not arrive within a second), the
  // connection ends (rank 0 finished or died) or Wake() is called (also
  // before this call).
  Event WaitForNotice(std::string* reason);
  void Wake();

  // Sends `payload` and waits for rank 0's ack (skipping notices). OK once
  // acked. Errors: DeadlineExceeded at `deadline`; Unavailable when rank 0
  // closed the connection first (ended, died, or refused the payload).
  // REQUIRES: no thread is in WaitForNotice(); called once.
  absl::Status Send(absl::string_view payload, absl::Time deadline);

 private:
  RecordLink(int socket, int wake);
  const int socket_;
  const int wake_;  // an eventfd
};

}  // namespace jitpipe

#endif  // JITPIPE_COMM_RECORD_CHANNEL_H_
