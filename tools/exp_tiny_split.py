"""GPU: the split of K for few tiles and a long K (the chooser's ``rules.TINY_SPLIT_*``) against cuBLAS, one process.

For each tiny long-K bf16 shape (GEMV-like: M and/or N small, K in the thousands; 5 x 2 x 6816 and every other
held-out shape of tools/heldout30.json with M or N <= 64 and K >= 1024 among them) one process times, against cuBLAS
(torch.matmul on the same inputs), in rounds of a fresh random order (tools/bench_epilogue.py's ``rotate``), medians,
every output checked against an f32 reference (``runtime.check.bench``'s ``Operands``/``_Case``):

* ``on``: the chooser's pick on this GPU with the rule on, ``off``: with ``rules.TINY_SPLIT_RULE`` off (the pick before it);
* ``split2``, ``split4``, ``split8``, ``split16``: the same narrow tile with K forced into that many splits (one launch,
  the last split to arrive sums the partials: derive.store.splitk);
* ``cublas_twin``: the baseline again (the method's noise).

Every kernel is compiled first (``--jobs`` processes; the kernel cache may be cold), inside ``--budget-s``.

    PYTHONPATH=$PWD python3 tools/exp_tiny_split.py --out $OUT/tiny-split --budget-s 120   # the GPU run
    PYTHONPATH=$PWD python3 tools/exp_tiny_split.py --dry-run [--no-compile]              # shapes, kernels, NVRTC (CPU)

Writes into --out: ``tiny_split.jsonl`` (one row per (shape, kernel): label, kernel, spec, split_k, chosen_by/why for
on and off, ms, cublas_ms, ratio = cuBLAS time / ours (medians), ratio_paired (median of per-round ratios), rel_error,
checked_ok, or error; one ``control`` row per shape: cublas_twin over cublas), ``env.json`` (device, torch, CUDA,
toolchain, commit, the rule's thresholds, nvidia-smi before and after) and ``summary.txt`` (per shape: each kernel's
ratio, the best split, on over off; counts at >= 0.95).

Exit 0 when every shape ran and every output checked, 1 when a shape did not run (budget, a kernel that failed) or an
output failed its check, 2 bad usage, 3 without a GPU (or torch).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys
import time
import zlib
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))

ARCH, DTYPE = "sm_90a", "bf16"
ROUNDS, BATCH_MS = 31, 3.0  # rounds of every kernel once; ms per timed batch (a call takes a few to ~20 us here)
FORCED = (2, 4, 8, 16)
GOAL = 0.95  # issue 35: every shape at >= 0.95 of cuBLAS
EXIT_FAIL, EXIT_NO_GPU = 1, 3
# tiny long-K shapes beside the held-out ones: small M, small N, both; 1, 4 and 16 tiles of 64 x 64; one past the
# rule's fill (17 tiles) and one the swap rule takes (1 x 4096 x 4096), so the forced splits show both sides
EXTRA = [(1, 4096, 4096), (8, 8, 16384), (32, 128, 8192), (128, 1, 12288), (1, 1, 8192), (16, 64, 16384), (64, 2, 4096),
         (200, 2, 8192), (256, 16, 8192), (100, 12, 7832), (2, 885, 2432), (1, 1024, 8192), (1, 1088, 8192)]


def heldout_tiny() -> list[tuple[int, int, int]]:
    """The held-out shapes (tools/heldout30.json) with M or N <= 64 and K >= 1024."""
    shapes = json.loads((TOOLS / "heldout30.json").read_text())["shapes"]
    return [tuple(s) for s in shapes if min(s[0], s[1]) <= 64 and s[2] >= 1024]


def shapes() -> list[tuple[int, int, int]]:
    out = heldout_tiny()
    return out + [s for s in EXTRA if s not in out]


@dataclasses.dataclass(frozen=True)
class Kern:
    label: str
    spec: object  # TileSpec
    swap_ab: bool = False
    chosen_by: str | None = None
    why: str | None = None


def device_for(name: str | None):
    """The chooser's device key: the GPU present (None), or a shipped calibration's device ("h100", "h200")."""
    from exp_candidates import device_for as shipped_device

    return shipped_device(name)


def _pick(m: int, n: int, k: int, device, rule_on: bool):
    from ptxgen.runtime.choose import Problem, choose, rules

    saved = rules.TINY_SPLIT_RULE
    rules.TINY_SPLIT_RULE = rule_on
    try:
        return choose(Problem(DTYPE, ARCH, m, n, k), device)
    finally:
        rules.TINY_SPLIT_RULE = saved


def narrow_tile(on, off, m: int, n: int, sm_count: int):
    """The narrow tile the forced splits split: the pick's (on, else off) where it is a narrow one-CTA-per-tile kernel,
    else ``narrow.tiny_tile``'s on the table's kernel family; None where M and N are both past 128."""
    from ptxgen.isa.types import Schedule
    from ptxgen.runtime.choose.choice import narrow_spec
    from ptxgen.runtime.choose.narrow import tiny_tile
    from ptxgen.runtime.choose.tune import default_spec

    for c in (on, off):
        s = c.spec
        if not c.swap_ab and s.schedule is Schedule.TILE and 64 in (s.bm, s.bn) and s.d_major.value != "m":
            return dataclasses.replace(s, split_k=1)
    t = tiny_tile(m, n, sm_count)
    return None if t is None else narrow_spec(default_spec(DTYPE, ARCH), t[0], t[1], t[2])


def kernels(m: int, n: int, k: int, device) -> list[Kern]:
    """on, off and the forced splits of one shape."""
    from ptxgen.runtime.choose.narrow import split_spec

    on, off = _pick(m, n, k, device, True), _pick(m, n, k, device, False)
    out = [Kern("on", on.spec, on.swap_ab, on.chosen_by, on.why), Kern("off", off.spec, off.swap_ab, off.chosen_by, off.why)]
    base = narrow_tile(on, off, m, n, device.sm_count)
    if base is not None:
        out += [Kern(f"split{s}", split_spec(base, s)) for s in FORCED]
    return out


def plan(device) -> list[tuple[tuple[int, int, int], list[Kern]]]:
    return [((m, n, k), kernels(m, n, k, device)) for m, n, k in shapes()]


def distinct_specs(tasks) -> list:
    return list({kern.spec.kernel_name: kern.spec for _, ks in tasks for kern in ks}.values())


def _short(name: str) -> str:
    return name.replace("ptxgen_sm90a_", "").replace("_a_k_sw128_ok_b_k_sw128_ok", "")


def _tiles(spec, m: int, n: int, swap: bool) -> int:
    rows, cols = (n, m) if swap else (m, n)
    return -(-rows // spec.bm) * -(-cols // spec.bn)


# -- the dry run (CPU) ----------------------------------------------------------------------------------------------------


def dry_run(args) -> int:
    from exp_candidates import compile_specs

    device = device_for(args.device)
    tasks = plan(device)
    for (m, n, k), ks in tasks:
        print(f"{m}x{n}x{k}:")
        for kern in ks:
            s = kern.spec
            rule = f"  [{kern.chosen_by}]" if kern.chosen_by else ""
            print(f"  {kern.label:8} {s.bm:3} x {s.bn:<3} split {s.split_k:2}  {_tiles(s, m, n, kern.swap_ab):3} tiles"
                  f"{'  swap-ab' if kern.swap_ab else ''}  {_short(s.kernel_name)}{rule}")
    specs = distinct_specs(tasks)
    est = sum(len(ks) + 2 for _, ks in tasks) * (ROUNDS + 3) * BATCH_MS / 1e3
    print(f"{len(tasks)} shapes, {len(specs)} distinct kernels, ~{est:.0f} s of timing (plus start-up and compiles)")
    if args.no_compile:
        return 0
    t0 = time.monotonic()
    failed = compile_specs(specs, args.jobs)
    print(f"NVRTC: {len(specs) - len(failed)} of {len(specs)} kernels compiled in {time.monotonic() - t0:.1f} s")
    return EXIT_FAIL if failed else 0


# -- the GPU run -------------------------------------------------------------------------------------------------------------


class Out:
    def __init__(self, folder: Path, rows: str = "tiny_split.jsonl"):
        self.folder, self.rows = folder, rows
        folder.mkdir(parents=True, exist_ok=True)
        (folder / rows).write_text("")

    def row(self, d: dict) -> None:
        with open(self.folder / self.rows, "a") as f:
            f.write(json.dumps(d) + "\n")

    def say(self, s: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {s}", flush=True)


def write_env(out: Out, key, extra: dict) -> None:
    import torch

    from exp_candidates_run import _smi
    from ptxgen.runtime.choose import rules
    from ptxgen.runtime.compile.cache import toolchain_id
    from ptxgen.version import __version__

    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    env = {"device": key.to_json(), "ptxgen": __version__, "commit": commit or None, "torch": torch.__version__,
           "cuda": torch.version.cuda, "toolchain": toolchain_id(), "smi_before": _smi(), "rounds": ROUNDS,
           "batch_ms": BATCH_MS, "order": "each round a fresh random order (tools/bench_epilogue.py rotate)",
           "rules": {name: getattr(rules, name) for name in ("TINY_SPLIT_RULE", "TINY_SPLIT_MAX_FILL", "TINY_SPLIT_MAX",
                                                             "TINY_SPLIT_DTYPES", "SPLIT_MIN_K_TILES", "SPLIT_MAX")},
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **extra}
    (out.folder / "env.json").write_text(json.dumps(env, indent=1) + "\n")


def _context_ok(torch) -> bool:
    try:
        torch.ones(1, device="cuda").add_(1)
        torch.cuda.synchronize()
        return True
    except Exception:  # noqa: BLE001
        return False


def run_shape(torch, shape, ks: list[Kern], dev, out: Out) -> bool:
    """Time one shape's kernels against cuBLAS; False where the CUDA context was lost (nothing more can run)."""
    from bench_epilogue import paired, rotate

    from ptxgen.runtime.check.bench import Operands, _Case
    from ptxgen.runtime.launch.gpu import CudaError

    m, n, k = shape
    tid = f"{m}x{n}x{k}"
    base = {"shape": tid, "dtype": ks[0].spec.dtype.value, "m": m, "n": n, "k": k}
    ops = Operands(torch, ks[0].spec, m, n, k, 0)
    try:
        ops.baseline()
        torch.cuda.synchronize()
    except RuntimeError as e:
        out.row({**base, "label": "control", "error": f"baseline: {str(e).splitlines()[0][:200]}"})
        return _context_ok(torch)
    cases = {}
    for kern in ks:
        row = {**base, "label": kern.label, "kernel": kern.spec.kernel_name, "spec": kern.spec.to_json(),
               "split_k": kern.spec.split_k, "swap_ab": kern.swap_ab, "tiles": _tiles(kern.spec, m, n, kern.swap_ab),
               "chosen_by": kern.chosen_by, "why": kern.why}
        try:
            case = _Case(torch, kern.spec, m, n, k, 0, dev.sm_count, kern.swap_ab, operands=ops)
            case.ours()
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - a kernel that cannot run is reported, not fatal
            out.row({**row, "error": f"{type(e).__name__}: {str(e)[:300]}"})
            if isinstance(e, CudaError) or not _context_ok(torch):
                out.say(f"{tid} {kern.label}: the CUDA context is lost; stopping")
                return False
            continue
        cases[kern.label] = (case, row)
    fns = {"cublas": ops.baseline, "cublas_twin": ops.baseline, **{lab: c.ours for lab, (c, _) in cases.items()}}
    ms, times = rotate(torch, fns, ROUNDS, warmup=2, seed=zlib.crc32(tid.encode()), batch_ms=BATCH_MS)
    cub = ms["cublas"]
    out.row({**base, "label": "control", "cublas_ms": cub, "cublas_call": ops.call,
             "cublas_twin_over_cublas": cub / ms["cublas_twin"]})
    for lab, (case, row) in cases.items():
        err = case.error(torch)
        out.row({**row, "ms": ms[lab], "cublas_ms": cub, "ratio": cub / ms[lab], "ratio_paired": paired(times, "cublas", lab),
                 "rel_error": err, "checked_ok": err <= case.tol})
        case.unload()
    return True


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def summary_text(rows: list[dict]) -> str:
    """Per shape: each kernel's ratio to cuBLAS (cuBLAS time / ours, medians; us per call), the best forced split, on
    over off; then counts and geomeans."""
    labels = ("on", "off") + tuple(f"split{s}" for s in FORCED)
    lines = ["ratio = cuBLAS time / kernel time (medians of rounds); us = our median time per call; "
             f"on/off = the rule's pick against the pick without it (time off / time on); goal >= {GOAL}"]
    by = {}
    for r in rows:
        by.setdefault(r["shape"], {})[r["label"]] = r
    ons, offs, bests = [], [], []
    for shape, mine in by.items():
        ok = {lab: r for lab, r in mine.items() if r.get("ratio") and r.get("checked_ok")}
        ctl = mine.get("control", {})
        parts = []
        for lab in labels:
            r = mine.get(lab)
            if r is None:
                continue
            if lab in ok:
                parts.append(f"{lab}{'(S=' + str(r['split_k']) + ')' if lab in ('on', 'off') else ''} "
                             f"{r['ratio']:.3f} {r['ms'] * 1e3:.1f}us")
            else:
                parts.append(f"{lab} FAILED {r.get('error') or r.get('rel_error')}")
        forced = [ok[lab] for lab in labels[2:] if lab in ok]
        best = max(forced, key=lambda r: r["ratio"]) if forced else None
        on, off = ok.get("on"), ok.get("off")
        head = f"{shape:16} cuBLAS {ctl.get('cublas_ms', float('nan')) * 1e3:6.1f}us (twin {ctl.get('cublas_twin_over_cublas', float('nan')):.3f})"
        tail = ""
        if on and off:
            tail += f"  on/off {off['ms'] / on['ms']:.3f}  [{on['chosen_by']}]"
            ons.append(on["ratio"])
            offs.append(off["ratio"])
        if best:
            tail += f"  best forced {best['label']} {best['ratio']:.3f}"
            bests.append(max(best["ratio"], on["ratio"]) if on else best["ratio"])
        lines.append(f"{head}  " + ", ".join(parts) + tail)
    if ons:
        lines.append(f"{len(ons)} shapes: geomean on {_geomean(ons):.3f}, off {_geomean(offs):.3f}, best of on and forced "
                     f"{_geomean(bests):.3f}; at >= {GOAL}: on {sum(x >= GOAL for x in ons)}, off {sum(x >= GOAL for x in offs)}, "
                     f"best {sum(x >= GOAL for x in bests)}; lowest on {min(ons):.3f}")
    return "\n".join(lines) + "\n"


