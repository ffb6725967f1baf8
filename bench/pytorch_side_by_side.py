#!/usr/bin/env python3
"""PyTorch's own schedule functions and the jitpipe CLI, timed side by side.

    bench/pytorch_side_by_side.py --schedules PATH/schedules.py [--rounds 7]
        [--bench SCHEDULE_BENCH] JITPIPE...

PATH/schedules.py is PyTorch's torch/distributed/pipelining/schedules.py, a
copy you bring (PyTorch's code stays out of this repository; see README.md,
"Side by side with PyTorch"). It is imported under CPython with torch
stubbed: every `torch...` module, and the package-relative `.stage`,
`.microbatch` and `._utils`, are permissive stand-in modules whose every
attribute is _AnyTorchObject; the functions timed here never touch them.

Per case, alternated round by round (a shared machine drifts):
  PyTorch  Interleaved1F1B's order (ScheduleInterleaved1F1B.
           _calculate_single_rank_operations for every rank), _validate_schedule,
           _add_unshard_reshard on every rank, then _add_send_recv: what its
           runtime does before the first step (the issue 19 recipe);
  jitpipe  for each JITPIPE binary: `generate` then `lower --fsdp --recv
           early` (the same work: UNSHARD/RESHARD, then sends and receives),
           two processes, files in a scratch directory (--scratch; by default
           a fresh directory in /dev/shm where there is one: PyTorch's side
           keeps its result in memory, and a disk's fsync, which every
           written file waits for, is the disk's time, not jitpipe's -- on
           this VM's disk it adds 5-8 ms per file); and, where the binary
           has it, `lower --schedule ... --fsdp --recv early`, the same in one
           process;
  in process  with --bench, schedule_bench's BM_PyTorchFrontHalf/medium (the
           same work at pp 32 in one long-lived process, as PyTorch's side
           is), once with glibc's allocator defaults and once with freed
           memory kept (GLIBC_TUNABLES, as the CLI's own heap policy does and
           as CPython's allocator does for PyTorch's side).
Prints a markdown table of medians and PyTorch / jitpipe ratios. First it
checks that PyTorch's _add_unshard_reshard + _add_send_recv and `lower --fsdp
--recv early` produce the same programs at pp 8 m 64 v 4, so both sides do
the same work.
"""
import argparse
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types

CASES = [(8, 64, 4), (32, 256, 4), (64, 512, 4)]


class _AnyTorchObject:
    """Anything torch would provide: a class that can be called, subclassed,
    subscripted and joined with | in annotations."""

    def __class_getitem__(cls, item):
        return cls

    def __init__(self, *args, **kwargs):
        pass


class _PermissiveModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _AnyTorchObject


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves a permissive module for torch and its submodules, and for the
    pipelining package's own modules other than schedules."""

    def __init__(self, package):
        self.package = package

    def find_spec(self, fullname, path, target=None):
        stub = fullname == "torch" or fullname.startswith("torch.") or (
            fullname.startswith(self.package + ".") and fullname != self.package + ".schedules")
        if not stub:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        module = _PermissiveModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


