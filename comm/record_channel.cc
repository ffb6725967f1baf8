// The record channel's sockets (contract and frames: record_channel.h).
#include "comm/record_channel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace jitpipe {
namespace {

constexpr char kMagic[4] = {'J', 'P', 'R', 'C'};
constexpr size_t kHelloBytes = 4 + 8 + 4;
constexpr char kNotice = 'F';
constexpr char kAck = 'A';

std::string ErrnoText(absl::string_view call) { return absl::StrCat(call, ": ", std::strerror(errno)); }

void PutLe(uint64_t value, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}
uint64_t GetLe(absl::string_view in, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= uint64_t{static_cast<unsigned char>(in[i])} << (8 * i);
  return value;
}

int Milliseconds(absl::Time deadline) {
  const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 1000));
}

// Waits for `events` on `fd` until `deadline`: true when ready.
bool WaitFor(int fd, short events, absl::Time deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, Milliseconds(deadline));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
    if (absl::Now() >= deadline) return false;
  }
}

// Writes all of `bytes` before `deadline`. Errors: Unavailable, DeadlineExceeded.
absl::Status WriteAll(int fd, absl::string_view bytes, absl::Time deadline) {
  while (!bytes.empty()) {
    const ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!WaitFor(fd, POLLOUT, deadline)) {
        return absl::DeadlineExceededError("timed out writing to the record channel");
      }
    } else {
      return absl::UnavailableError(ErrnoText("record channel send"));
    }
  }
  return absl::OkStatus();
}

// Reads exactly `count` bytes before `deadline`.
absl::StatusOr<std::string> ReadExactly(int fd, size_t count, absl::Time deadline) {
  std::string out(count, '\0');
  size_t got = 0;
  while (got < count) {
    const ssize_t n = recv(fd, out.data() + got, count - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n == 0) {
      return absl::UnavailableError("rank 0 closed the record channel");
    } else if (errno == EAGAIN || errno == EINTR) {
      if (!WaitFor(fd, POLLIN, deadline)) {
        return absl::DeadlineExceededError("timed out reading from the record channel");
      }
    } else {
      return absl::UnavailableError(ErrnoText("record channel recv"));
    }
  }
  return out;
}

int NonblockingSocket() {
  return socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

// This machine's up IPv4 addresses, loopback last.
std::vector<std::string> LocalAddresses() {
  std::vector<std::string> outside, loopback;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
      if ((i->ifa_flags & IFF_UP) == 0) continue;
      char text[INET_ADDRSTRLEN] = {};
      sockaddr_in in;
      std::memcpy(&in, i->ifa_addr, sizeof(in));
      if (inet_ntop(AF_INET, &in.sin_addr, text, sizeof(text)) == nullptr) continue;
      ((i->ifa_flags & IFF_LOOPBACK) ? loopback : outside).push_back(text);
    }
    freeifaddrs(list);
  }
  outside.insert(outside.end(), loopback.begin(), loopback.end());
  return outside;
}

// One attempt: connect to host:port, say hello, check the welcome.
absl::StatusOr<int> ConnectOne(const std::string& host, const RecordChannelAddress& address,
                               int rank, absl::Time deadline) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(address.port));
  if (inet_pton(AF_INET, host.c_str(), &to.sin_addr) != 1) {
    return absl::InvalidArgumentError("not an IPv4 address");
  }
  const int fd = NonblockingSocket();
  if (fd < 0) return absl::UnavailableError(ErrnoText("socket"));
  auto fail = [fd](absl::Status status) {
    close(fd);
    return status;
  };
  if (connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) != 0) {
    if (errno != EINPROGRESS) return fail(absl::UnavailableError(ErrnoText("connect")));
    if (!WaitFor(fd, POLLOUT, deadline)) return fail(absl::DeadlineExceededError("connect timed out"));
    int error = 0;
    socklen_t length = sizeof(error);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
    if (error != 0) {
      errno = error;
      return fail(absl::UnavailableError(ErrnoText("connect")));
    }
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::string hello(kMagic, sizeof(kMagic));
  PutLe(address.token, 8, &hello);
  PutLe(static_cast<uint32_t>(rank), 4, &hello);
  if (absl::Status s = WriteAll(fd, hello, deadline); !s.ok()) return fail(s);
  absl::StatusOr<std::string> welcome = ReadExactly(fd, 8, deadline);
  if (!welcome.ok()) return fail(welcome.status());
  if (GetLe(*welcome, 8) != address.token) {
    return fail(absl::UnavailableError("answered with another job's token"));
  }
  return fd;
}

}  // namespace

std::string RecordChannelAddress::Encode() const {
  return absl::StrCat(port, " ", token, " ", absl::StrJoin(hosts, ","));
}

