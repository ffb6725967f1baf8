// The headers nearly every test includes, precompiled once per build and
// reused by every GoogleTest target (tests/CMakeLists.txt). GoogleTest, gMock
// and nlohmann/json are most of a test file's parse time, and the suite's time
// is in its compile. Each test file still includes what it uses; this header
// only makes that cheap.
#ifndef JITPIPE_TESTS_TESTING_TEST_PCH_H_
#define JITPIPE_TESTS_TESTING_TEST_PCH_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

#endif  // JITPIPE_TESTS_TESTING_TEST_PCH_H_
