// Reading the conformance golden files (tests/testdata/conformance) into IR.
#ifndef JITPIPE_TESTS_TESTING_CONFORMANCE_H_
#define JITPIPE_TESTS_TESTING_CONFORMANCE_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "scheduler/ir/schedule.h"

namespace jitpipe::testing {

// A "ranks"-style JSON list of lists of action strings (null = bubble) as
// programs. Fails the test on a parse error.
std::vector<RankProgram> ProgramsFromJson(const nlohmann::json& ranks);

// The same list as PyTorch CSV text (what check-conformance writes).
std::string CsvFromJson(const nlohmann::json& ranks);

// Programs as text, bubbles as "", for readable comparisons.
std::vector<std::vector<std::string>> ProgramText(const std::vector<RankProgram>& ranks);
std::vector<std::vector<std::string>> JsonText(const nlohmann::json& ranks);

// Names of tests/testdata/conformance/pytorch/*.json without ".json".
std::vector<std::string> PytorchConformanceNames();

}  // namespace jitpipe::testing

#endif  // JITPIPE_TESTS_TESTING_CONFORMANCE_H_
