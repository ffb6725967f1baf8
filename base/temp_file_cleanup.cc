#include "base/temp_file_cleanup.h"

#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace jitpipe {
namespace {

// A slot is free (0), being written or cleared (1, the handler skips it), or
// holds a complete name (2).
enum SlotState : int { kFree = 0, kBusy = 1, kHeld = 2 };

struct Slot {
  std::atomic<int> state{kFree};
  char path[PATH_MAX];
};

Slot slots[kMaxTempFiles];

void RemoveRegisteredAndReraise(int signal_number) {
  for (Slot& slot : slots) {
    if (slot.state.load(std::memory_order_acquire) == kHeld) unlink(slot.path);
  }
  struct sigaction action = {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  sigaction(signal_number, &action, nullptr);
  raise(signal_number);
}

}  // namespace

int RegisterTempFile(const std::string& path) {
  if (path.size() >= PATH_MAX) return -1;
  for (int i = 0; i < kMaxTempFiles; ++i) {
    int expected = kFree;
    if (!slots[i].state.compare_exchange_strong(expected, kBusy, std::memory_order_acquire)) {
      continue;
    }
    std::memcpy(slots[i].path, path.c_str(), path.size() + 1);
    slots[i].state.store(kHeld, std::memory_order_release);
    return i;
  }
  return -1;
}

void UnregisterTempFile(int slot) {
  if (slot < 0 || slot >= kMaxTempFiles) return;
  slots[slot].state.store(kFree, std::memory_order_release);
}

void InstallTempFileCleanupOnSignals() {
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction previous = {};
    if (sigaction(signal_number, nullptr, &previous) != 0) continue;
    if (previous.sa_handler == SIG_IGN) continue;  // e.g. started under nohup
    struct sigaction action = {};
    action.sa_handler = RemoveRegisteredAndReraise;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND;
    sigaction(signal_number, &action, nullptr);
  }
}

}  // namespace jitpipe
