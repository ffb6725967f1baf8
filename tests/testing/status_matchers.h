// EXPECT_OK / ASSERT_OK / ASSERT_OK_AND_ASSIGN for absl::Status and
// absl::StatusOr (our gmock 1.12 ships no status matchers).
#ifndef JITPIPE_TESTS_TESTING_STATUS_MATCHERS_H_
#define JITPIPE_TESTS_TESTING_STATUS_MATCHERS_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace jitpipe::testing {

inline const absl::Status& StatusOf(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& s) {
  return s.status();
}

// The message as std::string: gtest prints absl::string_view as a char array.
template <typename S>
std::string Message(const S& s) {
  return std::string(StatusOf(s).message());
}

// gtest predicate-formatter: success, or the expression and the status it gave.
template <typename S>
::testing::AssertionResult IsOk(const char* expr_text, const S& s) {
  if (StatusOf(s).ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << expr_text << " is " << StatusOf(s);
}

}  // namespace jitpipe::testing

// Each evaluates `expr` exactly once: a second evaluation to print the status
// would print a different call's result (and repeat its side effects).
#define EXPECT_OK(expr) EXPECT_PRED_FORMAT1(::jitpipe::testing::IsOk, expr)
#define ASSERT_OK(expr) ASSERT_PRED_FORMAT1(::jitpipe::testing::IsOk, expr)

#define JITPIPE_TEST_CONCAT_INNER_(a, b) a##b
#define JITPIPE_TEST_CONCAT_(a, b) JITPIPE_TEST_CONCAT_INNER_(a, b)
#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL_(JITPIPE_TEST_CONCAT_(statusor_, __LINE__), lhs, expr)
#define ASSERT_OK_AND_ASSIGN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                               \
  ASSERT_TRUE(statusor.ok()) << statusor.status();      \
  lhs = std::move(statusor).value()

#endif  // JITPIPE_TESTS_TESTING_STATUS_MATCHERS_H_
