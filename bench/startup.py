#!/usr/bin/env python3
"""Process start-up, side by side (issue 19: `jitpipe --version` <= 5 ms).

    bench/startup.py [--rounds N] BINARY [BINARY ...]

Runs `/bin/true` and `BINARY --version` for each BINARY, alternated round
by round (a shared machine drifts; alternating spreads the drift over all),
and prints per command the median and minimum wall time from spawn to exit
and the median CPU time (user + sys of the child, which contention on the
machine inflates less than wall time), plus each binary's median minus
/bin/true's: what the binary costs beyond an empty process.

Compare a before and an after binary in the same run, e.g.
    cp build/default/tools/jitpipe /tmp/jitpipe.before   # then rebuild
    bench/startup.py /tmp/jitpipe.before build/default/tools/jitpipe
"""
import argparse
import os
import statistics
import time


def run_once(argv):
    """Wall and CPU milliseconds of one spawn-to-exit of argv."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        start = time.perf_counter()
        pid = os.posix_spawn(argv[0], argv, os.environ,
                             file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 1),
                                           (os.POSIX_SPAWN_DUP2, devnull, 2)])
        _, _, usage = os.wait4(pid, 0)
        wall = (time.perf_counter() - start) * 1e3
    finally:
        os.close(devnull)
    return wall, (usage.ru_utime + usage.ru_stime) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("binaries", nargs="+")
    args = parser.parse_args()
    commands = [["/bin/true"]] + [[os.path.abspath(b), "--version"] for b in args.binaries]
    wall = [[] for _ in commands]
    cpu = [[] for _ in commands]
    for _ in range(args.rounds):
        for i, argv in enumerate(commands):
            w, c = run_once(argv)
            wall[i].append(w)
            cpu[i].append(c)
    base = statistics.median(wall[0])
    print(f"{args.rounds} rounds, alternated; milliseconds")
    print("| command | wall median | wall min | CPU median | wall median - /bin/true |")
    print("|---|---|---|---|---|")
    for i, argv in enumerate(commands):
        med = statistics.median(wall[i])
        print(f"| `{' '.join(argv)}` | {med:.2f} | {min(wall[i]):.2f} | "
              f"{statistics.median(cpu[i]):.2f} | {med - base:+.2f} |")


if __name__ == "__main__":
    main()
