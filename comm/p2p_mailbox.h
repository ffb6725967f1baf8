// Tag matching for fabrics whose ranks share one process (the in-process
// threads, the one-GPU CUDA world): per (sender, receiver, tag), the
// receives posted before their send and the sends staged before their
// receive, each in posting order, and the bytes staged sends hold. A send
// takes the oldest receive waiting on its key, else it is staged; a receive
// takes the oldest staged send, else it waits. What a receive and a staged
// send carry, and how a transfer is delivered, is the fabric's.
//
// Thread-compatible: the fabric's lock guards it.
#ifndef JITPIPE_COMM_P2P_MAILBOX_H_
#define JITPIPE_COMM_P2P_MAILBOX_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace jitpipe {

struct P2pKey {
  int src = 0;
  int dst = 0;
  uint64_t tag = 0;
  friend bool operator==(const P2pKey&, const P2pKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const P2pKey& k) {
    return H::combine(std::move(h), k.src, k.dst, k.tag);
  }
};

template <typename Recv, typename Send>
class P2pMailbox {
 public:
  // The oldest receive waiting on `key`, removed; none when no receive is.
  std::optional<Recv> TakeRecv(const P2pKey& key) {
    return Take(recvs_, key);
  }
  // The oldest send staged on `key`, removed (its bytes leave the count).
  std::optional<Send> TakeSend(const P2pKey& key) {
    std::optional<Staged> staged = Take(sends_, key);
    if (!staged.has_value()) return std::nullopt;
    in_flight_ -= staged->bytes;
    return std::move(staged->send);
  }
  void AddRecv(const P2pKey& key, Recv recv) { recvs_[key].push_back(std::move(recv)); }
  // Stages a send of `bytes` bytes.
  void AddSend(const P2pKey& key, Send send, int64_t bytes) {
    sends_[key].push_back(Staged{std::move(send), bytes});
    in_flight_ += bytes;
    peak_in_flight_ = std::max(peak_in_flight_, in_flight_);
  }

  // Every waiting receive and staged send, for a fabric's teardown.
  template <typename F>
  void ForEachRecv(F&& f) {
    for (auto& [key, recvs] : recvs_) {
      for (Recv& recv : recvs) f(recv);
    }
  }
  template <typename F>
  void ForEachSend(F&& f) {
    for (auto& [key, sends] : sends_) {
      for (Staged& staged : sends) f(staged.send);
    }
  }

  // Bytes held by staged sends now, and at most so far.
  int64_t in_flight() const { return in_flight_; }
  int64_t peak_in_flight() const { return peak_in_flight_; }

 private:
  struct Staged {
    Send send;
    int64_t bytes = 0;
  };
  template <typename T>
  static std::optional<T> Take(absl::flat_hash_map<P2pKey, std::deque<T>>& queues,
                               const P2pKey& key) {
    auto it = queues.find(key);
    if (it == queues.end() || it->second.empty()) return std::nullopt;
    T front = std::move(it->second.front());
    it->second.pop_front();
    return front;
  }

  absl::flat_hash_map<P2pKey, std::deque<Recv>> recvs_;
  absl::flat_hash_map<P2pKey, std::deque<Staged>> sends_;
  int64_t in_flight_ = 0;
  int64_t peak_in_flight_ = 0;
};

}  // namespace jitpipe

#endif  // JITPIPE_COMM_P2P_MAILBOX_H_
