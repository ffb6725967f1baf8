# ThreadSanitizer builds (-DJITPIPE_TSAN=ON with -fsanitize=thread; the
# preset "tsan"). Debian's abseil is not instrumented, so every executable
# links cmake/tsan/absl_sync_annotations.cc, whose wrappers (ld --wrap) tell
# TSan when an absl::Mutex is taken and given up; without them every access
# guarded by an absl::Mutex is reported as a race.
# Included from the top-level CMakeLists.txt before any target is defined;
# jitpipe_add_executable() links jitpipe_tsan_annotations when it exists. It
# is an object library: --wrap also redirects the references inside absl's
# own shared libraries, so the wrappers must be in every executable whether
# its objects call absl::Mutex or not.
set(JITPIPE_TSAN_WRAPPED
  _ZN4absl7debian35Mutex4LockEv
  _ZN4absl7debian35Mutex6UnlockEv
  _ZN4absl7debian35Mutex7TryLockEv
  _ZN4absl7debian35Mutex10ReaderLockEv
  _ZN4absl7debian35Mutex12ReaderUnlockEv
  _ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE
  _ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE
  _ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE
  _ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE
  _ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE
  _ZN4absl7debian37CondVar4WaitEPNS0_5MutexE
  _ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE)

add_library(jitpipe_tsan_annotations OBJECT
  ${CMAKE_CURRENT_LIST_DIR}/tsan/absl_sync_annotations.cc)
target_link_libraries(jitpipe_tsan_annotations PUBLIC absl::synchronization absl::time)
foreach(symbol IN LISTS JITPIPE_TSAN_WRAPPED)
  target_link_options(jitpipe_tsan_annotations INTERFACE "LINKER:--wrap=${symbol}")
endforeach()
