"""``ptxgen selftest``: the ordered checks that climb the truth ladder on whatever GPU is present, and a report to
paste into an issue (format: docs/validation.md, "ptxgen selftest").

The ladder, in order (a later rung means little if an earlier one disagrees):

1. probes: what the MMA reads through the descriptors (wgmma: Hopper only) and where TMA writes, against the
   independent models (``ptxgen probe``);
2. GEMMs from simple to elaborate against float64 numpy (``ptxgen validate``): one tile per CTA, the cp.async
   loader, 8-bit inputs, persistent with the TMA-store epilogue, ping-pong, clusters / CTA pairs, odd shapes;
3. Blackwell only, the questions only hardware settles: commit arrivals at CTA exit (compute-sanitizer over a
   one-K-tile pair kernel with many CTAs), pair clusters contending for an SM's tensor memory (a grid of many
   clusters of a kernel whose CTAs that fit on an SM ask for more than its 512 columns, under a timeout that reports a
   hang), and NaN in the scale-factor padding (a block-scaled GEMM whose K is a multiple of neither BK nor the
   scale-factor atom's 4V, every padding byte of the SF buffers a NaN code: outputs finite and equal to the
   float64 reference; ptxgen.runtime.check.bsvalidate).

Each step is PASS, FAIL (a disagreement: exit 1), SKIP (needs another GPU, named) or NOT RUN (no runner, named).
Without a usable GPU the command exits 3 before any step.
"""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

from ...derive.tile.spec import make_spec
from ...isa.types import Arch

PASS, FAIL, SKIP, NOT_RUN = "PASS", "FAIL", "SKIP", "NOT RUN"
NEEDS_10X = "needs compute capability 10.x"


@dataclass
class StepResult:
    half: str  # "hopper" / "blackwell"
    level: str  # the ladder rung this step would establish: L3 (Hopper) or L4 (Blackwell)
    name: str
    status: str
    detail: str = ""
    seconds: float = 0.0


@dataclass
class Step:
    half: str
    level: str
    name: str
    run: Callable[[], tuple[str, str]] | None  # -> (status, detail); None: no runner exists (NOT RUN)
    why_not: str = ""


@dataclass
class Report:
    device: str
    compute_capability: str
    nvrtc: str
    ptxgen: str
    python: str
    steps: list[StepResult] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return sum(s.status == FAIL for s in self.steps)

    def text(self) -> str:
        lines = [f"ptxgen selftest {self.ptxgen}: {self.device}, compute capability {self.compute_capability}, "
                 f"NVRTC {self.nvrtc}, Python {self.python}"]
        for half in ("hopper", "blackwell"):
            steps = [s for s in self.steps if s.half == half]
            lines.append(f"{half} half ({'wgmma, sm_90a' if half == 'hopper' else 'tcgen05, sm_100a'}):")
            for s in steps:
                t = f" {s.seconds:5.1f}s" if s.status in (PASS, FAIL) else "       "
                lines.append(f"  {s.level} {s.status:<7}{t}  {s.name}" + (f": {s.detail}" if s.detail else ""))
        counts = {k: sum(s.status == k for s in self.steps) for k in (PASS, FAIL, SKIP, NOT_RUN)}
        lines.append("summary: " + ", ".join(f"{n} {k.lower()}" for k, n in counts.items())
                     + (" -> DISAGREEMENT (exit 1)" if self.failed else " -> every step that ran agrees (exit 0)"))
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {**{k: v for k, v in asdict(self).items() if k != "steps"}, "steps": [asdict(s) for s in self.steps],
                "failed": self.failed}


# ---- the steps -----------------------------------------------------------------------------------------------
def _wgmma_probe() -> tuple[str, str]:
    from .probe import run_probe

    s = run_probe(0, ("derived",))["summary"]["categories"]["derived"]
    status = PASS if s["model_disagrees"] == 0 and s["model_agrees"] > 0 else FAIL
    return status, f"{s['model_agrees']} of {s['cases']} derived descriptors read as the read model says ({s['model_disagrees']} disagree)"


def _tma_probe() -> tuple[str, str]:
    from .probe_tma import run_tma_probe

    s = run_tma_probe(0, alignment=False)["summary"]
    n = sum(c["cases"] for c in s["categories"].values())
    errors = sum(c["errors"] for c in s["categories"].values())
    ok = s["ok"] and errors == 0
    return (PASS if ok else FAIL), (f"{n} copies, every one where the TMA write model says: "
                                    f"{'yes' if s['every_case_matched_some_anchor'] else 'NO'}; swizzle anchor "
                                    f"{', '.join(s['anchors_explaining_every_aligned_case']) or 'none'}; errors {errors}")


