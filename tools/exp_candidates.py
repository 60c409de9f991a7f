"""The chooser's pick against the kernels it could have picked, on the shapes where ptxgen trails cuBLAS (issue 35).

For each task (a shape and an input type) one process times, against cuBLAS (torch.matmul; e4m3: torch._scaled_mm)
on the same inputs, in rounds of a fresh random order (tools/bench_epilogue.py's ``rotate``), medians, every output
checked against an f32 reference (``runtime.check.bench``'s ``Operands``/``_Case``):

* ``pick``: the chooser's kernel on this GPU (its calibration and SM count), and ``pick_twin``, the same launch again;
  ``cublas_twin``, the baseline again (the two controls: the method's noise on each side);
* every kernel family of the cost table (``choose.candidates.CANDIDATES``, the narrow tiles left out), whole;
* stream-K forms: each family's own best split as the cost model predicts it, and a sweep of splits on 128 x 256 and
  its 2x1-cluster form (only splits the kernel would take differently: ``costmodel.streamk_cap``);
* kernels the spec language has and the cost table does not rank: 1x2 clusters, ping-pong in a cluster, raster
  groups 4 and 16, 3 stages, the epilogue order, direct stores, a 2x1 cluster on the tile schedule;
* few waves (M <= 512 or at most two rounds of 128 x 256 tiles): split-K 2 / 3, the swapped 128 x BN' kernels and,
  where their tiles leave a partial last round, their stream-K forms (persistent, split 2, 3, 4 ways: swap128xBN'+skS);

and, for three shapes, the fused chain at the pick (as the fused door runs it: no swap, K whole): the plain kernel,
bias + relu, bias + gelu_tanh, the same on the 128 x 128 ping-pong kernel, against the pick itself.

Each row carries the cost model's prediction for the kernel (``predicted_us``; null where the model has no term for it),
so the measurement shows whether the calibrated model mis-ranks the kernels or the candidate set lacks the winner.

    python tools/exp_candidates.py plan [--device h100]       # tasks, kernels, kernels to compile, time estimate (CPU)
    python tools/exp_candidates.py predict [--device h100]    # the model's prediction for every kernel (CPU)
    python tools/exp_candidates.py compile --jobs 8           # every kernel into the kernel cache (CPU)
    python tools/exp_candidates.py summarize DIR              # the tables of a run's summary.txt again (CPU)
    python tools/exp_candidates_run.py --out DIR              # the GPU run (DIR/{env.json,candidates.jsonl,fused.jsonl,
                                                              #   progress.log,summary.txt})

The held-out 30 (tools/heldout30.json) are for measuring only: none of them is a task here.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ARCH = "sm_90a"
ROUNDS, BATCH_MS = 15, 3.0  # candidates: rounds, and ms per timed batch
FUSED_ROUNDS, FUSED_BATCH_MS = 20, 25.0  # the fused chain: tools/bench_epilogue.py's batch
LARGE_SEED = 3502


def large_random(seed: int = LARGE_SEED, count: int = 6) -> list[tuple[int, int, int]]:
    """Large random shapes: M uniform in 2000..16000, N and K too, rounded down to a multiple of 8 (rows 16-byte aligned
    for TMA, N for cuBLAS's fast path); K % 16 == 8 puts bf16 rows 16 B past a sector. Seeded; none is held out."""
    rng = random.Random(seed)
    return [(rng.randint(2000, 16000), rng.randint(2000, 16000) // 8 * 8, rng.randint(2000, 16000) // 8 * 8)
            for _ in range(count)]


# (class, dtype, shapes), in the order they run: the weak classes first, the controls last
CLASSES = (
    ("issue9", "bf16", [(3000, 5000, 7000)]),
    ("few-wave", "bf16", [(400, 10000, 6000), (333, 8192, 8192), (2500, 10000, 4000), (1500, 9000, 3000)]),
    # few rows against wide N where the swapped pair ran 0.83-0.88 of cuBLAS on the H100
    # (runs/2026-12-06-h100-pairs-sanitizer-training run 1, swapclu2.py)
    ("few-row", "bf16", [(260, 8192, 6000), (300, 12288, 6000), (384, 12288, 6000)]),
    ("off-sector", "bf16", [(3000, 7000, 5000), (5000, 5000, 5000), (4096, 4096, 5000)]),
    ("large-random", "bf16", large_random()),
    ("e4m3", "e4m3", [(5120, 5120, 5120), (3008, 7008, 5008), (2512, 10000, 4000), (1504, 9008, 3024), (6669, 7776, 7008),
                      (11520, 14944, 3328)]),
    # e4m3 few waves at N 640-1024: the 128 x 128 tile ran 0.76-0.90 of _scaled_mm with its last round split or whole
    # (runs/2026-12-07-h100-single-wave-streamk); the wide ping-pong tiles (128 x 160 / 192, one warpgroup a tile) are new
    ("e4m3-few-wave", "e4m3", [(6000, 768, 4096), (4000, 896, 6144), (7000, 640, 3072), (5000, 1024, 4096)]),
    ("control", "bf16", [(4096, 4096, 4096), (8192, 8192, 8192), (12000, 1000, 6000)]),
    ("control", "e4m3", [(8192, 8192, 8192)]),
)
FUSED_SHAPES = [(2048, 11008, 4096), (3000, 5000, 7000), (8192, 8192, 8192)]
CHAINS = {"relu": "bias=col:bf16,act=relu", "gelu": "bias=col:bf16,act=gelu_tanh"}


def tasks() -> list[dict]:
    """Every task in run order: the weak GEMM classes, the fused chain, then e4m3 and the controls."""
    gemm = [{"kind": "gemm", "class": c, "dtype": d, "m": m, "n": n, "k": k} for c, d, shapes in CLASSES for m, n, k in shapes]
    fused = [{"kind": "fused", "class": "fused", "dtype": "bf16", "m": m, "n": n, "k": k} for m, n, k in FUSED_SHAPES]
    weak = [t for t in gemm if t["class"] not in ("e4m3", "control")]
    return weak + fused + [t for t in gemm if t["class"] in ("e4m3", "control")]


def task_id(t: dict) -> str:
    return f"{t['kind']}:{t['dtype']}:{t['m']}x{t['n']}x{t['k']}"


# -- the kernels of a task ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cand:
    label: str
    spec: object  # TileSpec
    source: str  # pick | table | stream-k | extra | few-wave | fused
    swap_ab: bool = False
    family: str | None = None  # the cost table's kernel the model ranks it as (None: no term for it)
    splits: int = 1  # stream-K: the most splits the spec allows
    swap_bn: int = 0  # a swapped 128 x BN' kernel
    chain: str | None = None  # the fused chain (fused tasks)


def device_for(name: str | None):
    """The chooser's device key: the GPU present (None), or a shipped calibration's device ("h100", "h200")."""
    from ptxgen.runtime.choose.calibration import shipped

    if name is None:
        from ptxgen.runtime.choose.calibrate import device_key

        return device_key()
    slug = {"h100": "h100-80gb-hbm3", "h200": "h200"}[name]
    return shipped()[slug].device


def _variant(spec, **changes):
    from ptxgen.derive.tile.spec import make_spec

    return make_spec(**{**spec.to_json(), **changes})


EXTRAS = (  # (label, cost-table family, changes): kernels the cost table does not rank
    ("p128x256/c1x2", "p128x256", {"cluster": "1x2"}), ("p128x192/c1x2", "p128x192", {"cluster": "1x2"}),
    ("pp128x128/c2x1", "pp128x128", {"cluster": "2x1"}), ("pp128x128/c1x2", "pp128x128", {"cluster": "1x2"}),
    ("pp64x256/c2x1", "pp64x256", {"cluster": "2x1"}), ("t128x256/c2x1", "t128x256", {"cluster": "2x1"}),
    ("p128x256/g4", "p128x256", {"raster_group": 4}), ("p128x256/g16", "p128x256", {"raster_group": 16}),
    ("p128x256c2/g16", "p128x256c2", {"raster_group": 16}), ("p128x256/s3", "p128x256", {"stages": 3}),
    ("pp128x128/s6", "pp128x128", {"stages": 6}), ("p128x256/eo-alt", "p128x256", {"epilogue_order": "alternate"}),
    ("p128x256/direct", "p128x256", {"epilogue": "direct"}),
    # ping-pong past 128 columns (two consumer warpgroups with setmaxnreg's 232 registers: one tile each)
    ("pp128x160", "pp128x128", {"bn": 160, "stages": 4, "epilogue": "direct"}),
    ("pp128x192", "pp128x128", {"bn": 192, "stages": 4}),
    ("pp128x192/direct", "pp128x128", {"bn": 192, "stages": 4, "epilogue": "direct"}),
)
SK_SWEEP = ("p128x256", "p128x256c2")  # the families whose stream-K splits are swept
SK_SPLITS = (2, 3, 4, 6, 8, 12, 16)


def cost_model(device):
    from ptxgen.runtime.choose.calibration import calibration_for
    from ptxgen.runtime.choose.costmodel import CostModel

    return CostModel(calibration_for(device), device.sm_count)


def _off_sector(dtype: str, k: int) -> bool:
    return (k * (1 if dtype == "e4m3" else 2)) % 32 != 0


def row_phase(dtype: str, k: int) -> str:
    """Where the operands' rows start: "line" (on a 128-byte line), "mid-line N" (N = 32, 64, 96 B past one: on a
    sector, a phase the 16-bit calibration has no term for) or "off-sector" (16 B past a 32-byte sector)."""
    b = k * (1 if dtype == "e4m3" else 2)
    return "line" if b % 128 == 0 else "off-sector" if b % 32 else f"mid-line {b % 128}"


def _streamk_forms(dtype, m, n, k, model) -> list[Cand]:
    from ptxgen.runtime.choose.candidates import BY_NAME, k_tiles
    from ptxgen.runtime.choose.costmodel import streamk_cap, tile_grid

    costs = model.costs(dtype, ARCH) or {}
    eb, off, out = (1 if dtype == "e4m3" else 2), _off_sector(dtype, k), []
    for name, cost in costs.items():
        c = BY_NAME[name]
        best = model.streamk(c, cost, m, n, k, off_sector=off, element_bytes=eb)
        splits = {best.splits} if best is not None and best.splits > 1 else set()
        items = tile_grid(m, n, c.bm, c.bn, c.cluster_m) // c.cluster_m
        clusters = model.sm_count // c.cluster_m  # a stream-K grid fills every SM (KernelABI.fills_sms)
        if name in SK_SWEEP and best is not None:  # distinct effective splits only
            seen = {streamk_cap(items, clusters, k_tiles(k, eb), s)[0] for s in splits}
            for s in SK_SPLITS:
                eff = streamk_cap(items, clusters, k_tiles(k, eb), s)[0]
                if eff > 1 and eff not in seen:
                    seen.add(eff)
                    splits.add(s)
        for s in sorted(splits):
            out.append(Cand(f"{name}+sk{s}", _variant(c.spec(dtype, ARCH), stream_k=s), "stream-k", family=name, splits=s))
    return out


def _few_wave(dtype, m, n, k, model) -> list[Cand]:
    from ptxgen.runtime.choose.candidates import BY_NAME
    from ptxgen.runtime.choose.costmodel import swap_tiles, tile_grid
    from ptxgen.runtime.choose.rules import SWAP_FIT_STAGES
    from ptxgen.runtime.choose.swap import _swapped, paired
    from ptxgen.runtime.choose.tune import default_spec

    if m > 512 and tile_grid(m, n, 128, 256) > 2 * model.sm_count:
        return []
    out = []
    for base, s in (("t128x256", 2), ("t128x256", 3), ("t128x192", 2)):
        spec = _variant(BY_NAME[base].spec(dtype, ARCH), epilogue="direct", split_k=s)
        out.append(Cand(f"{base}/split{s}", spec, "few-wave"))
    if dtype != "e4m3" and m <= 512:
        for bn, _ in swap_tiles(m):
            spec = _swapped(default_spec(dtype, ARCH), 128, bn, SWAP_FIT_STAGES)
            if spec is not None:
                out.append(Cand(f"swap128x{bn}", spec, "few-wave", swap_ab=True, swap_bn=bn))
                out += _swap_streamk_forms(spec, bn, m, n, k, model.sm_count)
                pair = paired(spec, -(-m // bn))  # the two tiles over M as one 1x2 cluster, where there are two
                if pair != spec:
                    out.append(Cand(f"swap128x{bn}c1x2", pair, "few-wave", swap_ab=True, swap_bn=bn))
                    out += _swap_streamk_forms(pair, bn, m, n, k, model.sm_count, "c1x2")
    return out


SWAP_SK_SPLITS = (2, 3, 4)  # the stream-K forms of a swapped kernel whose tiles leave a partial last round


def _swap_streamk_forms(spec, bn: int, m: int, n: int, k: int, sm_count: int, tag: str = "") -> list[Cand]:
    """The swapped kernel (128 x BN' tiles over N x M) persistent with its last round split along K (swap128xBN'+skS), for
    each distinct split the kernel takes (derive.store.streamk: none where the N' x M' tiles fill whole rounds); the
    stages drop where the persistent TMA store's second staging buffer does not fit."""
    from ptxgen.runtime.choose.candidates import k_tiles
    from ptxgen.runtime.choose.costmodel import streamk_cap
    from ptxgen.runtime.choose.swap import streamk_form

    items = -(-n // 128) * -(-m // bn)
    clusters = sm_count  # a stream-K grid fills every SM (KernelABI.fills_sms)
    seen, out = set(), []
    for s in SWAP_SK_SPLITS:
        eff = streamk_cap(items, clusters, k_tiles(k, spec.dtype.bytes), s)[0]
        if eff < 2 or eff in seen:
            continue
        seen.add(eff)
        sk = streamk_form(spec, s)
        if sk is not None:
            out.append(Cand(f"swap128x{bn}{tag}+sk{s}", sk, "few-wave", swap_ab=True, splits=s, swap_bn=bn))
    return out


def gemm_candidates(dtype: str, m: int, n: int, k: int, device) -> tuple[list[Cand], object, list[dict]]:
    """(the kernels of a GEMM task, pick first; the chooser's Choice; the kernels the spec rules refused, with why)."""
    from ptxgen.isa.types import SpecError
    from ptxgen.runtime.choose import Problem, choose
    from ptxgen.runtime.choose.candidates import BY_NAME, CANDIDATES

    choice = choose(Problem(dtype, ARCH, m, n, k), device)
    model, refused = cost_model(device), []
    out = [Cand("pick", choice.spec, "pick", choice.swap_ab)]
    out += [Cand(c.name, c.spec(dtype, ARCH), "table", family=c.name) for c in CANDIDATES if not c.narrow]
    out += _streamk_forms(dtype, m, n, k, model)
    for label, base, changes in EXTRAS:
        try:
            out.append(Cand(label, _variant(BY_NAME[base].spec(dtype, ARCH), **changes), "extra"))
        except SpecError as e:
            refused.append({"label": label, "error": f"SpecError: {str(e)[:200]}"})
    try:
        out += _few_wave(dtype, m, n, k, model)
    except SpecError as e:
        refused.append({"label": "few-wave", "error": f"SpecError: {str(e)[:200]}"})
    pick_family = next((c for c in out[1:] if c.spec == choice.spec and c.swap_ab == choice.swap_ab), None)
    if pick_family is not None:
        out[0] = dataclasses.replace(out[0], family=pick_family.family, splits=pick_family.splits, swap_bn=pick_family.swap_bn)
    seen, uniq = set(), []
    for c in out:  # each kernel once (the pick's twin is timed as pick_twin)
        key = (c.spec.kernel_name, c.swap_ab)
        if key not in seen:
            seen.add(key)
            uniq.append(c)
    return uniq, choice, refused


def fused_candidates(m: int, n: int, k: int, device) -> tuple[list[Cand], object]:
    """The fused door's kernels (no swap, K whole) at the pick, and on the 128 x 128 ping-pong kernel."""
    from ptxgen.api.fused import fused_spec
    from ptxgen.derive.store.chainspec import parse_chain
    from ptxgen.runtime.choose import Problem, choose
    from ptxgen.runtime.choose.candidates import BY_NAME

    choice = choose(Problem("bf16", ARCH, m, n, k, allow_swap=False), device)
    out = [Cand("pick", choice.spec, "pick"), Cand("plain", _variant(choice.spec, stream_k=1, split_k=1), "fused")]
    pp = BY_NAME["pp128x128"].spec("bf16", ARCH)
    out.append(Cand("pp/plain", pp, "fused"))
    for base_label, spec in (("", choice.spec), ("pp/", pp)):
        for name, token in CHAINS.items():
            out.append(Cand(base_label + name, fused_spec(spec, parse_chain(token), "bf16"), "fused", chain=name))
    return out, choice


def predicted_us(c: Cand, dtype: str, m: int, n: int, k: int, model) -> float | None:
    """The cost model's time for the kernel (its family's constants, the stream-K or swap form where it is one)."""
    from ptxgen.runtime.choose.candidates import BY_NAME
    from ptxgen.runtime.choose.costmodel import (SWAP_FAMILY_BN, predict_streamk, predict_swap, predict_swap_streamk,
                                                 time_terms_us)

    eb, off = (1 if dtype == "e4m3" else 2), _off_sector(dtype, k)
    if c.swap_bn and c.splits > 1:  # the swapped family's constants with the stream-K terms (rows on a sector only)
        sw = model.swap_costs(dtype, ARCH)
        return None if sw is None or off else predict_swap_streamk(sw, SWAP_FAMILY_BN, m, n, k, c.swap_bn, c.splits,
                                                                   sm_count=model.sm_count, element_bytes=eb).predicted_us
    if c.swap_bn:
        sw = model.swap_costs(dtype, ARCH)
        return None if sw is None else predict_swap(sw, SWAP_FAMILY_BN, m, n, k, c.swap_bn, off_sector=off,
                                                    sm_count=model.sm_count, element_bytes=eb).predicted_us
    costs = model.costs(dtype, ARCH) or {}
    if c.family not in costs:
        return None
    cand, cost = BY_NAME[c.family], costs[c.family]
    whole = model.predict(cand, cost, m, n, k, off_sector=off, element_bytes=eb)  # the bandwidth floor included
    if c.splits > 1:  # as costmodel.rank takes a stream-K form: its split round, not below the floor
        sk = predict_streamk(cand, cost, m, n, k, c.splits, off_sector=off, sm_count=model.sm_count, element_bytes=eb)
        floor = time_terms_us(cand, cost, m, n, k, off_sector=off, sm_count=model.sm_count, element_bytes=eb)[1]
        return max(sk.predicted_us, floor)
    return whole


def task_kernels(t: dict, device) -> tuple[list[Cand], object, list[dict]]:
    if t["kind"] == "fused":
        cands, choice = fused_candidates(t["m"], t["n"], t["k"], device)
        return cands, choice, []
    return gemm_candidates(t["dtype"], t["m"], t["n"], t["k"], device)


# -- CPU commands -------------------------------------------------------------------------------------------------------


def cmd_plan(args) -> int:
    device, total, kernels = device_for(args.device), 0.0, {}
    for t in tasks():
        cands, choice, refused = task_kernels(t, device)
        kernels.update({c.spec.kernel_name: c.spec for c in cands})
        rate = (1.2e15 if t["dtype"] == "e4m3" else 0.6e15) / 1e3  # FLOP per ms, roughly
        call_ms = 2.0 * t["m"] * t["n"] * t["k"] / rate
        entries = len(cands) + 2
        rounds, batch = (FUSED_ROUNDS, FUSED_BATCH_MS) if t["kind"] == "fused" else (ROUNDS, BATCH_MS)
        est = entries * (rounds + 2) * max(batch, call_ms) / 1e3 + 0.05 * len(cands) + 1.0
        total += est
        print(f"{task_id(t):32} {t['class']:13} {len(cands):3} kernels, ~{est:4.1f} s; pick {choice.chosen_by}: "
              f"{_short(choice.spec.kernel_name)}" + (f"; refused: {', '.join(r['label'] for r in refused)}" if refused else ""))
    print(f"{len(tasks())} tasks, {len(kernels)} distinct kernels to compile, ~{total:.0f} s of timing (plus start-up and "
          "compiles)")
    return 0


def _short(name: str) -> str:
    return name.replace("ptxgen_sm90a_", "").replace("_a_k_sw128_ok_b_k_sw128_ok", "")


def prediction_rows(device) -> list[dict]:
    model, rows = cost_model(device), []
    for t in tasks():
        if t["kind"] != "gemm":
            continue
        cands, choice, _ = task_kernels(t, device)
        preds = [(c, predicted_us(c, t["dtype"], t["m"], t["n"], t["k"], model)) for c in cands]
        ranked = sorted((p, c.label) for c, p in preds if p is not None)
        rank = {label: i + 1 for i, (_, label) in enumerate(ranked)}
        for c, p in preds:
            rows.append({"task": task_id(t), "class": t["class"], "rows": row_phase(t["dtype"], t["k"]), "label": c.label, "source": c.source,
                         "kernel": c.spec.kernel_name, "predicted_us": None if p is None else round(p, 1),
                         "model_rank": rank.get(c.label), "chosen_by": choice.chosen_by if c.label == "pick" else None})
    return rows


def cmd_predict(args) -> int:
    rows = prediction_rows(device_for(args.device))
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return 0
    for task in dict.fromkeys(r["task"] for r in rows):
        mine = sorted((r for r in rows if r["task"] == task), key=lambda r: (r["model_rank"] or 1e9, r["label"]))
        pick = next(r for r in mine if r["label"] == "pick")
        print(f"{task} ({mine[0]['class']}, rows {mine[0]['rows']}): pick {pick['chosen_by']} {_short(pick['kernel'])}, "
              f"predicted {pick['predicted_us']} us")
        print("   " + ", ".join(f"{r['label']} {r['predicted_us']}" for r in mine if r["predicted_us"] is not None))
    return 0


def all_specs(device) -> list:
    return list({c.spec.kernel_name: c.spec for t in tasks() for c in task_kernels(t, device)[0]}.values())


def compile_specs(specs: list, jobs: int, log=print) -> list[str]:
    """Compile into the kernel cache in ``jobs`` worker processes (spawned: no CUDA context inherited); the failures."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    failed = []
    with ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=multiprocessing.get_context("spawn")) as ex:
        for spec, err in zip(specs, ex.map(_compile_one, [s.to_json() for s in specs])):
            if err:
                failed.append(f"{spec.kernel_name}: {err}")
    log(f"compiled {len(specs) - len(failed)} of {len(specs)} kernels" + (f"; failed: {failed}" if failed else ""))
    return failed


def _compile_one(spec_json: dict) -> str:
    try:
        from ptxgen.runtime.choose.calibrate import _compile_one as compile_into_cache

        compile_into_cache(spec_json)
        return ""
    except Exception as e:  # noqa: BLE001 - reported, and the kernel's rows say so when it fails to load
        return f"{type(e).__name__}: {str(e)[:300]}"


def cmd_compile(args) -> int:
    t0 = time.monotonic()
    failed = compile_specs(all_specs(device_for(args.device)), args.jobs)
    print(f"{time.monotonic() - t0:.1f} s")
    return 1 if failed else 0


# -- reading a run ---------------------------------------------------------------------------------------------------------


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


SAME = 0.02  # a kernel within this fraction of the pick's ratio is no better than the pick


def verdict(rows: list[dict]) -> dict:
    """One GEMM task's rows -> what they say: the pick, the best kernel, the model's own first, and whether a better
    kernel than the pick is one the model ranks (it mis-ranks) or one it has no term for (the candidate set lacks it)."""
    ok = [r for r in rows if r.get("ratio") and r.get("checked_ok") and r["label"] != "control"]
    pick = next((r for r in ok if r["label"] == "pick"), None)
    if not ok or pick is None:
        return {"task": rows[0]["task"], "verdict": "no pick measured"}
    best = max(ok, key=lambda r: r["ratio"])
    modeled = [r for r in ok if r.get("predicted_us") is not None]
    first = min(modeled, key=lambda r: r["predicted_us"]) if modeled else None
    best_modeled = max(modeled, key=lambda r: r["ratio"]) if modeled else None
    unmodeled = [r for r in ok if r.get("predicted_us") is None and r["label"] != "pick"]
    best_unmodeled = max(unmodeled, key=lambda r: r["ratio"]) if unmodeled else None
    if best["ratio"] <= pick["ratio"] * (1 + SAME):
        why = "the pick is within 2% of the best kernel measured"
    elif best.get("predicted_us") is not None:
        why = "mis-rank: a kernel the model ranks beats the pick"
    else:
        why = "missing: the best kernel is one the cost model has no term for"
    rank = sorted(r["predicted_us"] for r in modeled)
    return {"task": pick["task"], "class": pick["class"], "pick": pick["ratio"], "pick_kernel": pick["kernel"],
            "pick_us": pick.get("ms", 0) * 1e3, "pick_predicted_us": pick.get("predicted_us"), "rows": pick.get("rows"),
            "best": best["ratio"], "best_label": best["label"], "best_rank": (rank.index(best["predicted_us"]) + 1
                                                                             if best.get("predicted_us") is not None else None),
            "model_first": first and first["label"], "model_first_ratio": first and first["ratio"],
            "best_modeled": best_modeled and best_modeled["label"], "best_modeled_ratio": best_modeled and best_modeled["ratio"],
            "best_unmodeled": best_unmodeled and best_unmodeled["label"],
            "best_unmodeled_ratio": best_unmodeled and best_unmodeled["ratio"], "verdict": why,
            "failed": sorted(r["label"] for r in rows if r.get("error") or (r.get("ratio") and not r.get("checked_ok")))}


def summary_text(folder: Path) -> str:
    rows, fused = read_rows(folder / "candidates.jsonl"), read_rows(folder / "fused.jsonl")
    lines, by_task = [], {}
    for r in rows:
        by_task.setdefault(r["task"], []).append(r)
    verdicts = [verdict(v) for v in by_task.values()]
    lines.append("GEMM tasks: ratio = cuBLAS time / kernel time (median of rounds); best = the best checked kernel measured")
    for v in verdicts:
        if "pick" not in v:
            lines.append(f"{v['task']}: {v['verdict']}")
            continue
        ctl = next((r for r in by_task[v["task"]] if r["label"] == "control"), {})
        pred = f"{v['pick_us']:.1f} us, predicted " + (f"{v['pick_predicted_us']}" if v.get("pick_predicted_us") else "none")
        lines.append(f"{v['task']:32} {v['class']:12} {v.get('rows') or '':11} pick {v['pick']:.3f} ({pred})  best {v['best']:.3f} {v['best_label']} (model rank "
                     f"{v['best_rank']})  model's first {v['model_first']} {v['model_first_ratio'] or 0:.3f}  best unmodeled "
                     f"{v['best_unmodeled']} {v['best_unmodeled_ratio'] or 0:.3f}  [{v['verdict']}]  controls: cublas twin "
                     f"{ctl.get('cublas_twin_over_cublas', float('nan')):.3f}, pick twin {ctl.get('pick_twin_over_pick', float('nan')):.3f}"
                     + (f"  failed: {', '.join(v['failed'])}" if v["failed"] else ""))
    for cls in dict.fromkeys(v.get("class") for v in verdicts if "pick" in v):
        mine = [v for v in verdicts if v.get("class") == cls]
        lines.append(f"class {cls}: geomean pick {_geomean([v['pick'] for v in mine]):.3f}, best {_geomean([v['best'] for v in mine]):.3f}, "
                     f"lowest pick {min(v['pick'] for v in mine):.3f}, lowest best {min(v['best'] for v in mine):.3f}")
    if fused:
        lines.append("fused chain: time over the plain kernel at the same tile (1.000 = free; paired: the median of per-round "
                     "ratios); the bound: relu <= 1.01, gelu <= 1.03")
        for task in dict.fromkeys(r["task"] for r in fused):
            mine = {r["label"]: r for r in fused if r["task"] == task}
            parts = [f"{lab} {r['over_base']:.3f}/{r['over_base_paired']:.3f}" for lab, r in mine.items()
                     if r.get("over_base") is not None and lab not in ("plain", "pp/plain")]
            pick = mine.get("pick", {})
            lines.append(f"{task:32} pick/cuBLAS {pick.get('ratio', float('nan')):.3f}, plain/cuBLAS "
                         f"{mine.get('plain', {}).get('ratio', float('nan')):.3f}, pp/plain/cuBLAS "
                         f"{mine.get('pp/plain', {}).get('ratio', float('nan')):.3f}; " + ", ".join(parts)
                         + "".join(f"; {lab} FAILED {r.get('error') or r.get('rel_error')}" for lab, r in mine.items()
                                   if r.get("error") or not r.get("checked_ok", True)))
    return "\n".join(lines) + "\n"


def cmd_summarize(args) -> int:
    print(summary_text(Path(args.dir)), end="")
    return 0


def tile_bytes(row: dict) -> int:
    """The bytes a kernel's tiles bring into the SMs' shared memory: every output tile reads (BM + BN) rows of K
    (padded to the stage's BK) of 2-byte (bf16) or 1-byte (e4m3) elements, over the problem as the kernel sees it (N x M
    when swapped), partial tiles counted whole. A 2-CTA cluster's multicast halves what L2 reads, not what the SMs
    receive; stream-K splits a tile's K range without changing the sum."""
    s = row["spec"]
    m, n = (row["n"], row["m"]) if row.get("swap_ab") else (row["m"], row["n"])
    tiles = -(-m // s["bm"]) * -(-n // s["bn"])
    return tiles * (s["bm"] + s["bn"]) * -(-row["k"] // s["bk"]) * s["bk"] * (1 if s["dtype"] == "e4m3" else 2)


def feed_text(folder: Path, top: int = 6) -> str:
    """Per GEMM task: the fastest checked kernels' tile bytes and the rate they reached the SMs at (TB/s), and the
    bytes cuBLAS's time would allow at the best kernel's rate: a kernel form with fewer tile bytes than that (larger
    tiles along the dimension that is reused) is what beating cuBLAS there takes, if the rate is the limit."""
    rows = [r for r in read_rows(folder / "candidates.jsonl") if r.get("spec") and r.get("ms") and r.get("checked_ok")]
    lines = ["tile bytes into the SMs / kernel time (TB/s); budget: cuBLAS's time x the best rate"]
    for task in dict.fromkeys(r["task"] for r in rows):
        mine = sorted((r for r in rows if r["task"] == task), key=lambda r: r["ms"])[:top]
        rate = max(tile_bytes(r) / (r["ms"] * 1e-3) for r in mine)
        budget = rate * mine[0]["cublas_ms"] * 1e-3
        lines.append(f"{task}: cuBLAS {mine[0]['cublas_ms'] * 1e3:.1f} us -> budget {budget / 1e6:.0f} MB at {rate / 1e12:.2f} TB/s")
        for r in mine:
            s = r["spec"]
            lines.append(f"  {r['label']:18} {s['bm']}x{s['bn']}{' swapped' if r.get('swap_ab') else ''}"
                         f"{' c' + s['cluster'] if s.get('cluster') else ''}{' sk' + str(s['stream_k']) if s.get('stream_k') else ''}"
                         f"  {r['ms'] * 1e3:6.1f} us  {tile_bytes(r) / 1e6:5.0f} MB  {tile_bytes(r) / (r['ms'] * 1e-3) / 1e12:.2f} TB/s")
    return "\n".join(lines) + "\n"


def cmd_feed(args) -> int:
    print(feed_text(Path(args.dir)), end="")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("plan", "predict", "compile"):
        p = sub.add_parser(name)
        p.add_argument("--device", choices=("h100", "h200"), default="h100", help="the calibration and SMs to plan for")
        if name == "predict":
            p.add_argument("--json", action="store_true", help="one JSON line per kernel")
        if name == "compile":
            p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    s = sub.add_parser("summarize", help="the per-task tables of a run's folder (tools/exp_candidates_run.py --out DIR)")
    s.add_argument("dir")
    f = sub.add_parser("feed", help="per task: the fastest kernels' tile bytes and the rate they reached the SMs at")
    f.add_argument("dir")
    args = ap.parse_args(argv)
    return {"plan": cmd_plan, "predict": cmd_predict, "compile": cmd_compile, "summarize": cmd_summarize,
            "feed": cmd_feed}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