def gpu_run(args) -> int:
    from exp_candidates import compile_specs
    from exp_candidates_run import _smi, gpu_and_torch

    t_start = time.monotonic()
    deadline = t_start + args.budget_s
    got = gpu_and_torch("exp_tiny_split")
    if got is None:
        return EXIT_NO_GPU
    dev, torch = got
    from ptxgen.runtime.choose.calibrate import device_key

    out = Out(Path(args.out))
    key = device_key()
    tasks = plan(key)
    specs = distinct_specs(tasks)
    out.say(f"{len(tasks)} shapes, {len(specs)} kernels; compiling in {args.jobs} processes")
    t0 = time.monotonic()
    failed = compile_specs(specs, args.jobs, log=out.say)
    compile_s = time.monotonic() - t0
    write_env(out, key, {"compile_s": round(compile_s, 1), "compile_failed": failed, "budget_s": args.budget_s})
    done, complete = 0, not failed
    for shape, ks in tasks:
        if time.monotonic() > deadline:
            out.say(f"skipped {shape} (budget)")
            out.row({"shape": "x".join(map(str, shape)), "label": "control", "error": "skipped: past --budget-s"})
            complete = False
            continue
        alive = run_shape(torch, shape, ks, dev, out)
        torch.cuda.empty_cache()
        done += 1
        out.say(f"done {shape}")
        if not alive:
            complete = False
            break
    env = out.folder / "env.json"
    env.write_text(json.dumps({**json.loads(env.read_text()), "smi_after": _smi(), "wall_s": round(time.monotonic() - t_start, 1),
                               "shapes_timed": done}, indent=1) + "\n")
    return finish(out, summary_text, "exp_tiny_split", complete)


