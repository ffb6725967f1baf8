// ThreadSanitizer annotations for the prebuilt absl::Mutex.
//
// Debian's abseil is not built with -fsanitize=thread, so ThreadSanitizer
// sees neither its atomics nor its futex waits: without help every access
// guarded by an absl::Mutex is reported as a data race. Linked into every
// executable of a TSan build (cmake/JitpipeTsan.cmake), these wrappers stand
// in for absl's entry points through the linker's --wrap: each releases the
// mutex's address before the real call gives the lock up and acquires it
// after the real call has taken it, which is exactly the happens-before
// order a mutex provides. A Condition runs inside absl with the lock held,
// on the waiting thread or on whichever thread unlocks, so the wrappers hand
// absl a Condition that acquires before and releases after the real one.
//
// absl's own deadlock detector (on in debug builds) keeps a lock graph
// under absl's internal spinlock, which TSan cannot see either; it is turned
// off before main(), as `jitpipe replay` does anyway. TSan still checks every
// access our code makes.
//
// The symbols are Debian's (inline namespace absl::debian3, abseil
// 20220623); JitpipeTsan.cmake lists the same names for --wrap.
#include <sanitizer/tsan_interface.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

using absl::Condition;
using absl::CondVar;
using absl::Duration;
using absl::Mutex;
using absl::Time;

namespace {

const bool kDeadlockDetectionOff = [] {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return true;
}();

// A Condition evaluated with `mu` held, annotated as a critical section.
struct AnnotatedCondition {
  Mutex* mu;
  const Condition* condition;
};

bool EvalAnnotated(void* arg) {
  const auto* annotated = static_cast<const AnnotatedCondition*>(arg);
  __tsan_acquire(annotated->mu);
  const bool met = annotated->condition->Eval();
  __tsan_release(annotated->mu);
  return met;
}

}  // namespace

// The real functions (the linker maps __real_X to X) and their wrappers, in
// the Itanium C++ ABI's calling convention: `this` first.
extern "C" {

void __real__ZN4absl7debian35Mutex4LockEv(Mutex* mu);
void __real__ZN4absl7debian35Mutex6UnlockEv(Mutex* mu);
bool __real__ZN4absl7debian35Mutex7TryLockEv(Mutex* mu);
void __real__ZN4absl7debian35Mutex10ReaderLockEv(Mutex* mu);
void __real__ZN4absl7debian35Mutex12ReaderUnlockEv(Mutex* mu);
void __real__ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE(Mutex* mu, const Condition& cond);
bool __real__ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE(
    Mutex* mu, const Condition& cond, Duration timeout);
bool __real__ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE(
    Mutex* mu, const Condition& cond, Time deadline);
void __real__ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE(Mutex* mu, const Condition& cond);
bool __real__ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE(
    Mutex* mu, const Condition& cond, Duration timeout);
void __real__ZN4absl7debian37CondVar4WaitEPNS0_5MutexE(CondVar* cv, Mutex* mu);
bool __real__ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE(
    CondVar* cv, Mutex* mu, Duration timeout);

void __wrap__ZN4absl7debian35Mutex4LockEv(Mutex* mu) {
  __real__ZN4absl7debian35Mutex4LockEv(mu);
  __tsan_acquire(mu);
}

void __wrap__ZN4absl7debian35Mutex6UnlockEv(Mutex* mu) {
  __tsan_release(mu);
  __real__ZN4absl7debian35Mutex6UnlockEv(mu);
}

bool __wrap__ZN4absl7debian35Mutex7TryLockEv(Mutex* mu) {
  const bool locked = __real__ZN4absl7debian35Mutex7TryLockEv(mu);
  if (locked) __tsan_acquire(mu);
  return locked;
}

void __wrap__ZN4absl7debian35Mutex10ReaderLockEv(Mutex* mu) {
  __real__ZN4absl7debian35Mutex10ReaderLockEv(mu);
  __tsan_acquire(mu);
}

void __wrap__ZN4absl7debian35Mutex12ReaderUnlockEv(Mutex* mu) {
  __tsan_release(mu);
  __real__ZN4absl7debian35Mutex12ReaderUnlockEv(mu);
}

// The Await family gives the lock up while it waits and holds it again on
// return (also on a timeout).
void __wrap__ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE(Mutex* mu, const Condition& cond) {
  AnnotatedCondition annotated{mu, &cond};
  __tsan_release(mu);
  __real__ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE(mu, Condition(&EvalAnnotated, &annotated));
  __tsan_acquire(mu);
}

bool __wrap__ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE(
    Mutex* mu, const Condition& cond, Duration timeout) {
  AnnotatedCondition annotated{mu, &cond};
  __tsan_release(mu);
  const bool met = __real__ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE(
      mu, Condition(&EvalAnnotated, &annotated), timeout);
  __tsan_acquire(mu);
  return met;
}

bool __wrap__ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE(
    Mutex* mu, const Condition& cond, Time deadline) {
  AnnotatedCondition annotated{mu, &cond};
  __tsan_release(mu);
  const bool met = __real__ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE(
      mu, Condition(&EvalAnnotated, &annotated), deadline);
  __tsan_acquire(mu);
  return met;
}

void __wrap__ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE(Mutex* mu, const Condition& cond) {
  AnnotatedCondition annotated{mu, &cond};
  __real__ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE(mu,
                                                           Condition(&EvalAnnotated, &annotated));
  __tsan_acquire(mu);
}

bool __wrap__ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE(
    Mutex* mu, const Condition& cond, Duration timeout) {
  AnnotatedCondition annotated{mu, &cond};
  const bool met =
      __real__ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE(
          mu, Condition(&EvalAnnotated, &annotated), timeout);
  __tsan_acquire(mu);  // held on return either way
  return met;
}

void __wrap__ZN4absl7debian37CondVar4WaitEPNS0_5MutexE(CondVar* cv, Mutex* mu) {
  __tsan_release(mu);
  __real__ZN4absl7debian37CondVar4WaitEPNS0_5MutexE(cv, mu);
  __tsan_acquire(mu);
}

bool __wrap__ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE(
    CondVar* cv, Mutex* mu, Duration timeout) {
  __tsan_release(mu);
  const bool timed_out =
      __real__ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE(cv, mu,
                                                                                 timeout);
  __tsan_acquire(mu);
  return timed_out;
}

}  // extern "C"
