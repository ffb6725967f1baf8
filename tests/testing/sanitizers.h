// Whether this translation unit is built with a sanitizer (GCC defines
// __SANITIZE_*__, clang answers __has_feature). Tests that exist to push
// volume (millions of events, hundreds of steps) scale down under one: the
// instrumentation makes them minutes long without checking anything more.
#ifndef JITPIPE_TESTS_TESTING_SANITIZERS_H_
#define JITPIPE_TESTS_TESTING_SANITIZERS_H_

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define JITPIPE_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define JITPIPE_SANITIZED 1
#endif
#endif
#ifndef JITPIPE_SANITIZED
#define JITPIPE_SANITIZED 0
#endif

namespace jitpipe::testing {

inline constexpr bool kSanitized = JITPIPE_SANITIZED != 0;

}  // namespace jitpipe::testing

#endif  // JITPIPE_TESTS_TESTING_SANITIZERS_H_
