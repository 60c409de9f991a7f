"""``ptxgen probe --category tma``: where a TMA tile copy really puts each byte (L3, Hopper or later).

One ``cp.async.bulk.tensor.2d`` per case into a zero-filled, 1024-byte-aligned shared-memory image, which
is then copied out whole and compared byte for byte with the independent TMA write model
(``ptxgen.model.layouts.tmamodel.write``) under both hypotheses of where the swizzle's XOR key comes from:

* ``address``: from the absolute shared-memory address written (bits [7, 10) of it);
* ``destination``: from the address relative to the copy's destination.

They differ only for a swizzled copy whose destination is 128-byte aligned but not on the swizzle repeat
boundary, which is the question: the answer decides the base offset the MMA descriptors need for a stage
that TMA filled at such an offset.

Categories of cases (all with 128-byte-aligned destinations, run in this process):

* ``layout``: every swizzle (none, 32B, 64B, 128B) x element sizes 1, 2, 4 B x boxes of one swizzle span
  (16 B for none) by 8, 16, 64 rows x destination offsets 128 x j, j = 0..7; box origin (0, 0);
* ``coords``: non-zero box coordinates;
* ``oob``: boxes that overhang the tensor's end (out-of-bounds elements must arrive as zeros).

And ``align`` (each in its own process, because a refused copy may leave a sticky error that kills the CUDA
context): destination offsets 16, 32, 64 and 128 (control) per swizzle: did the launch succeed, what did the
driver report, which anchor does the image match.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ...emit.probe_render import TMA_PROBE_DYNAMIC_SMEM, TMA_PROBE_IMAGE_BYTES, TMA_PROBE_THREADS, render_tma_probe
from ...isa.tensormap import INTERLEAVE_NONE, L2_PROMOTION_256B, OOB_FILL_ZERO, TmaDataType, TmaSwizzle

ANCHORS = ("address", "destination")
SWIZZLES = ("none", "32B", "64B", "128B")
ELEMENT_BYTES = (1, 2, 4)
OUTERS = (8, 16, 64)
DST_OFFSETS = tuple(128 * j for j in range(8))
ALIGN_OFFSETS = (16, 32, 64, 128)  # 128 is the control
MAIN_CATEGORIES = ("layout", "coords", "oob")
RESULT_MARK = "PTXGEN_TMA_RESULT "
SUBPROCESS_TIMEOUT_S = 180

_SWIZZLE_BY_NAME = {s.json_name: s for s in TmaSwizzle}
_DATA_TYPE = {1: TmaDataType.UINT8, 2: TmaDataType.FLOAT16, 4: TmaDataType.FLOAT32}  # as the GEMM loaders use
_CODE_DTYPE = {1: np.uint8, 2: np.uint16, 4: np.uint32}


@dataclass(frozen=True)
class ProbePlan:
    """The fields of a TmaPlan that tensormap_args reads, for one probe copy."""

    data_type: TmaDataType
    element_bytes: int
    box: tuple[int, int]
    swizzle: TmaSwizzle
    rank: int = 2
    element_strides: tuple[int, int] = (1, 1)
    interleave: int = INTERLEAVE_NONE
    l2_promotion: int = L2_PROMOTION_256B
    oob_fill: int = OOB_FILL_ZERO


@dataclass
class TmaCase:
    category: str  # layout | coords | oob | align
    swizzle: str  # JSON name
    element_bytes: int
    box: tuple[int, int]  # (inner, outer) elements
    dims: tuple[int, int]  # global (inner, outer) elements
    ld: int  # row stride, elements
    x: int  # box origin, inner
    y: int  # box origin, outer
    dst_offset: int  # from the 1024-byte-aligned base
    seed: int = 0
    note: str = ""
    # filled by running
    launched: bool | None = None
    failed_at: str | None = None  # load | encode | launch | synchronize | download
    error: str | None = None
    anchors: dict = field(default_factory=dict)  # anchor -> image matches bit for bit
    mismatched_bytes: dict = field(default_factory=dict)
    misaligned_hypotheses: dict = field(default_factory=dict)  # destination not a multiple of 128 only
    examples: list = field(default_factory=list)

    @property
    def inner_bytes(self) -> int:
        return self.box[0] * self.element_bytes

    @property
    def box_bytes(self) -> int:
        return self.box[0] * self.box[1] * self.element_bytes

    @property
    def matched(self) -> list[str]:
        return [a for a in ANCHORS if self.anchors.get(a)]

    def plan(self) -> ProbePlan:
        return ProbePlan(_DATA_TYPE[self.element_bytes], self.element_bytes, self.box, _SWIZZLE_BY_NAME[self.swizzle])

    def tma_json(self) -> dict:
        """The write model's ``tma`` object: one copy at the stage address, box origin = tile origin."""
        return {"swizzle": self.swizzle, "box": list(self.box), "copies": [{"smem_offset_bytes": 0, "inner": 0, "outer": 0}]}

    def to_json(self) -> dict:
        d = asdict(self)
        d["box"], d["dims"] = list(self.box), list(self.dims)
        return d

    @classmethod
    def from_json(cls, d: dict) -> "TmaCase":
        keys = {f for f in cls.__dataclass_fields__}
        d = {k: v for k, v in d.items() if k in keys}
        d["box"], d["dims"] = tuple(d["box"]), tuple(d["dims"])
        return cls(**d)