def _gemm(kw: dict, m: int | None = None, n: int | None = None, k: int | None = None) -> Callable[[], tuple[str, str]]:
    def run() -> tuple[str, str]:
        from .validate import validate_spec

        r = validate_spec(make_spec(**kw), m, n, k, seed=0)
        p = r.problem
        return (PASS if r.passed else FAIL), (f"M={p.m} N={p.n} K={p.k} rel error {r.rel_error:.1e} (tolerance {r.tolerance:.0e}), "
                                              f"unwritten {r.unwritten}, non-finite {r.nonfinite}, stray writes {r.stray_writes}")
    return run


def _sanitized_exit(kw: dict, m: int, n: int, k: int) -> Callable[[], tuple[str, str]]:
    """compute-sanitizer (synccheck, then memcheck) over ``ptxgen validate``: many CTAs exiting right after one K-tile."""
    def run() -> tuple[str, str]:
        tool = shutil.which("compute-sanitizer")
        if tool is None:
            return SKIP, "compute-sanitizer not on PATH"
        spec = make_spec(**kw)
        cmd = [sys.executable, "-m", "ptxgen", "validate", *spec.cli_args().split(), "--m", str(m), "--n", str(n), "--k", str(k), "--seed", "0"]
        notes = []
        for sub in ("synccheck", "memcheck"):
            proc = subprocess.run([tool, "--tool", sub, "--error-exitcode", "1", *cmd], capture_output=True, text=True, timeout=300)
            summary = [ln for ln in proc.stdout.splitlines() if "ERROR SUMMARY" in ln]
            notes.append(f"{sub}: {summary[-1].split('ERROR SUMMARY:')[-1].strip() if summary else 'no summary'}")
            if proc.returncode != 0:
                return FAIL, "; ".join(notes) + f" (exit {proc.returncode}: {(proc.stdout + proc.stderr).strip()[-300:]})"
        return PASS, "; ".join(notes)
    return run


def contention_fit(spec, registers: int | None = None) -> tuple[int, int]:
    """(TMEM columns a CTA allocates, CTAs that fit on one SM) from the derived plan (shared memory asked for,
    threads; derive.roles.tmemfit) and, when known, the register count of the compiled kernel."""
    from ...derive.tile.kernel import plan_kernel
    from ...derive.roles.tmemfit import ctas_per_sm

    plan = plan_kernel(spec)
    return plan.tmem.columns, ctas_per_sm(plan.abi.dynamic_smem_bytes, plan.pipeline.threads, registers)


def run_with_timeout(cmd: list[str], timeout_s: float, what: str) -> tuple[str, str]:
    """``cmd`` in a child process: PASS on exit 0, FAIL otherwise; no exit within ``timeout_s`` is a hang, and a hang is
    a finding (FAIL), not a wait for ever."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return FAIL, f"HANG (a finding): {what} did not finish within {timeout_s:g} s; the child was killed"
    if proc.returncode != 0:
        return FAIL, f"exit {proc.returncode}: {(proc.stdout + proc.stderr).strip()[-300:]}"
    return PASS, (proc.stdout.strip().splitlines() or [""])[-1][-300:]


def _tmem_contention(kw: dict, m: int, n: int, k: int, timeout_s: float) -> Callable[[], tuple[str, str]]:
    """Many clusters of a pair kernel whose CTAs that fit on an SM ask for more than its 512 TMEM columns: some
    tcgen05.alloc.cta_group::2 must wait for another pair's columns. The GEMM runs in a child process under a timeout."""
    def run() -> tuple[str, str]:
        from ..compile.artifacts import generate

        spec = make_spec(**kw)
        cols, fit = contention_fit(spec, generate(spec).sass.registers)
        asked = f"{cols} columns x {fit} CTAs per SM = {cols * fit}"
        if cols * fit <= 512:
            return FAIL, f"the kernel cannot contend: {asked} <= 512"
        cmd = [sys.executable, "-m", "ptxgen", "validate", *spec.cli_args().split(), "--m", str(m), "--n", str(n), "--k", str(k),
               "--seed", "0"]
        status, detail = run_with_timeout(cmd, timeout_s, f"the {m} x {n} x {k} pair GEMM ({asked} > 512)")
        return status, f"{asked} > 512; {detail}"
    return run


