"""GPU: stream-K over every SM where the tiles fill less than one round (``rules.STREAM_K_SINGLE_WAVE``) against cuBLAS.

Since 2026-12-07 a persistent stream-K kernel launches one CTA per SM however few its tiles (``KernelABI.fills_sms``),
so a launch of one partial round splits its tiles along K over the idle SMs, and the cost model prices that split. For
each few-tile shape (a seeded draw fixed here before any run, none of them a held-out or named shape, and the few-tile
shapes of 2026-12-07's stream-K run) and each input type (bf16; e4m3 with N and K rounded up to 16), one process times
against cuBLAS (torch.matmul, torch._scaled_mm for e4m3) in rounds of a fresh random order, medians, every output
checked (``exp_tiny_split.run_shape``):

* ``on``: the chooser's pick on this GPU, ``off``: its pick before the change (``rules.STREAM_K_SINGLE_WAVE`` off and
  ``costmodel.STREAMK_FIXUP_US`` at 0, the split round's fixed cost fitted on run 1's shapes); shapes where both pick the
  same kernel are listed, not timed;
* ``narrow_sk2``, ``narrow_sk4``: where the pick is e4m3's small-n kernel (N <= 128, ``narrow.fp8_small_n_kernel``), that
  kernel with its tiles' last round split 2 and 4 ways (the cost model does not rank narrow kernels' stream-K forms).

    PYTHONPATH=$PWD python3 tools/exp_single_wave_streamk.py --out $OUT/single-wave --budget-s 240   # the GPU run
    ... --seed 20261208 --no-named                            # a second draw (validation: none of run 1's shapes)
    PYTHONPATH=$PWD python3 tools/exp_single_wave_streamk.py --dry-run [--no-compile] [--device h200] # the plan (CPU)

Writes into --out: ``single_wave.jsonl`` (exp_tiny_split's row format), ``env.json`` and ``summary.txt`` (per shape and
type: each kernel's ratio, on over off; geomeans). Exit 0 when every shape ran and every output checked, 1 otherwise,
2 bad usage, 3 without a GPU (or torch).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import time
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))

from exp_tiny_split import (
    EXIT_FAIL,
    EXIT_NO_GPU,
    Kern,
    Out,
    _geomean,
    _short,
    dispatch,
    finish,
    run_args,
    run_shape,
)

ARCH = "sm_90a"
DTYPES = ("bf16", "e4m3")
SEED, DRAWS = 20261207, 24
NAMED = [(838, 1309, 8000), (1311, 1069, 4584), (1024, 1024, 16384), (2048, 512, 12288), (1500, 2048, 8192),
         (6000, 96, 12288), (7000, 128, 8192), (5000, 128, 16384), (3000, 64, 16384)]
NARROW_SPLITS = (2, 4)


def drawn(seed: int = SEED) -> list[tuple[int, int, int]]:
    """DRAWS shapes of fewer tiles than SMs for most kernels: M, N log-uniform in 128..3072, K log-uniform in
    1024..16384 (a multiple of 64), seeded (heldout_shapes' log-uniform draw)."""
    from heldout_shapes import _log_uniform

    rng = random.Random(seed)
    return [(_log_uniform(rng, 128, 3072), _log_uniform(rng, 128, 3072), _log_uniform(rng, 1024, 16384) // 64 * 64)
            for _ in range(DRAWS)]


def held_out() -> set[tuple[int, int, int]]:
    from heldout_shapes import heldout30, heldout30_e4m3, heldout_shapes

    return set(heldout_shapes()) | set(heldout30()) | set(heldout30_e4m3())


def shapes(dtype: str, seed: int = SEED, named: bool = True) -> list[tuple[int, int, int]]:
    out = drawn(seed) + (NAMED if named else [])
    if dtype == "e4m3":  # torch._scaled_mm: N and K multiples of 16
        out = [(m, -(-n // 16) * 16, -(-k // 16) * 16) for m, n, k in out]
    return out


def _pick(dtype: str, m: int, n: int, k: int, device, rule_on: bool):
    from ptxgen.runtime.choose import Problem, choose, costmodel, rules

    saved = rules.STREAM_K_SINGLE_WAVE, costmodel.STREAMK_FIXUP_US
    if not rule_on:
        rules.STREAM_K_SINGLE_WAVE, costmodel.STREAMK_FIXUP_US = False, 0.0
    try:
        return choose(Problem(dtype, ARCH, m, n, k), device)
    finally:
        rules.STREAM_K_SINGLE_WAVE, costmodel.STREAMK_FIXUP_US = saved


def kernels(dtype: str, m: int, n: int, k: int, device) -> list[Kern]:
    """on and off where they differ; the narrow e4m3 kernel's stream-K forms where it is the pick."""
    on, off = _pick(dtype, m, n, k, device, True), _pick(dtype, m, n, k, device, False)
    out = [Kern("on", on.spec, on.swap_ab, on.chosen_by, on.why)]
    if off.spec != on.spec or off.swap_ab != on.swap_ab:
        out.append(Kern("off", off.spec, off.swap_ab, off.chosen_by, off.why))
    if dtype == "e4m3" and on.chosen_by.startswith("small-n") and on.spec.schedule.value == "persistent" and on.spec.bm <= 128:
        out += [Kern(f"narrow_sk{s}", dataclasses.replace(on.spec, stream_k=s)) for s in NARROW_SPLITS]
    return out


def plan(device, seed: int = SEED, named: bool = True, given: list | None = None) -> list[tuple[tuple[int, int, int], list[Kern]]]:
    """The (shape, kernels) pairs to time: the draw and the named shapes (held-out shapes left out), or ``given``
    [(dtype, m, n, k)] as they are (e.g. held-out shapes whose pick changed: measured, never fitted)."""
    if given is not None:
        todo = given
    else:
        seen = held_out()
        todo = [(d, m, n, k) for d in DTYPES for m, n, k in shapes(d, seed, named) if (m, n, k) not in seen]
    return [((m, n, k), ks) for d, m, n, k in todo for ks in [kernels(d, m, n, k, device)] if len(ks) > 1]


def parse_given(text: str | None) -> list | None:
    """``bf16:MxNxK,e4m3:MxNxK,...`` -> [(dtype, m, n, k)], or None; a malformed item is a usage error (exit 2)."""
    if not text:
        return None
    out = []
    for item in text.split(","):
        d, _, dims = item.partition(":")
        parts = dims.split("x")
        if d not in DTYPES or len(parts) != 3 or not all(x.isdigit() and int(x) > 0 for x in parts):
            raise argparse.ArgumentTypeError(f"{item!r}: expected DTYPE:MxNxK with DTYPE one of {', '.join(DTYPES)} "
                                             "and M, N, K positive integers")
        out.append((d, *map(int, parts)))
    return out


def distinct_specs(tasks) -> list:
    return list({kern.spec.kernel_name: kern.spec for _, ks in tasks for kern in ks}.values())


def dry_run(args) -> int:
    from exp_candidates import compile_specs, device_for

    tasks = plan(device_for(args.device), args.seed, not args.no_named, args.shapes)
    for (m, n, k), ks in tasks:
        print(f"{ks[0].spec.dtype.value} {m}x{n}x{k}: " + "; ".join(
            f"{kern.label} {_short(kern.spec.kernel_name)}" + (f" [{kern.chosen_by}]" if kern.chosen_by else "") for kern in ks))
    specs = distinct_specs(tasks)
    print(f"{len(tasks)} shape-type pairs timed, {len(specs)} distinct kernels")
    if args.no_compile:
        return 0
    failed = compile_specs(specs, args.jobs)
    return EXIT_FAIL if failed else 0


def summary_text(rows: list[dict]) -> str:
    lines = ["ratio = cuBLAS time / kernel time (medians of rounds), us = our median; on/off = time off / time on"]
    by: dict = {}
    for r in rows:
        by.setdefault((r.get("dtype"), r["shape"]), {})[r["label"]] = r
    gains = {d: [] for d in DTYPES}
    ons = {d: [] for d in DTYPES}
    for (dtype, shape), mine in by.items():
        ok = {lab: r for lab, r in mine.items() if r.get("ratio") and r.get("checked_ok")}
        parts = [f"{lab} {r['ratio']:.3f} {r['ms'] * 1e3:.1f}us" for lab, r in ok.items()]
        bad = [f"{lab} FAILED {r.get('error') or r.get('rel_error')}" for lab, r in mine.items()
               if lab != "control" and lab not in ok]
        tail = ""
        if "on" in ok and "off" in ok:
            gains[dtype].append(ok["off"]["ms"] / ok["on"]["ms"])
            ons[dtype].append((ok["on"]["ratio"], ok["off"]["ratio"]))
            tail = f"  on/off {gains[dtype][-1]:.3f}  [{ok['on']['chosen_by']}]"
        lines.append(f"{dtype} {shape:18} " + ", ".join(parts + bad) + tail)
    for dtype in DTYPES:
        if gains[dtype]:
            lines.append(f"{dtype}: {len(gains[dtype])} shapes whose pick changed: geomean on/off {_geomean(gains[dtype]):.3f}, "
                         f"on {_geomean([a for a, _ in ons[dtype]]):.3f}, off {_geomean([b for _, b in ons[dtype]]):.3f} of "
                         f"cuBLAS; on slower than off at {sum(g < 1 for g in gains[dtype])}")
    return "\n".join(lines) + "\n"


def gpu_run(args) -> int:
    from exp_candidates import compile_specs
    from exp_candidates_run import _smi, gpu_and_torch

    t_start = time.monotonic()
    got = gpu_and_torch("exp_single_wave_streamk")
    if got is None:
        return EXIT_NO_GPU
    dev, torch = got
    from ptxgen.runtime.choose.calibrate import device_key

    out = Out(Path(args.out), "single_wave.jsonl")
    tasks = plan(device_key(), args.seed, not args.no_named, args.shapes)
    specs = distinct_specs(tasks)
    out.say(f"{len(tasks)} shape-type pairs, {len(specs)} kernels; compiling in {args.jobs} processes")
    failed = compile_specs(specs, args.jobs, log=out.say)
    (out.folder / "env.json").write_text(json.dumps({"device": device_key().to_json(), "torch": torch.__version__,
                                                     "smi_before": _smi(), "compile_failed": failed, "seed": args.seed,
                                                     "budget_s": args.budget_s}, indent=1) + "\n")
    complete = not failed
    for shape, ks in tasks:
        if time.monotonic() > t_start + args.budget_s:
            out.say(f"skipped {shape} (budget)")
            complete = False
            continue
        if not run_shape(torch, shape, ks, dev, out):
            complete = False
            break
        torch.cuda.empty_cache()
    return finish(out, summary_text, "exp_single_wave_streamk", complete)


def main(argv=None) -> int:
    ap = run_args(__doc__, 240.0)
    ap.add_argument("--seed", type=int, default=SEED, help=f"the draw's seed (default {SEED}, run 1's)")
    ap.add_argument("--no-named", action="store_true", help="the drawn shapes only")
    ap.add_argument("--shapes", metavar="DTYPE:MxNxK,...", type=parse_given, help="these (type, shape) pairs instead of the draw")
    return dispatch(ap, argv, dry_run, gpu_run)


if __name__ == "__main__":
    sys.exit(main())