def finish(out: Out, summarize, tool: str, complete: bool) -> int:
    """The rows written summarized (``summarize``), saved as summary.txt and printed; 0 when the run was complete and
    every output checked, else EXIT_FAIL (each failure named on stderr)."""
    rows = read_rows(out.folder / out.rows)
    text = summarize(rows)
    (out.folder / "summary.txt").write_text(text)
    print(text, end="")
    wrong = [f"{r['shape']} {r['label']}" for r in rows if r.get("checked_ok") is False or r.get("error")]
    for w in wrong:
        print(f"{tool}: FAILED: {w}", file=sys.stderr)
    return 0 if complete and not wrong else EXIT_FAIL


def run_args(doc: str, budget_s: float) -> argparse.ArgumentParser:
    """The options every such GPU comparison takes: --out, --budget-s, --jobs, --dry-run, --no-compile, --device."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--out", metavar="DIR", help="the folder the rows, env.json and summary.txt go to (the GPU run)")
    ap.add_argument("--budget-s", type=float, default=budget_s,
                    help=f"the whole GPU run, compiles included (default {budget_s:g})")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="compile processes (default: every CPU)")
    ap.add_argument("--dry-run", action="store_true", help="list the shapes and kernels and compile them with NVRTC; no GPU")
    ap.add_argument("--no-compile", action="store_true", help="with --dry-run: the list only")
    ap.add_argument("--device", choices=("h100", "h200"), default="h100", help="with --dry-run: the calibration and SMs to plan for")
    return ap


def dispatch(ap: argparse.ArgumentParser, argv, dry_run_fn, gpu_run_fn) -> int:
    args = ap.parse_args(argv)
    if args.dry_run:
        return dry_run_fn(args)
    if not args.out:
        ap.error("--out DIR is needed for the GPU run (or --dry-run)")
    return gpu_run_fn(args)


def main(argv=None) -> int:
    return dispatch(run_args(__doc__, 120.0), argv, dry_run, gpu_run)


if __name__ == "__main__":
    sys.exit(main())