def _nan_padding(cases: tuple[tuple[dict, int, int, int], ...]) -> Callable[[], tuple[str, str]]:
    """Block-scaled GEMMs with K % BK != 0 and K % 4V != 0: the last atom of every row holds chunks past K, and the
    buffers' padding (and a tail past them) is NaN (UE8M0 0xFF, UE4M3 0x7F); the kernel must zero those chunks
    before the MMA (an e2m1/e4m3 zero times a NaN scale is NaN)."""
    def run() -> tuple[str, str]:
        from ...derive.scaled.sf_atoms import sf_k_atoms, sf_k_chunks
        from .bsvalidate import vec_of
        from .validate import validate_spec

        notes, ok = [], True
        for kw, m, n, k in cases:
            spec = make_spec(**kw)
            vec = vec_of(spec)
            assert k % spec.bk and k % (4 * vec), (k, spec.bk, vec)
            r = validate_spec(spec, m, n, k, seed=0)
            in_rows = (m + n) * (4 * sf_k_atoms(k, vec) - sf_k_chunks(k, vec))
            ok &= r.passed and r.nonfinite == 0
            notes.append(f"{spec.scale.value} M={m} N={n} K={k}: {in_rows} NaN bytes inside rows past K, non-finite "
                         f"{r.nonfinite}, rel error {r.rel_error:.1e} (tolerance {r.tolerance:.0e}), unwritten {r.unwritten}")
        return (PASS if ok else FAIL), "; ".join(notes)
    return run


F16 = dict(bm=128, bn=128, bk=64, a="kmajor-sw128", b="mnmajor-sw128", arch="sm_90a")
BF16_TMA = dict(bm=128, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", out_dtype="bf16", stages=3,
                schedule="persistent", epilogue="tma", arch="sm_90a")
