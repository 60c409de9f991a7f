"""GPU: the chooser's pick against the kernels it could have picked (the tasks of tools/exp_candidates.py), one run.

    PYTHONPATH=$PWD python3 tools/exp_candidates_run.py --out $OUT/candidates [--budget-s 240] [--only e4m3]

Compiles every kernel first (``--jobs`` processes), then times the tasks in a worker process; a launch that leaves the
CUDA context unusable, or a worker with no progress for 60 s, costs that kernel only: the worker starts again without
it (``progress.log`` names it, its row says why). Writes into --out:

  env.json          the device (name, SMs, clocks, memory), the calibration the chooser read, torch, CUDA, NVRTC,
                    the commit where known, nvidia-smi's clocks and power before and after
  candidates.jsonl  one row per (GEMM task, kernel): label, source, kernel, spec, predicted_us (the cost model), ms,
                    cublas_ms, ratio (cuBLAS time / ours, medians), ratio_paired (the median of per-round ratios),
                    rel_error, checked_ok, or error; and per task one "control" row (cublas_twin and pick_twin over the
                    originals: the method's noise)
  fused.jsonl       one row per fused-task kernel: ms, ratio to cuBLAS, over_base (time over the plain kernel of the same
                    tile), over_base_paired, rel_error against act(A B^T + bias) in f32
  progress.log      what the worker did, in order (compiles, each kernel's first launch, each timing, restarts)
  summary.txt       per task: the pick's ratio, the best kernel's, the model's rank of it, the verdict (mis-rank or
                    missing kernel); per class: geomeans; the fused chain against its bounds

Size (2026-12-06, planned for the H100 calibration): 27 tasks, 139 distinct kernels; compiling all of them took 59 s
with 2 processes on a 2-core CPU (70 CPU-seconds), and ``exp_candidates.py plan`` puts the timing at about 130 s.

Exit 0 when every task ran and every output checked, 1 when a task did not run (budget, crashes) or an output
failed its check (stderr names it), 3 without a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import exp_candidates as plan  # noqa: E402  (tools/: the tasks and their kernels)

DEVICE = "cuda"  # where the fused chain's bias lives (a test runs the row logic on the CPU)
BUDGET_S, STALL_S = 240.0, 60.0  # the whole run (compiles included); no progress for this long: the worker hung
EXIT_STICKY, EXIT_NO_GPU = 75, 3  # the worker's exit when a launch left the CUDA context unusable; no GPU


class Out:
    """The run's folder: rows appended as JSON lines, progress lines with a time stamp."""

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def row(self, name: str, d: dict) -> None:
        with open(self.folder / name, "a") as f:
            f.write(json.dumps(d) + "\n")

    def drop(self, name: str, task: str) -> None:
        """Remove a task's rows (a task that runs again after a restart writes them anew)."""
        path = self.folder / name
        if path.is_file():
            keep = [line for line in path.read_text().splitlines() if line.strip() and json.loads(line).get("task") != task]
            path.write_text("".join(line + "\n" for line in keep))

    def say(self, s: str) -> None:
        with open(self.folder / "progress.log", "a") as f:
            f.write(f"{time.time():.1f} {s}\n")


# -- the worker: one CUDA context, tasks in order ---------------------------------------------------------------------------


def _wanted(task_id: str, only: str | None) -> bool:
    """Whether --only keeps a task: no filter, or one of its comma-separated texts is part of the task's id."""
    return not only or any(part in task_id for part in only.split(","))


