// Uses the installed headers and libraries: parse a schedule, validate it.
#include <cstdio>

#include "scheduler/ir/schedule_csv.h"
#include "scheduler/analysis/validate_structure.h"

int main() {
  auto schedule = jitpipe::ParseScheduleCsv("0F0,0F1,,0B0,0B1\n,1F0,1F1,1B0,1B1\n");
  if (!schedule.ok()) {
    std::fprintf(stderr, "consumer: %s\n", std::string(schedule.status().message()).c_str());
    return 1;
  }
  absl::Status valid = jitpipe::ValidateStructure(*schedule);
  if (!valid.ok()) {
    std::fprintf(stderr, "consumer: %s\n", std::string(valid.message()).c_str());
    return 1;
  }
  std::printf("consumer: find_package(jitpipe) works: %d ranks, %d stages\n", schedule->pp,
              schedule->num_stages());
  return 0;
}