PAIR = dict(bm=256, bn=128, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", out_dtype="bf16", cta_group=2, stages=3)
MXF8 = dict(bm=128, bn=128, bk=128, a="kmajor-sw128", b="kmajor-sw128", dtype="e4m3", scale="ue8m0", stages=3)
NVFP4 = dict(bm=128, bn=256, bk=256, a="kmajor-sw128", b="kmajor-sw128", dtype="e2m1", scale="ue4m3", stages=3)
MXF6F4 = dict(MXF8, dtype="e2m3", b_dtype="e2m1")  # kind::mxf8f6f4's unpacking maps (16U6/16U4_ALIGN16B)
NVFP4_PAIR = dict(NVFP4, bm=256, cta_group=2)  # the NVFP4 production configuration (docs/block-scaled.md, CTA pairs)
# TMEM contention: 256 columns a CTA (one accumulator of BN = 256) and 2 stages, so three CTAs fit on an SM by shared
# memory and registers (tests/test_selftest.py computes it): 768 of 512 columns asked for. PAIR's 128 columns x 3 CTAs
# (384) could never contend.
CONTENTION = dict(PAIR, bn=256, stages=2)
CONTENTION_TIMEOUT_S = 300


def steps() -> list[Step]:
    h, b = "hopper", "blackwell"
    return [
        Step(h, "L3", "wgmma read model: what the tensor core reads through each derived descriptor", _wgmma_probe),
        Step(h, "L3", "TMA write model: where cp.async.bulk.tensor writes (every swizzle, offsets, out of bounds)", _tma_probe),
        Step(h, "L3", "GEMM f16, one tile per CTA, TMA loads", _gemm(F16)),
        Step(h, "L3", "GEMM f16, cp.async loader, rings 384 B off the swizzle boundary",
             _gemm(dict(F16, a="kmajor-sw64", b="mnmajor-sw32", stages=3, smem_offset=384, loader="cp.async"))),
        Step(h, "L3", "GEMM e4m3 x e5m2 (8-bit, mixed)", _gemm(dict(F16, bk=128, b="kmajor-sw128", dtype="e4m3", b_dtype="e5m2"))),
        Step(h, "L3", "GEMM bf16 persistent, TMA-store epilogue", _gemm(BF16_TMA)),
        Step(h, "L3", "GEMM bf16 persistent ping-pong", _gemm(dict(BF16_TMA, bn=128, stages=5, consumers="pingpong", epilogue="direct"))),
        Step(h, "L3", "GEMM bf16 2-CTA cluster, TMA multicast", _gemm(dict(BF16_TMA, epilogue="direct", cluster="2x1"))),
        Step(h, "L3", "GEMM f16 odd shape 100 x 72 x 40", _gemm(F16, 100, 72, 40)),
        Step(b, "L4", "TMA write model on Blackwell (the swizzle anchor, the 128B_ATOM_32B swizzle)", _tma_probe),
        Step(b, "L4", "GEMM f16, one tile per CTA (the seed kernel)", _gemm(dict(bm=128, bn=128, bk=32, a="kmajor-sw64"))),
        Step(b, "L4", "GEMM tf32 M=64, MN-major B (128B_base32B)", _gemm(dict(bm=64, bn=128, bk=32, a="kmajor-sw128", b="mnmajor-sw128b32", dtype="tf32"))),
        Step(b, "L4", "GEMM e4m3 (kind::f8f6f4)", _gemm(dict(bm=128, bn=128, bk=128, a="kmajor-sw128", b="mnmajor-sw64", dtype="e4m3"))),
        Step(b, "L4", "GEMM bf16 persistent, two TMEM accumulators, TMA-store epilogue", _gemm(dict(BF16_TMA, arch="sm_100a"))),
        Step(b, "L4", "GEMM bf16 CTA pair (cta_group::2, M=256)", _gemm(PAIR)),
        Step(b, "L4", "GEMM e4m3 block-scaled (kind::mxf8f6f4, UE8M0 per 32), one CTA, SF in CUTLASS's layout", _gemm(MXF8)),
        Step(b, "L4", "GEMM e2m3 x e2m1 block-scaled (kind::mxf8f6f4, 16U6/16U4_ALIGN16B unpacking loads), one CTA", _gemm(MXF6F4)),
        Step(b, "L4", "GEMM e2m1 NVFP4 (kind::mxf4nvf4, UE4M3 per 16), one CTA, SF in CUTLASS's layout", _gemm(NVFP4)),
        Step(b, "L4", "GEMM e2m1 NVFP4 CTA pair (cta_group::2, M=256, the peer's scale factors relayed)", _gemm(NVFP4_PAIR)),
        Step(b, "L4", "commit arrivals at CTA exit: one K-tile, 1024 pair CTAs, compute-sanitizer synccheck + memcheck",
             _sanitized_exit(PAIR, 4096, 4096, 64)),
        Step(b, "L4", "pair clusters contending for an SM's TMEM: 256 clusters of a pair kernel whose CTAs per SM ask for "
             f"more than 512 columns (a hang past {CONTENTION_TIMEOUT_S} s is a finding)",
             _tmem_contention(CONTENTION, 4096, 4096, 512, CONTENTION_TIMEOUT_S)),
        Step(b, "L4", "NaN in the scale-factor padding (block-scaled, K % BK != 0 and K % 4V != 0): outputs finite, equal to float64",
             _nan_padding(((MXF8, 200, 136, 424), (NVFP4, 130, 264, 200), (NVFP4_PAIR, 300, 264, 200)))),
    ]


def run_selftest(only: Callable[[Step], bool] | None = None) -> Report:
    """Runs the steps for the GPU present (raises NoGPU without one)."""
    from ...version import __version__
    from ..launch.gpu import CudaError, require_gpu
    from ..compile.toolchain import nvrtc_version

    dev = require_gpu()
    here = "hopper" if dev.arch is Arch.SM90A else "blackwell"
    rep = Report(dev.name, f"{dev.cc[0]}.{dev.cc[1]}", nvrtc_version(), __version__, platform.python_version())
    for st in steps():
        if only is not None and not only(st):
            continue
        if st.half != here:
            need = NEEDS_10X if st.half == "blackwell" else "needs compute capability 9.0"
            rep.steps.append(StepResult(st.half, st.level, st.name, SKIP, need))
            continue
        if st.run is None:
            rep.steps.append(StepResult(st.half, st.level, st.name, NOT_RUN, st.why_not))
            continue
        t0 = time.perf_counter()
        try:
            status, detail = st.run()
        except (CudaError, RuntimeError, ValueError) as e:  # a launch or compile failure is a disagreement too
            status, detail = FAIL, f"{type(e).__name__}: {str(e).strip()[-400:]}"
        rep.steps.append(StepResult(st.half, st.level, st.name, status, detail, time.perf_counter() - t0))
        print(f"  {status:<7} {st.name}", file=sys.stderr, flush=True)
    return rep


def write_json(rep: Report, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(rep.to_json(), f, indent=1)
        f.write("\n")