absl::StatusOr<RecordChannelAddress> RecordChannelAddress::Decode(absl::string_view text) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, ' ');
  RecordChannelAddress address;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &address.port) || address.port <= 0 ||
      address.port > 65535 || !absl::SimpleAtoi(parts[1], &address.token) || parts[2].empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed record channel address \"", text, "\" (want \"port token hosts\")"));
  }
  address.hosts = absl::StrSplit(parts[2], ',');
  return address;
}

// One accepted connection: its rank once the hello is read, what it has
// sent so far, and whether its payload was delivered.
struct RecordHub::Peer {
  int fd = -1;
  int rank = -1;  // -1 until the hello
  std::string in;
  bool delivered = false;
  ~Peer() {
    if (fd >= 0) close(fd);
  }
  void Close() {
    if (fd >= 0) close(fd);
    fd = -1;
  }
};

absl::StatusOr<std::unique_ptr<RecordHub>> RecordHub::Listen(int size, int64_t max_payload_bytes) {
  const int fd = NonblockingSocket();
  if (fd < 0) return absl::UnavailableError(ErrnoText("record channel socket"));
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof(any);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&any), sizeof(any)) != 0 ||
      listen(fd, SOMAXCONN) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&any), &length) != 0) {
    const absl::Status status = absl::UnavailableError(ErrnoText("record channel bind/listen"));
    close(fd);
    return status;
  }
  RecordChannelAddress address;
  address.hosts = LocalAddresses();
  address.port = ntohs(any.sin_port);
  address.token = std::random_device()() * 0x100000000ull + std::random_device()();
  if (address.hosts.empty()) address.hosts.push_back("127.0.0.1");
  return std::unique_ptr<RecordHub>(
      new RecordHub(fd, size, max_payload_bytes, std::move(address)));
}

RecordHub::RecordHub(int listener, int size, int64_t max_payload_bytes,
                     RecordChannelAddress address)
    : listener_(listener),
      size_(size),
      max_payload_bytes_(max_payload_bytes),
      address_(std::move(address)) {}

RecordHub::~RecordHub() { close(listener_); }

void RecordHub::AcceptPending() {
  while (true) {
    const int fd = accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    auto peer = std::make_unique<Peer>();
    peer->fd = fd;
    peers_.push_back(std::move(peer));
  }
}

bool RecordHub::connected(int rank) const {
  return std::any_of(peers_.begin(), peers_.end(),
                     [rank](const auto& p) { return p->rank == rank && p->fd >= 0; });
}

absl::Status RecordHub::AcceptAll(absl::Time deadline) {
  std::vector<std::optional<std::string>> unused(static_cast<size_t>(size_));
  while (true) {
    Receive(&unused);
    std::vector<int> missing;
    for (int r = 1; r < size_; ++r) {
      if (!connected(r)) missing.push_back(r);
    }
    if (missing.empty()) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "ranks ", absl::StrJoin(missing, ", "), " did not connect to the record channel"));
    }
    std::vector<pollfd> fds{{listener_, POLLIN, 0}};
    for (const auto& p : peers_) {
      if (p->fd >= 0 && p->rank < 0) fds.push_back({p->fd, POLLIN, 0});
    }
    poll(fds.data(), fds.size(), Milliseconds(deadline));
  }
}