def load_schedules(path):
    package = "_pytorch_pipelining"
    sys.meta_path.insert(0, _StubFinder(package))
    parent = types.ModuleType(package)
    parent.__path__ = [os.path.dirname(os.path.abspath(path))]
    sys.modules[package] = parent
    spec = importlib.util.spec_from_file_location(package + ".schedules", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def pytorch_order(pt, pp, m, v):
    """ScheduleInterleaved1F1B.__init__'s order, without stages: the method
    reads only these attributes."""
    schedule = object.__new__(pt.ScheduleInterleaved1F1B)
    schedule.pp_group_size = pp
    schedule.n_local_stages = v
    schedule._n_microbatches = m
    schedule.number_of_rounds = max(1, m // pp)
    schedule.microbatches_per_round = m // schedule.number_of_rounds
    return {rank: schedule._calculate_single_rank_operations(rank) for rank in range(pp)}


def pytorch(pt, pp, m, v, fsdp=True):
    order = pytorch_order(pt, pp, m, v)
    stage_to_rank = pt._validate_schedule(order, pp, pp * v, m)
    if fsdp:
        order = {rank: pt._add_unshard_reshard(order[rank]) for rank in order}
    return pt._add_send_recv(order, lambda stage: stage_to_rank[stage], pp * v)


def jitpipe(binary, pp, m, v, scratch):
    generated, lowered = os.path.join(scratch, "g.json"), os.path.join(scratch, "l.json")
    start = time.perf_counter()
    subprocess.run([binary, "generate", "--schedule", "interleaved-1f1b", "--pp", str(pp),
                    "--microbatches", str(m), "--stages-per-rank", str(v), "-o", generated],
                   check=True)
    subprocess.run([binary, "lower", generated, "--fsdp", "--recv", "early", "-o", lowered],
                   check=True)
    return time.perf_counter() - start, lowered


def jitpipe_one_process(binary, pp, m, v, scratch):
    lowered = os.path.join(scratch, "l1.json")
    start = time.perf_counter()
    subprocess.run([binary, "lower", "--schedule", "interleaved-1f1b", "--pp", str(pp),
                    "--microbatches", str(m), "--stages-per-rank", str(v), "--fsdp", "--recv",
                    "early", "-o", lowered], check=True)
    return time.perf_counter() - start, lowered


def has_one_process_lower(binary, scratch):
    probe = subprocess.run([binary, "lower", "--schedule", "1f1b", "--pp", "2",
                            "--microbatches", "2", "-o", os.path.join(scratch, "probe.json")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return probe.returncode == 0


# glibc keeps freed memory in the process: no trimming, no mmap()ed chunks
# below 32 MiB (the CLI's base/process_heap.h does the same from main()).
KEEP_MEMORY = "glibc.malloc.trim_threshold=2000000000:glibc.malloc.mmap_threshold=33554432"


def in_process(bench, keep_memory):
    """Seconds per BM_PyTorchFrontHalf/medium iteration in one schedule_bench run."""
    env = dict(os.environ)
    if keep_memory:
        env["GLIBC_TUNABLES"] = KEEP_MEMORY
    out = subprocess.run([bench, "--benchmark_filter=^BM_PyTorchFrontHalf/medium$",
                          "--benchmark_format=json"], check=True, env=env,
                         capture_output=True, text=True).stdout
    result = json.loads(out)["benchmarks"][0]
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[result["time_unit"]]
    return result["real_time"] * scale


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--schedules", required=True, help="PyTorch's schedules.py")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--scratch", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
                        help="where the scratch directory is made (default: /dev/shm)")
    parser.add_argument("--bench", help="schedule_bench, for the in-process columns (pp 32)")
    parser.add_argument("binaries", nargs="+", help="jitpipe executables")
    args = parser.parse_args()
    pt = load_schedules(args.schedules)
    with tempfile.TemporaryDirectory(dir=args.scratch) as scratch:
        print(f"scratch directory: {scratch}")
        _, lowered = jitpipe(args.binaries[-1], 8, 64, 4, scratch)
        ours = json.load(open(lowered))["ranks"]
        theirs = pytorch(pt, 8, 64, 4)
        same = all([str(a) for a in theirs[rank]] == ours[rank] for rank in range(8))
        if has_one_process_lower(args.binaries[-1], scratch):
            _, lowered = jitpipe_one_process(args.binaries[-1], 8, 64, 4, scratch)
            same = same and json.load(open(lowered))["ranks"] == ours
        print("pp8 m64 v4: PyTorch's _add_unshard_reshard + _add_send_recv and "
              f"`lower --fsdp --recv early` agree: {same}")
        if not same:
            sys.exit("the two sides do not do the same work; nothing timed")
        # Each column: a title and a function of (pp, m, v) giving seconds, or
        # None where it does not apply.
        columns = []
        for binary in args.binaries:
            columns.append((f"`{binary}` generate + lower (two processes)",
                            lambda pp, m, v, b=binary: jitpipe(b, pp, m, v, scratch)[0]))
            if has_one_process_lower(binary, scratch):
                columns.append((f"`{binary}` lower --schedule (one process)",
                                lambda pp, m, v, b=binary:
                                jitpipe_one_process(b, pp, m, v, scratch)[0]))
        if args.bench:
            for keep, title in ((False, "glibc defaults"), (True, "memory kept")):
                columns.append((f"in process, {title}",
                                lambda pp, m, v, k=keep:
                                in_process(args.bench, k) if (pp, m, v) == (32, 256, 4)
                                else None))
        print("| case | PyTorch | " + " | ".join(title for title, _ in columns) + " |")
        print("|---|---|" + "---|" * len(columns))
        for pp, m, v in CASES:
            theirs_s, ours_s = [], [[] for _ in columns]
            for _ in range(args.rounds):
                start = time.perf_counter()
                pytorch(pt, pp, m, v)
                theirs_s.append(time.perf_counter() - start)
                for i, (_, run) in enumerate(columns):
                    seconds = run(pp, m, v)
                    if seconds is not None:
                        ours_s[i].append(seconds)
            base = statistics.median(theirs_s) * 1e3
            cells = [f"{statistics.median(s) * 1e3:.1f} ms "
                     f"({base / (statistics.median(s) * 1e3):.1f}x)" if s else "-"
                     for s in ours_s]
            print(f"| Interleaved1F1B pp{pp} m{m} v{v} | {base:.1f} ms | " + " | ".join(cells)
                  + " |")


if __name__ == "__main__":
    main()
