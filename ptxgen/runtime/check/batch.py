"""Many GPU validations in one process, safe against hangs: a worker runs the jobs one after another and
prints a JSON line per result; the parent restarts it past any job that produced nothing in time (a
deadlocked kernel cannot be interrupted inside its process) and records that job as a hang.

    python -m ptxgen.runtime.check.batch jobs.json results.jsonl [--timeout 60]

A job is {"spec": <spec JSON>, "m": M | null, "n": N | null, "k": K | null, "seed": S | null}.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path


def _worker() -> int:
    from ...derive.tile.spec import TileSpec
    from .validate import validate_spec

    for line in sys.stdin:
        job = json.loads(line)
        t0 = time.perf_counter()
        try:
            spec = TileSpec.from_json(job["spec"])
            r = validate_spec(spec, job.get("m"), job.get("n"), job.get("k"), job.get("seed"))
            out = {"kernel": spec.kernel_name, "passed": r.passed, "verdict": r.verdict, "rel_error": r.rel_error}
        except Exception as e:  # noqa: BLE001 - a failing job is a result
            out = {"kernel": job["spec"], "passed": False, "verdict": f"ERROR {type(e).__name__}: {e}"[:3000]}
            if "CUDA_ERROR" in str(e):  # a sticky error poisons the context: report and let the parent restart
                out["job"] = job
                print(json.dumps(out), flush=True)
                return 3
        out["job"] = job
        out["seconds"] = round(time.perf_counter() - t0, 2)
        print(json.dumps(out), flush=True)
    return 0


def run_batch(jobs: list[dict], results_path: Path, timeout_s: float = 60.0) -> list[dict]:
    results: list[dict] = []
    todo = list(jobs)
    with open(results_path, "a", encoding="utf-8") as log:
        while todo:
            proc = subprocess.Popen(
                [sys.executable, "-m", "ptxgen.runtime.check.batch", "--worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            proc.stdin.write("".join(json.dumps(j) + "\n" for j in todo))
            proc.stdin.close()
            done = _collect(proc, todo, timeout_s, results, log)
            todo = todo[done:]
    return results


def _collect(proc, todo, timeout_s, results, log) -> int:
    """Read results until the worker ends or stalls; returns how many jobs are settled."""
    import selectors

    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    done = 0
    while done < len(todo):
        if not sel.select(timeout=timeout_s):
            proc.kill()
            r = {"kernel": todo[done]["spec"], "passed": False, "verdict": f"HANG: no result in {timeout_s:.0f} s", "job": todo[done]}
            results.append(r)
            log.write(json.dumps(r) + "\n")
            log.flush()
            return done + 1
        line = proc.stdout.readline()
        if not line:  # the worker exited (crash or sticky error): the current job is settled if it reported
            proc.wait()
            if done < len(todo) and proc.returncode not in (0, 3):
                r = {"kernel": todo[done]["spec"], "passed": False, "verdict": f"CRASH: worker exit {proc.returncode}", "job": todo[done]}
                results.append(r)
                log.write(json.dumps(r) + "\n")
                return done + 1
            return done
        r = json.loads(line)
        results.append(r)
        log.write(line)
        log.flush()
        done += 1
    proc.wait()
    return done


def main(argv: list[str]) -> int:
    if argv[:1] == ["--worker"]:
        return _worker()
    import argparse

    ap = argparse.ArgumentParser(prog="python -m ptxgen.runtime.check.batch")
    ap.add_argument("jobs")
    ap.add_argument("results")
    ap.add_argument("--timeout", type=float, default=60.0)
    a = ap.parse_args(argv)
    jobs = json.loads(Path(a.jobs).read_text())
    res = run_batch(jobs, Path(a.results), a.timeout)
    bad = [r for r in res if not r["passed"]]
    for r in res:
        print(r["verdict"])
    print(f"{len(res) - len(bad)} passed, {len(bad)} failed")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