# ------------------------------------------------------------------------------------------------
# Cases
# ------------------------------------------------------------------------------------------------
def _box_inner(swizzle: str, esize: int) -> int:
    span = _SWIZZLE_BY_NAME[swizzle].span_bytes or 16
    return span // esize


def _case(category: str, swizzle: str, esize: int, outer: int, dst: int, where: str = "origin", note: str = "") -> TmaCase:
    bi = _box_inner(swizzle, esize)
    dims = (3 * bi, 2 * outer + 3)
    ld = dims[0] + 16 // esize  # one spare 16-byte chunk per row: rows are not packed
    if where == "origin":
        x, y = 0, 0
    elif where == "next":  # the next box along both dimensions, starting one row down
        x, y = bi, 1
    elif where == "chunk":  # one 16-byte chunk in, several rows down
        x, y = 16 // esize, outer + 2
    elif where == "overhang_both":  # half a box past the inner end and the outer end
        x, y = dims[0] - max(bi // 2, 16 // esize), dims[1] - outer // 2
    elif where == "overhang_outer":
        x, y = 0, dims[1] - 3
    else:
        raise ValueError(where)
    return TmaCase(category, swizzle, esize, (bi, outer), dims, ld, x, y, dst, note=note or where)


def tma_cases() -> list[TmaCase]:
    cases = []
    for swz, esize, outer, dst in itertools.product(SWIZZLES, ELEMENT_BYTES, OUTERS, DST_OFFSETS):
        cases.append(_case("layout", swz, esize, outer, dst))
    for swz, esize, dst, where in itertools.product(SWIZZLES, ELEMENT_BYTES, (0, 384), ("next", "chunk")):
        cases.append(_case("coords", swz, esize, 16, dst, where))
    for swz, esize, dst, where in itertools.product(SWIZZLES, ELEMENT_BYTES, (0, 640), ("overhang_both", "overhang_outer")):
        cases.append(_case("oob", swz, esize, 16, dst, where))
    return cases


def alignment_cases() -> list[TmaCase]:
    return [
        _case("align", swz, 2, 16, dst, note=f"destination {dst} B past the 1024-byte-aligned base" + (" (control)" if dst % 128 == 0 else ""))
        for swz, dst in itertools.product(SWIZZLES, ALIGN_OFFSETS)
    ]


def global_tensor(case: TmaCase, rng: np.random.Generator) -> np.ndarray:
    """dims[1] x dims[0] raw codes, non-zero (zero is the out-of-bounds fill), distinct where the type allows."""
    n = case.dims[0] * case.dims[1]
    e = case.element_bytes
    if e == 1:
        codes = rng.integers(1, 256, n, dtype=np.int64)
    elif e == 2:  # positive normal f16 codes, distinct while there are enough of them
        lo, hi = 0x0400, 0x7C00
        codes = lo + (rng.permutation(hi - lo)[:n] if n <= hi - lo else rng.integers(0, hi - lo, n))
    else:  # positive normal f32 codes, distinct
        codes = 0x00800000 + rng.permutation(n).astype(np.int64) * 977
    return codes.astype(_CODE_DTYPE[e]).reshape(case.dims[1], case.dims[0])


def global_bytes(case: TmaCase, tensor: np.ndarray) -> np.ndarray:
    """The tensor in global memory: rows ld elements apart, the padding a code that never appears."""
    padded = np.full((case.dims[1], case.ld), np.iinfo(_CODE_DTYPE[case.element_bytes]).max, dtype=_CODE_DTYPE[case.element_bytes])
    padded[:, : case.dims[0]] = tensor
    return padded.reshape(-1).view(np.uint8)


# ------------------------------------------------------------------------------------------------
# Comparing with the write model
# ------------------------------------------------------------------------------------------------
def model_image(case: TmaCase, tensor: np.ndarray, anchor: str, dst: int | None = None) -> np.ndarray:
    """The write model's image of ``case`` (at destination ``dst``, default the case's)."""
    from ...model.layouts import tmamodel  # the independent write model

    dst = case.dst_offset if dst is None else dst
    image = np.zeros(TMA_PROBE_IMAGE_BYTES, dtype=np.uint8)
    if dst % 128 == 0:
        tmamodel.write(case.tma_json(), case.element_bytes, dst, (case.x, case.y), tensor, image, anchor=anchor)
        return image
    # The model refuses destinations PTX does not allow; to see what a misaligned copy that the hardware
    # accepted did, place the model's dense (unswizzled) box with the model's own swizzle function.
    dense = np.zeros(TMA_PROBE_IMAGE_BYTES, dtype=np.uint8)
    plain = {**case.tma_json(), "swizzle": "none"}
    tmamodel.write(plain, case.element_bytes, 0, (case.x, case.y), tensor, dense, anchor=anchor)
    n = case.box_bytes
    where = tmamodel.swizzle_address(case.swizzle, dst + np.arange(n, dtype=np.int64), dst, anchor)
    image[where] = dense[:n]
    return image
def _source_of(case: TmaCase, tensor: np.ndarray, hw: np.ndarray, addr: int) -> list | None:
    """(outer, inner) of the global element whose code the hardware wrote at ``addr`` (distinct codes only)."""
    e = case.element_bytes
    if e == 1:
        return None
    a = addr - addr % e
    code = int(hw[a : a + e].view(_CODE_DTYPE[e])[0])
    hits = np.argwhere(tensor == code)
    return [int(v) for v in hits[0]] if len(hits) == 1 else None


def compare(case: TmaCase, tensor: np.ndarray, hw: np.ndarray) -> TmaCase:
    """Score the hardware image ``hw`` against the write model under every anchor."""
    assert hw.dtype == np.uint8 and hw.size == TMA_PROBE_IMAGE_BYTES, (hw.dtype, hw.size)
    models = {a: model_image(case, tensor, a) for a in ANCHORS}
    for a, m in models.items():
        bad = np.flatnonzero(m != hw)
        case.anchors[a] = bad.size == 0
        case.mismatched_bytes[a] = int(bad.size)
    if case.dst_offset % 128:  # a misaligned copy that ran: does it behave as if the low bits were dropped?
        down = case.dst_offset - case.dst_offset % 128
        case.misaligned_hypotheses = {
            f"{a} at the 128-byte-aligned destination {down}": bool(np.array_equal(model_image(case, tensor, a, down), hw)) for a in ANCHORS
        }
    if not case.matched:
        bad = np.flatnonzero(models[ANCHORS[0]] != hw)
        case.examples = [
            {"address": int(i), "hw": int(hw[i]), **{a: int(models[a][i]) for a in ANCHORS}, "hw_source_outer_inner": _source_of(case, tensor, hw, int(i))}
            for i in bad[:6]
        ]
    return case


# ------------------------------------------------------------------------------------------------
# Running
# ------------------------------------------------------------------------------------------------
class TmaProber:
    def __init__(self, seed: int = 0):
        from ..launch.gpu import NoGPU, require_gpu

        self.device = require_gpu()
        if self.device.cc[0] < 9:
            raise NoGPU(f"TMA needs compute capability 9.0 or later, not {self.device.cc[0]}.{self.device.cc[1]}")
        self.arch = self.device.arch.value  # sm_90a on 9.0, sm_100a on 10.x (NoGPU otherwise)
        self.seed = seed
        self.kernels: dict[int, object] = {}
        self.broken: str | None = None  # set when the context is lost: later cases are not run

    def kernel(self, box_bytes: int):
        from ..launch.gpu import Kernel
        from ..compile.toolchain import compile_cuda

        if box_bytes not in self.kernels:
            name, src = render_tma_probe(box_bytes)
            c = compile_cuda(src, name, self.arch)
            self.kernels[box_bytes] = Kernel(c.cubin, name, TMA_PROBE_DYNAMIC_SMEM)
        return self.kernels[box_bytes]

    def hardware_image(self, case: TmaCase, tensor: np.ndarray) -> np.ndarray:
        """Launch one copy and return the 1024-aligned smem image (raises CudaError / ProblemError).
        ``case.failed_at`` tracks the step: encode, launch, synchronize, download."""
        from ..launch.gpu import Buffer, CudaError, KernelArgs, synchronize
        from ..launch.tensormap import encode, tensormap_args

        case.failed_at = "load"
        kernel = self.kernel(case.box_bytes)
        src = global_bytes(case, tensor)
        g, out = Buffer(src.nbytes), Buffer(TMA_PROBE_IMAGE_BYTES)
        try:
            g.upload(src)
            out.fill_u8(0xA5)  # not what the kernel writes: a missing copy-out shows
            case.failed_at = "encode"
            tmap = encode(tensormap_args(case.plan(), g.address, case.dims, case.ld))
            args = KernelArgs([("tensormap", tmap), ("i32", case.x), ("i32", case.y), ("u32", case.dst_offset),
                               ("ptr", out.address), ("i32", TMA_PROBE_IMAGE_BYTES // 16)])
            case.failed_at, case.launched = "launch", False
            kernel.launch((1, 1, 1), (TMA_PROBE_THREADS, 1, 1), args)
            case.failed_at = "synchronize"
            synchronize(f"TMA probe {case.swizzle} dst {case.dst_offset}")
            case.failed_at, case.launched = "download", True
            image = out.download(np.uint8, TMA_PROBE_IMAGE_BYTES)
            case.failed_at = None
            return image
        finally:
            for b in (g, out):
                try:
                    b.free()
                except CudaError:  # the context is gone; the original error is the one to report
                    pass

    def run(self, case: TmaCase, index: int) -> TmaCase:
        from ..launch.gpu import CudaError
        from ..launch.errors import ProblemError

        case.seed = self.seed * 1_000_003 + index
        if self.broken:
            case.error = f"not run: the CUDA context was lost earlier ({self.broken})"
            return case
        tensor = global_tensor(case, np.random.default_rng(case.seed))
        try:
            hw = self.hardware_image(case, tensor)
        except ProblemError as e:
            case.error = f"refused before encoding: {e}"
            return case
        except CudaError as e:
            case.error = f"{case.failed_at}: {e}"
            if case.launched is not None:  # failed at launch or later: the context may be gone
                self.broken = case.error
            return case
        try:
            return compare(case, tensor, hw)
        except Exception as e:  # noqa: BLE001 - the model refusing a placement is a result, not a crash
            case.error = f"the write model failed on this case: {type(e).__name__}: {e}"
            return case

    def close(self) -> None:
        for k in self.kernels.values():
            try:
                k.unload()
            except Exception:  # noqa: BLE001 - a lost context cannot unload; nothing to keep
                pass


def _repo_root() -> str:
    return str(Path(__file__).resolve().parents[3])


def run_isolated(case: TmaCase, seed: int, index: int) -> TmaCase:
    """Run ``case`` in a fresh Python process; a sticky CUDA error there cannot hurt this one."""
    case.seed = seed * 1_000_003 + index
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_repo_root(), env.get("PYTHONPATH", "")) if p)
    cmd = [sys.executable, "-m", "ptxgen.runtime.check.probe_tma", "--one", json.dumps(case.to_json()), "--seed", str(seed)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        case.error = f"the subprocess did not finish in {SUBPROCESS_TIMEOUT_S} s (hung copy?)"
        return case
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_MARK):
            return TmaCase.from_json(json.loads(line[len(RESULT_MARK):]))
    tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
    case.error = f"the subprocess exited {proc.returncode} without a result: {tail}"
    return case


def summarize(cases: list[TmaCase], align: list[TmaCase]) -> dict:
    main = [c for c in cases if c.category in MAIN_CATEGORIES]
    aligned = [c for c in main if c.dst_offset % 128 == 0]
    explains = [a for a in ANCHORS if aligned and all(c.anchors.get(a) for c in aligned)]
    # the cases that tell the anchors apart: swizzled copies off their repeat boundary (8 lines of the span)
    telling = [c for c in aligned if c.swizzle != "none" and c.dst_offset % (8 * _SWIZZLE_BY_NAME[c.swizzle].span_bytes) != 0]
    by_swizzle_dst: dict = {}
    for c in main:
        e = by_swizzle_dst.setdefault(c.swizzle, {}).setdefault(str(c.dst_offset), {"cases": 0, "errors": 0, **{a: 0 for a in ANCHORS}, "neither": 0})
        e["cases"] += 1
        e["errors"] += c.error is not None
        for a in c.matched:
            e[a] += 1
        e["neither"] += not c.matched
    categories = {}
    for cat in MAIN_CATEGORIES:
        cs = [c for c in main if c.category == cat]
        categories[cat] = {"cases": len(cs), "errors": sum(c.error is not None for c in cs),
                           "matched_some_anchor": sum(bool(c.matched) for c in cs),
                           **{a: sum(bool(c.anchors.get(a)) for c in cs) for a in ANCHORS}}
    if explains == ["address"]:
        rule = ("the swizzle key is the absolute address: a stage TMA writes at base + P (P a multiple of 128) reads back "
                "through MMA descriptors with base offset 0 (the MMA key is line - base_offset), whatever P is")
    elif explains == ["destination"]:
        rule = ("the swizzle key is relative to the copy's destination: a stage TMA writes at base + P needs MMA "
                "descriptors with base offset (P / 128) mod 8, the rule ptxgen already uses for --smem-offset")
    elif explains:
        rule = "undecided: no case told the anchors apart"
    else:
        rule = "undecided: no single anchor explains every 128-byte-aligned case"
    alignment = [
        {"swizzle": c.swizzle, "dst_offset": c.dst_offset, "launched": c.launched, "failed_at": c.failed_at, "error": c.error,
         "anchors_matched": c.matched, "misaligned_hypotheses": c.misaligned_hypotheses}
        for c in align
    ]
    every = bool(main) and all(c.matched for c in main)
    return {
        "categories": categories,
        "every_case_matched_some_anchor": every,
        "anchors_explaining_every_aligned_case": explains,
        "cases_that_tell_anchors_apart": len(telling),
        "mma_base_offset_rule": rule,
        "by_swizzle_and_dst_offset": by_swizzle_dst,
        "alignment": alignment,
        "ok": every and len(explains) >= 1,
    }


def run_tma_probe(seed: int = 0, isolated_alignment: bool = True, alignment: bool = True) -> dict:
    """Every in-process case, then the alignment cases (each in its own process unless told otherwise; none
    without ``alignment``)."""
    prober = TmaProber(seed)
    cases = tma_cases()
    align = alignment_cases() if alignment else []
    base = len(cases)
    try:
        for i, c in enumerate(cases):
            prober.run(c, i)
        if not isolated_alignment:
            align = [prober.run(c, base + i) for i, c in enumerate(align)]
    finally:
        prober.close()
    if isolated_alignment:
        align = [run_isolated(c, seed, base + i) for i, c in enumerate(align)]
    return {
        "device": prober.device.name,
        "compute_capability": list(prober.device.cc),
        "arch": prober.arch,
        "seed": seed,
        "cases": [c.to_json() for c in cases],
        "alignment_cases": [c.to_json() for c in align],
        "summary": summarize(cases, align),
    }


def write_report(report: dict, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
        f.write("\n")


def _main(argv: list[str]) -> int:
    import argparse

    from ..launch.gpu import NoGPU

    p = argparse.ArgumentParser(prog="python -m ptxgen.runtime.check.probe_tma", description="run one TMA probe case (JSON) in this process")
    p.add_argument("--one", required=True, help="the case as JSON (TmaCase.to_json)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    case = TmaCase.from_json(json.loads(a.one))
    try:
        prober = TmaProber(a.seed)
    except NoGPU as e:
        print(f"ptxgen probe tma: {e}", file=sys.stderr)
        return 3
    try:
        index = case.seed - a.seed * 1_000_003
        prober.run(case, index)
    finally:
        prober.close()
    print(RESULT_MARK + json.dumps(case.to_json()), flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover - the alignment subprocess
    sys.exit(_main(sys.argv[1:]))
