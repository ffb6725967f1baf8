// Random edits of a schedule's programs, for the tests that hold a fast
// checker to its exact per-action reference over many broken programs.
#ifndef JITPIPE_TESTS_TESTING_PROGRAM_MUTATIONS_H_
#define JITPIPE_TESTS_TESTING_PROGRAM_MUTATIONS_H_

#include <random>
#include <utility>

#include "scheduler/ir/schedule.h"

namespace jitpipe::testing {

// One random edit of one rank's program: swap two actions, drop one,
// duplicate one, move one to another rank, shift its microbatch by one,
// change a simple action's kind (to any simple kind, WAITs included), or
// empty a compound.
inline void MutateProgram(Schedule& s, std::mt19937& rng) {
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  RankProgram& program = s.ranks[pick(s.pp)];
  if (program.size() < 2) return;
  const int i = pick(static_cast<int>(program.size()));
  const int j = pick(static_cast<int>(program.size()));
  switch (pick(7)) {
    case 0:
      std::swap(program[i], program[j]);
      break;
    case 1:
      program.erase(program.begin() + i);
      break;
    case 2:
      program.insert(program.begin() + j, program[i]);
      break;
    case 3: {
      RankProgram& other = s.ranks[pick(s.pp)];
      other.insert(other.begin() + pick(static_cast<int>(other.size()) + 1), program[i]);
      program.erase(program.begin() + i);
      break;
    }
    case 4:
      program[i].microbatch += pick(3) - 1;
      break;
    case 5:
      if (!program[i].is_compound()) {
        // Every simple kind: F .. REDUCE_GRAD, WAIT_SEND_F, WAIT_SEND_B,
        // WAIT_REDUCE_GRAD (kOverlapFB and kBubble come after them).
        program[i].kind = static_cast<ActionKind>(pick(static_cast<int>(ActionKind::kOverlapFB)));
      }
      break;
    default:
      if (program[i].is_compound()) program[i].sub_actions = SubActions();
      break;
  }
}

}  // namespace jitpipe::testing

#endif  // JITPIPE_TESTS_TESTING_PROGRAM_MUTATIONS_H_