void RecordHub::NotifyFailure(absl::string_view reason) {
  reason = reason.substr(0, kMaxNoticeReason);
  std::string notice(1, kNotice);
  PutLe(reason.size(), 4, &notice);
  notice.append(reason.data(), reason.size());
  for (const auto& p : peers_) {
    // One small write into an idle socket's buffer: whole in practice; a
    // part is read as a notice without its cause.
    if (p->fd >= 0 && p->rank >= 0) {
      send(p->fd, notice.data(), notice.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
  }
}

void RecordHub::ReadPeer(Peer& peer, std::vector<std::optional<std::string>>* payloads) {
  char buffer[65536];
  while (peer.fd >= 0) {
    const ssize_t n = recv(peer.fd, buffer, sizeof(buffer), 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      peer.Close();  // EOF or error: a payload not yet whole is lost
      return;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    peer.in.append(buffer, static_cast<size_t>(n));
    if (peer.rank < 0 && peer.in.size() >= kHelloBytes) {
      const uint64_t rank = GetLe(absl::string_view(peer.in).substr(12), 4);
      if (std::memcmp(peer.in.data(), kMagic, sizeof(kMagic)) != 0 ||
          GetLe(absl::string_view(peer.in).substr(4), 8) != address_.token || rank == 0 ||
          rank >= static_cast<uint64_t>(size_) || connected(static_cast<int>(rank))) {
        peer.Close();  // not one of this job's ranks, or a second hello
        return;
      }
      peer.rank = static_cast<int>(rank);
      peer.in.erase(0, kHelloBytes);
      std::string welcome;
      PutLe(address_.token, 8, &welcome);
      send(peer.fd, welcome.data(), welcome.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (peer.rank >= 0 && !peer.delivered && peer.in.size() >= 8) {
      const uint64_t length = GetLe(peer.in, 8);
      if (length > static_cast<uint64_t>(max_payload_bytes_)) {
        peer.Close();  // refused: the sender sees the connection end
        return;
      }
      if (peer.in.size() - 8 >= length) {
        std::optional<std::string>& slot = (*payloads)[static_cast<size_t>(peer.rank)];
        if (!slot.has_value()) slot = peer.in.substr(8, length);
        peer.delivered = true;
        peer.in.clear();
        send(peer.fd, &kAck, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      }
    }
  }
}

void RecordHub::Receive(std::vector<std::optional<std::string>>* payloads) {
  AcceptPending();
  for (const auto& p : peers_) ReadPeer(*p, payloads);
}

bool RecordHub::AllDelivered() const {
  return std::all_of(peers_.begin(), peers_.end(),
                     [](const auto& p) { return p->fd < 0 || p->delivered; });
}

void RecordHub::Collect(std::vector<std::optional<std::string>>* payloads, absl::Time deadline) {
  while (true) {
    Receive(payloads);
    if (AllDelivered() || absl::Now() >= deadline) return;
    std::vector<pollfd> fds{{listener_, POLLIN, 0}};
    for (const auto& p : peers_) {
      if (p->fd >= 0 && !p->delivered) fds.push_back({p->fd, POLLIN, 0});
    }
    poll(fds.data(), fds.size(), Milliseconds(deadline));
  }
}

absl::StatusOr<std::unique_ptr<RecordLink>> RecordLink::Connect(const RecordChannelAddress& address,
                                                               int rank, absl::Time deadline) {
  std::vector<std::string> reasons;
  for (const std::string& host : address.hosts) {
    // Each host gets a fair share of what is left, at least 100 ms.
    const absl::Time until = std::min(deadline, absl::Now() + std::max(absl::Milliseconds(100),
                                                   (deadline - absl::Now()) / 2));
    absl::StatusOr<int> fd = ConnectOne(host, address, rank, until);
    if (fd.ok()) {
      const int wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
      if (wake < 0) {
        close(*fd);
        return absl::UnavailableError(ErrnoText("eventfd"));
      }
      return std::unique_ptr<RecordLink>(new RecordLink(*fd, wake));
    }
    reasons.push_back(absl::StrCat(host, ":", address.port, ": ", fd.status().message()));
  }
  return absl::UnavailableError(absl::StrCat("rank ", rank, " cannot reach rank 0's record channel (",
                                             absl::StrJoin(reasons, "; "), ")"));
}

RecordLink::RecordLink(int socket, int wake) : socket_(socket), wake_(wake) {}

RecordLink::~RecordLink() {
  close(socket_);
  close(wake_);
}

namespace {

// The rest of a notice whose 'F' was read: its cause, or empty when it does
// not arrive whole by `deadline`.
std::string ReadNoticeReason(int fd, absl::Time deadline) {
  absl::StatusOr<std::string> length = ReadExactly(fd, 4, deadline);
  if (!length.ok()) return "";
  const uint64_t n = GetLe(*length, 4);
  if (n > RecordHub::kMaxNoticeReason) return "";
  absl::StatusOr<std::string> reason = ReadExactly(fd, static_cast<size_t>(n), deadline);
  return reason.ok() ? *std::move(reason) : "";
}

}  // namespace

RecordLink::Event RecordLink::WaitForNotice(std::string* reason) {
  while (true) {
    pollfd fds[2] = {{socket_, POLLIN, 0}, {wake_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return Event::kClosed;
    }
    if (fds[1].revents != 0) return Event::kWoken;
    char byte = 0;
    const ssize_t n = recv(socket_, &byte, 1, 0);
    if (n == 1 && byte == kNotice) {
      *reason = ReadNoticeReason(socket_, absl::Now() + absl::Seconds(1));
      return Event::kNotice;
    }
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return Event::kClosed;
  }
}

void RecordLink::Wake() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = write(wake_, &one, sizeof(one));
}

absl::Status RecordLink::Send(absl::string_view payload, absl::Time deadline) {
  std::string length;
  PutLe(payload.size(), 8, &length);
  if (absl::Status s = WriteAll(socket_, length, deadline); !s.ok()) return s;
  if (absl::Status s = WriteAll(socket_, payload, deadline); !s.ok()) return s;
  while (true) {
    absl::StatusOr<std::string> byte = ReadExactly(socket_, 1, deadline);
    if (!byte.ok()) return byte.status();
    if ((*byte)[0] == kAck) return absl::OkStatus();
    if ((*byte)[0] == kNotice) ReadNoticeReason(socket_, deadline);  // skipped whole
  }
}

}  // namespace jitpipe