def _smi() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,"
                               "temperature.gpu", "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def write_env(out: Out, key) -> None:
    import torch

    from ptxgen.runtime.choose.calibration import calibration_for
    from ptxgen.runtime.compile.cache import toolchain_id
    from ptxgen.version import __version__

    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    env = {"device": key.to_json(), "calibration": calibration_for(key).source, "ptxgen": __version__, "commit": commit or None,
           "torch": torch.__version__, "cuda": torch.version.cuda, "toolchain": toolchain_id(), "smi_before": _smi(),
           "rounds": plan.ROUNDS, "batch_ms": plan.BATCH_MS, "fused_rounds": plan.FUSED_ROUNDS,
           "fused_batch_ms": plan.FUSED_BATCH_MS, "order": "each round a fresh random order (tools/bench_epilogue.py rotate)",
           "large_random_seed": plan.LARGE_SEED, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (out.folder / "env.json").write_text(json.dumps(env, indent=1) + "\n")


def _cases(torch, t: dict, cands, ops, dev, out: Out, base: dict, excluded: dict, extra=None) -> dict:
    """label -> (case, row) of every kernel that loads and launches once; the others get a row with their error."""
    from ptxgen.runtime.check.bench import _Case
    from ptxgen.runtime.launch.gpu import CudaError

    tid, cases = plan.task_id(t), {}
    for c in cands:
        row = {**base, "label": c.label, "source": c.source, "kernel": c.spec.kernel_name, "spec": c.spec.to_json(),
               "swap_ab": c.swap_ab, "chain": c.chain}
        if c.label in excluded:
            out.row(base["file"], {**row, "error": excluded[c.label]})
            continue
        out.say(f"probe {tid} {c.label}")
        try:
            case = _Case(torch, c.spec, t["m"], t["n"], t["k"], 0, dev.sm_count, c.swap_ab, operands=ops,
                         extra=extra if c.chain else None)
            case.ours()
            _sync(torch)
        except Exception as e:  # noqa: BLE001 - a kernel that cannot run this shape is reported, not fatal
            out.row(base["file"], {**row, "error": f"{type(e).__name__}: {str(e)[:300]}"})
            if isinstance(e, CudaError) or not _context_ok(torch):  # lost: nothing after this can run in this process
                out.say(f"sticky {tid} {c.label} {type(e).__name__}: {' '.join(str(e).split())[:200]}")
                sys.exit(EXIT_STICKY)
            continue
        cases[c.label] = (case, row)
    return cases


def _sync(torch) -> None:
    torch.cuda.synchronize()


def _context_ok(torch) -> bool:
    """Whether the CUDA context still runs work (an illegal address in a kernel surfaces at a synchronize, in torch)."""
    try:
        torch.ones(1, device=DEVICE).add_(1)
        _sync(torch)
        return True
    except Exception:  # noqa: BLE001
        return False


def _time(torch, fns: dict, tid: str, rounds: int, batch_ms: float, out: Out):
    from bench_epilogue import rotate  # tools/: rounds in a fresh random order, event-timed batches

    out.say(f"timing {tid} {len(fns)} entries")
    return rotate(torch, fns, rounds, warmup=1, seed=zlib.crc32(tid.encode()), batch_ms=batch_ms)


def run_gemm(torch, t: dict, key, dev, out: Out, excluded: dict) -> None:
    from bench_epilogue import paired

    from ptxgen.runtime.check.bench import Operands

    tid, (m, n, k) = plan.task_id(t), (t["m"], t["n"], t["k"])
    cands, choice, refused = plan.gemm_candidates(t["dtype"], m, n, k, key)
    model = plan.cost_model(key)
    base = {"task": tid, "class": t["class"], "dtype": t["dtype"], "m": m, "n": n, "k": k,
            "rows": plan.row_phase(t["dtype"], k), "file": "candidates.jsonl"}
    out.drop("candidates.jsonl", tid)
    for r in refused:
        out.row("candidates.jsonl", {**base, **r, "source": "extra"})
    ops = Operands(torch, cands[0].spec, m, n, k, 0)
    try:
        ops.baseline()
        _sync(torch)
    except RuntimeError as e:
        out.row("candidates.jsonl", {**base, "label": "control", "error": f"baseline: {str(e).splitlines()[0][:200]}"})
        return
    cases = _cases(torch, t, cands, ops, dev, out, base, excluded)
    fns = {"cublas": ops.baseline, "cublas_twin": ops.baseline, **{lab: c.ours for lab, (c, _) in cases.items()}}
    if "pick" in cases:
        fns["pick_twin"] = cases["pick"][0].ours
    ms, times = _time(torch, fns, tid, plan.ROUNDS, plan.BATCH_MS, out)
    cub, flops = ms["cublas"], 2.0 * m * n * k
    out.row("candidates.jsonl", {**base, "label": "control", "chosen_by": choice.chosen_by, "why": choice.why, "cublas_ms": cub,
                                 "cublas_call": ops.call, "cublas_twin_over_cublas": cub / ms["cublas_twin"],
                                 "pick_twin_over_pick": ms["pick"] / ms["pick_twin"] if "pick" in cases else None})
    for lab, (case, row) in cases.items():
        err = case.error(torch)
        c = next(x for x in cands if x.label == lab)
        pred = plan.predicted_us(c, t["dtype"], m, n, k, model)
        out.row("candidates.jsonl", {**row, "chosen_by": choice.chosen_by if lab == "pick" else None,
                                     "predicted_us": None if pred is None else round(pred, 2), "ms": ms[lab], "cublas_ms": cub,
                                     "ratio": cub / ms[lab], "ratio_paired": paired(times, "cublas", lab),
                                     "tflops": flops / ms[lab] / 1e9, "rel_error": err, "checked_ok": err <= case.tol})
        case.unload()


def run_fused(torch, t: dict, key, dev, out: Out, excluded: dict) -> None:
    import torch.nn.functional as F
    from bench_epilogue import paired

    from ptxgen.runtime.check.bench import Operands

    tid, (m, n, k) = plan.task_id(t), (t["m"], t["n"], t["k"])
    cands, choice = plan.fused_candidates(m, n, k, key)
    base = {"task": tid, "class": t["class"], "dtype": "bf16", "m": m, "n": n, "k": k, "file": "fused.jsonl"}
    out.drop("fused.jsonl", tid)
    ops = Operands(torch, cands[0].spec, m, n, k, 0)
    bias = torch.randn(n, device=DEVICE, dtype=torch.bfloat16, generator=torch.Generator(device=DEVICE).manual_seed(1))
    cases = _cases(torch, t, cands, ops, dev, out, base, excluded, extra={"alpha": 1.0, "BIAS": bias.data_ptr()})
    fns = {"cublas": ops.baseline, **{lab: c.ours for lab, (c, _) in cases.items()}}
    if "plain" in cases:
        fns["plain_twin"] = cases["plain"][0].ours
    ms, times = _time(torch, fns, tid, plan.FUSED_ROUNDS, plan.FUSED_BATCH_MS, out)
    y = ops.ref + bias.float()
    refs = {"relu": torch.relu(y), "gelu": F.gelu(y, approximate="tanh")}
    for lab, (case, row) in cases.items():
        chain = row["chain"]
        ref = refs[chain] if chain else ops.ref
        err = float(torch.linalg.norm(case.d.float() - ref) / torch.linalg.norm(ref))
        base_lab = "pp/plain" if lab.startswith("pp/") else "plain"
        over = (ms[lab] / ms[base_lab], paired(times, lab, base_lab)) if base_lab in ms else (None, None)
        out.row("fused.jsonl", {**row, "chosen_by": choice.chosen_by if lab == "pick" else None, "ms": ms[lab],
                                "cublas_ms": ms["cublas"], "ratio": ms["cublas"] / ms[lab], "base": base_lab,
                                "over_base": over[0], "over_base_paired": over[1], "rel_error": err, "checked_ok": err <= 1e-2,
                                "twin_over_plain": ms["plain_twin"] / ms["plain"] if "plain_twin" in ms else None})
        case.unload()


def gpu_and_torch(tool: str):
    """(the GPU, torch), or None with the reason printed (the caller exits EXIT_NO_GPU): the baselines (cuBLAS,
    torch._scaled_mm) come through torch, so without it there is no usable GPU for the run."""
    from ptxgen.runtime.launch.gpu import NoGPU, require_gpu

    try:
        dev = require_gpu()
    except NoGPU as e:
        print(f"{tool}: {e}", file=sys.stderr)
        return None
    try:
        import torch
    except ImportError:
        print(f"{tool}: torch is not installed (the baselines run through it)", file=sys.stderr)
        return None
    return dev, torch


def worker(args) -> int:
    from ptxgen.runtime.choose.calibrate import device_key

    out, state = Out(Path(args.out)), json.loads(Path(args.state).read_text())
    got = gpu_and_torch("exp_candidates_run")
    if got is None:
        return EXIT_NO_GPU
    dev, torch = got
    key = device_key()
    todo = [t for t in plan.tasks() if plan.task_id(t) not in state["done"] and _wanted(plan.task_id(t), state["only"])]
    if not state["compiled"]:
        write_env(out, key)
        specs = list({c.spec.kernel_name: c.spec for t in todo for c in plan.task_kernels(t, key)[0]}.values())
        out.say(f"compiling {len(specs)} kernels in {args.jobs} processes")
        t0 = time.monotonic()
        plan.compile_specs(specs, args.jobs, log=out.say)
        out.say(f"compiled in {time.monotonic() - t0:.1f} s")
    for t in todo:
        tid = plan.task_id(t)
        if time.time() > args.deadline:
            out.say(f"skipped {tid} (budget)")
            continue
        out.say(f"start {tid}")
        (run_fused if t["kind"] == "fused" else run_gemm)(torch, t, key, dev, out, state["exclude"].get(tid, {}))
        torch.cuda.empty_cache()
        out.say(f"done {tid}")
    return 0


# -- the driver: restarts the worker without what killed it -------------------------------------------------------------------


def _progress(out: Out) -> list[str]:
    p = out.folder / "progress.log"
    return [line.split(" ", 1)[1] for line in p.read_text().splitlines()] if p.is_file() else []


def _after_failure(out: Out, state: dict, why: str) -> None:
    """Update ``state`` from progress.log after the worker died: done tasks; the kernel whose first launch was last tried
    is excluded from its task; a task that died while timing is given up."""
    lines = _progress(out)
    state["compiled"] = state["compiled"] or any(line.startswith("compiled in") for line in lines)
    state["done"] = sorted({line.split()[1] for line in lines if line.startswith(("done ", "skipped "))})
    last = next((line for line in reversed(lines) if line.startswith(("probe ", "sticky ", "timing ", "start "))), "")
    parts = last.split()
    if parts and parts[0] in ("probe", "sticky"):
        state["exclude"].setdefault(parts[1], {})[parts[2]] = (
            f"its first launch left the CUDA context unusable ({' '.join(parts[3:])})" if parts[0] == "sticky" else
            f"the worker process died on its first launch ({why})")
        out.say(f"restart without {parts[2]} on {parts[1]} ({why})")
    elif parts and parts[0] in ("timing", "start"):
        state["done"].append(parts[1])
        base = "fused.jsonl" if parts[1].startswith("fused") else "candidates.jsonl"
        out.row(base, {"task": parts[1], "label": "control", "error": f"the worker died at '{last}' ({why})"})
        out.say(f"gave up {parts[1]} ({why})")


def _watch(proc, out: Out, deadline: float) -> str:
    """Wait for the worker: 'ok', 'no gpu', 'exit N', 'hung' (no progress for STALL_S) or 'budget' (past the deadline)."""
    p = out.folder / "progress.log"
    while True:
        try:
            rc = proc.wait(timeout=1.0)
            return {0: "ok", EXIT_NO_GPU: "no gpu"}.get(rc, f"exit {rc}")
        except subprocess.TimeoutExpired:
            pass
        stale = time.time() - (p.stat().st_mtime if p.is_file() else time.time())
        if stale > STALL_S or time.time() > deadline + STALL_S:
            os.killpg(proc.pid, signal.SIGKILL)  # the worker's own process group: it and its compile processes
            proc.wait()
            return "hung" if stale > STALL_S else "budget"


def run(args) -> int:
    out = Out(Path(args.out))
    deadline = time.time() + args.budget_s
    todo = [t for t in plan.tasks() if _wanted(plan.task_id(t), args.only)]
    print(f"exp_candidates_run: {len(todo)} tasks, at most {args.budget_s:.0f} s, into {out.folder}", flush=True)
    state = {"done": [], "exclude": {}, "compiled": False, "only": args.only}
    status = ""
    for attempt in range(1, 9):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(state, f)
        cmd = [sys.executable, __file__, "worker", "--out", str(out.folder), "--deadline", str(deadline), "--state", f.name,
               "--jobs", str(args.jobs)]
        proc = subprocess.Popen(cmd, start_new_session=True)
        status = _watch(proc, out, deadline)
        os.unlink(f.name)
        if status in ("ok", "no gpu", "budget"):
            break
        _after_failure(out, state, status)
    if status == "no gpu":
        return EXIT_NO_GPU
    env = out.folder / "env.json"
    if env.is_file():
        d = json.loads(env.read_text())
        env.write_text(json.dumps({**d, "smi_after": _smi()}, indent=1) + "\n")
    text = plan.summary_text(out.folder)
    (out.folder / "summary.txt").write_text(text)
    print(text, end="")
    lines = _progress(out)
    complete = status == "ok" and not any(line.startswith(("skipped", "gave up", "restart")) for line in lines)
    wrong = [f"{r['task']} {r['label']}" for name in ("candidates.jsonl", "fused.jsonl")
             for r in plan.read_rows(out.folder / name) if r.get("checked_ok") is False]
    for w in wrong:
        print(f"exp_candidates_run: output check FAILED: {w}", file=sys.stderr)
    return 0 if complete and not wrong else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", nargs="?", default="run", choices=("run", "worker"), help=argparse.SUPPRESS)
    ap.add_argument("--out", required=True, metavar="DIR", help="the folder the rows and the summary go to")
    ap.add_argument("--budget-s", type=float, default=BUDGET_S, help=f"the whole run, compiles included (default {BUDGET_S:.0f})")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="compile processes (default: every CPU)")
    ap.add_argument("--only", default=None, help="only the tasks whose id contains this text, or one of these comma-separated texts (e.g. fused:, e4m3, 3000x5000,260x8192)")
    ap.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--state", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    return worker(args) if args.mode == "worker" else run(args)


if __name__ == "__main__":
    sys.exit(main())
