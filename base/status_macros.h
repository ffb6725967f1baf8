// Status propagation helpers.
//
// Our abseil (20220623) predates ABSL_RETURN_IF_ERROR / ABSL_ASSIGN_OR_RETURN,
// so the project carries its own, once, here (as XLA and TensorFlow do).
//
//   RETURN_IF_ERROR(expr);            // expr is an absl::Status
//   ASSIGN_OR_RETURN(lhs, expr);      // expr is an absl::StatusOr<T>;
//                                     // lhs may declare: auto x, const T& y
#ifndef JITPIPE_BASE_STATUS_MACROS_H_
#define JITPIPE_BASE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define JITPIPE_CONCAT_INNER_(a, b) a##b
#define JITPIPE_CONCAT_(a, b) JITPIPE_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                      \
  do {                                             \
    ::absl::Status jitpipe_status_ = (expr);       \
    if (!jitpipe_status_.ok()) return jitpipe_status_; \
  } while (false)

#define ASSIGN_OR_RETURN(lhs, expr) \
  JITPIPE_ASSIGN_OR_RETURN_IMPL_(JITPIPE_CONCAT_(jitpipe_statusor_, __LINE__), lhs, expr)

#define JITPIPE_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                   \
  if (!statusor.ok()) return std::move(statusor).status();  \
  lhs = std::move(statusor).value()

#endif  // JITPIPE_BASE_STATUS_MACROS_H_
