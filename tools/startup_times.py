"""Whole-process times of the everyday commands, warm: median of N runs of `ptxgen build` and `ptxgen explain` of
the seed tile (wall seconds, and CPU seconds: user + sys of the child). Run from a checkout's root:

    PYTHONPATH=$PWD python tools/startup_times.py [--runs 5] [--out /tmp/ptxgen-times]

One untimed build first fills the caches (the kernel, its SASS, the toolchain's versions, the templates' bytecode,
the build memo). ``--full`` removes the build memo (ptxgen.runtime.compile.buildmemo) before each timed build, so each
renders, draws and checks the kernel again, as the first build after an edit of ptxgen does. ``--floor`` adds what
the interpreter alone costs here, with the standard modules the commands import, and with jinja2 and numpy.
Python writes .pyc files as usual (PYTHONDONTWRITEBYTECODE is removed for the children). On a machine shared
with other jobs the numbers move: give the load average with them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

SEED = ["--bm", "128", "--bn", "128", "--bk", "32", "--a", "kmajor-sw64"]
STDLIB = "import argparse, dataclasses, enum, re, json, typing, textwrap"  # what `ptxgen explain` loads of the standard library
FLOOR = {"python -c pass": "pass", "python + the stdlib modules": STDLIB, "python + import jinja2": "import jinja2",
         "python + import numpy": "import numpy"}


def children_cpu() -> float:
    """User + system seconds of the finished children: getrusage (microseconds) where there is one, else os.times
    (clock ticks, 10 ms on Linux: too coarse for a 0.1 s command)."""
    try:
        import resource
    except ImportError:  # Windows
        t = os.times()
        return t.children_user + t.children_system
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(argv: list[str], env: dict) -> tuple[float, float]:
    before = children_cpu()
    t0 = time.perf_counter()
    cmd = [sys.executable, *argv] if argv[0] == "-c" else [sys.executable, "-m", "ptxgen", *argv]
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    return wall, children_cpu() - before


def forget_builds() -> None:
    from ptxgen.cachedir import cache_dir
    from ptxgen.runtime.compile.cache import BUILDS_FOLDER

    for p in (cache_dir() / BUILDS_FOLDER).glob("*.json"):
        p.unlink()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default="/tmp/ptxgen-times", help="build output folder (default /tmp/ptxgen-times)")
    ap.add_argument("--full", action="store_true", help="remove the build memo before each build (no reuse)")
    ap.add_argument("--floor", action="store_true", help="also time bare interpreters: nothing, the standard modules "
                    "the commands import, jinja2, numpy")
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    commands = {"build": ["build", *SEED, "--out", args.out], "explain": ["explain", *SEED]}
    if args.floor:
        commands |= {name: ["-c", code] for name, code in FLOOR.items()}
    timed(commands["build"], env)
    samples = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, argv in commands.items():
            if name == "build" and args.full:
                forget_builds()
            samples[name].append(timed(argv, env))
    for name, s in samples.items():
        walls, cpus = [w for w, _ in s], [c for _, c in s]
        print(f"{name}{' (--full)' if name == 'build' and args.full else ''}: median wall {statistics.median(walls):.2f} s, "
              f"CPU {statistics.median(cpus):.3f} s "
              f"(walls {' '.join(f'{w:.2f}' for w in walls)})")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
