"""``ptxgen probe``: what the Hopper tensor core really reads through a descriptor (L3).

One ``wgmma.mma_async`` per case, both operands in shared memory. The probed operand's descriptor
reads a 48 KB image in which every element slot holds a different value (16-bit and 32-bit types:
the value identifies its own slot; 8-bit types: random codes); the other operand is an identity
matrix, so D is exactly the matrix the tensor core read. That matrix is compared, element by
element, with the independent read model (ptxgen.readmodel).

Categories of cases:
* ``derived``: the K-step and slab descriptors ptxgen derives for real tiles (every swizzle, both
  majors, both atom orders, wide N with several atoms, f16/bf16/tf32/e4m3);
* ``strides``: synthetic descriptors with several LBO and SBO values and start offsets inside a
  swizzle row, including LBO values that should be ignored;
* ``base_offset``: starts on every 128-byte line of the repeat, with every base-offset value, scored
  against competing hypotheses of what the field does.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import asdict, dataclass, field

import numpy as np

from ...model.layouts import readmodel
from ...isa.descriptors import SmemDescriptor
from ...emit.probe_render import render_probe
from ...derive.tile.layout import derive
from ...isa.numerics import CODE_DTYPE, E4M3, E5M2
from ...derive.tile.spec import make_spec
from ...isa.types import Arch, DType, Major, Swizzle
from ..launch.gpu import Buffer, Kernel, KernelArgs, require_gpu, synchronize
from ..compile.toolchain import compile_cuda

PROBE_REGION = 48 * 1024  # the probed operand's image: bytes [0, 48 KB) of the aligned base
OTHER_OFFSET = 48 * 1024  # the identity operand
IMAGE_BYTES = 52 * 1024
DYNAMIC_SMEM = IMAGE_BYTES + 1024  # + slack to align the base to 1024 B
ONE = {"f16": 0x3C00, "bf16": 0x3F80, "tf32": 0x3F800000, "e4m3": 0x38, "e5m2": 0x3C}
ARCH = "sm_90a"


@dataclass
class ProbeCase:
    category: str
    dtype: str
    target: str  # "a" (64 x K, identity B) or "b" (N x K, selector A)
    major: str  # "k" or "mn"
    n: int  # the probed MN extent for "b"; unused for "a" (64)
    desc: int  # probed descriptor; start relative to the 1024-aligned image base
    note: str = ""
    # filled by run()
    match: bool | None = None
    mismatches: int = 0
    examples: list = field(default_factory=list)
    rules: dict = field(default_factory=dict)  # base_offset: hypothesis -> matches hardware?

    @property
    def mn(self) -> int:
        return 64 if self.target == "a" else self.n

    def to_json(self) -> dict:
        d = asdict(self)
        d["desc"] = f"{self.desc:#018x}"
        return d


def _esize(dtype: str) -> int:
    return readmodel.ELEMENT_BITS[dtype] // 8


def _kmma(dtype: str) -> int:
    return readmodel.MMA_K_BITS // readmodel.ELEMENT_BITS[dtype]


def probe_image(dtype: str, rng: np.random.Generator) -> np.ndarray:
    """48 KB of element slots; for 16/32-bit types slot i holds a distinct normal value that encodes i."""
    esize = _esize(dtype)
    slots = PROBE_REGION // esize
    i = np.arange(slots, dtype=np.int64)
    if dtype == "f16":
        codes = (0x0400 + i).astype(np.uint16)  # positive normals, no subnormal flushing to worry about
    elif dtype == "bf16":
        codes = (0x0080 + i).astype(np.uint16)
    elif dtype == "tf32":
        codes = (0x00800000 + (i << 13)).astype(np.uint32)  # the 13 bits tf32 drops are zero
    else:
        table = E4M3 if dtype == "e4m3" else E5M2
        ok = np.flatnonzero(np.isfinite(table) & (table != 0))
        codes = ok[rng.integers(0, ok.size, slots)].astype(np.uint8)
    return codes.view(np.uint8)


def slot_address(dtype: str, code: np.ndarray) -> np.ndarray | None:
    """For self-identifying images: the byte address a read code came from."""
    if dtype == "f16":
        return (code.astype(np.int64) - 0x0400) * 2
    if dtype == "bf16":
        return (code.astype(np.int64) - 0x0080) * 2
    if dtype == "tf32":
        return ((code.astype(np.int64) - 0x00800000) >> 13) * 4
    return None


def f32_to_codes(values: np.ndarray, dtype: str) -> np.ndarray:
    v = values.astype(np.float32)
    if dtype == "f16":
        return v.astype(np.float16).view(np.uint16)
    if dtype == "bf16":
        return (v.view(np.uint32) >> 16).astype(np.uint16)
    if dtype == "tf32":
        return v.view(np.uint32)
    table = E4M3 if dtype == "e4m3" else E5M2
    lookup = {float(table[c]): c for c in range(256) if np.isfinite(table[c]) and c not in (0x00, 0x80)}
    return np.array([lookup.get(float(x), 0xFF) for x in v.ravel()], dtype=np.uint8).reshape(v.shape)


def identity_operand(dtype: str, rows: int) -> tuple[np.ndarray, int]:
    """(bytes, descriptor) of a rows x K 'identity' (element [r][r] = 1 for r < K) stored K-major with no
    swizzle at OTHER_OFFSET: core matrices of 8 rows x 16 B; the two along K 128 B apart (LBO), 8-row
    groups 256 B apart (SBO)."""
    esize, kmma = _esize(dtype), _kmma(dtype)
    img = np.zeros(rows // 8 * 256, dtype=np.uint8)
    one = np.array([ONE[dtype]], dtype=CODE_DTYPE[esize]).view(np.uint8)
    for r in range(min(rows, kmma)):
        kb = r * esize
        off = (r // 8) * 256 + (r % 8) * 16 + (kb // 16) * 128 + kb % 16
        img[off : off + esize] = one
    desc = SmemDescriptor(Arch.SM90A, OTHER_OFFSET, 128, 256, Swizzle.NONE).encode()
    return img, desc


def _swz_desc(start: int, lbo: int, sbo: int, swz: Swizzle, base_offset: int = 0) -> int:
    return SmemDescriptor(Arch.SM90A, start, lbo, sbo, swz, base_offset=base_offset).encode()


# ------------------------------------------------------------------------------------------------
# Cases
# ------------------------------------------------------------------------------------------------
def derived_cases() -> list[ProbeCase]:
    cases = []

    def add(spec, name, note):
        t = derive(spec)
        op = t.operand(name)
        for si in range(len(op.k_steps)):
            for slab in range(len(op.slab_offsets_bytes)):
                d = op.descriptor(si, slab).encode()
                cases.append(ProbeCase("derived", spec.dtype.value, name, op.major.value, op.mma_mn, d, f"{note} k-step {si} slab {slab}"))

    tokens16 = [f"{m}-{s}" for m in ("kmajor", "mnmajor") for s in ("none", "sw32", "sw64", "sw128")]
    ktokens = [f"kmajor-{s}" for s in ("none", "sw32", "sw64", "sw128")]
    for tok, order in itertools.product(tokens16, ("mn", "k")):
        add(make_spec(128, 64, 64, tok, "kmajor-sw128", a_order=order, arch="sm_90a"), "a", f"f16 A {tok} order {order}")
        for bn in (64, 256):
            add(make_spec(64, bn, 64, "kmajor-sw128", tok, b_order=order, arch="sm_90a"), "b", f"f16 B {tok} order {order} BN {bn}")
    for tok in tokens16:
        add(make_spec(128, 64, 64, tok, "kmajor-sw128", dtype="bf16", arch="sm_90a"), "a", f"bf16 A {tok}")
    for tok, order in itertools.product(ktokens, ("mn", "k")):
        add(make_spec(128, 64, 32, tok, "kmajor-sw128", a_order=order, dtype="tf32", arch="sm_90a"), "a", f"tf32 A {tok} order {order}")
        add(make_spec(128, 64, 128, tok, "kmajor-sw128", a_order=order, dtype="e4m3", arch="sm_90a"), "a", f"e4m3 A {tok} order {order}")
    for tok in ktokens:
        add(make_spec(64, 128, 32, "kmajor-sw128", tok, dtype="tf32", arch="sm_90a"), "b", f"tf32 B {tok} BN 128")
        add(make_spec(64, 128, 128, "kmajor-sw128", tok, dtype="e4m3", arch="sm_90a"), "b", f"e4m3 B {tok} BN 128")
    return cases


def stride_cases() -> list[ProbeCase]:
    """Several LBO/SBO values and start offsets inside a swizzle row, per major and swizzle."""
    cases = []
    for target, n in (("a", 64), ("b", 128)):
        for major, swz in itertools.product(("k", "mn"), (Swizzle.NONE, Swizzle.SW32, Swizzle.SW64, Swizzle.SW128)):
            atom = swz.atom_bytes
            if major == "k":
                if swz.is_swizzled:
                    lbos, sbos = (16, 4096), (atom, 2 * atom, 3 * atom)
                    starts = [s for s in (0, 16, 32, 48, 64, 96) if s + 32 <= swz.row_bytes] + [atom]
                else:
                    lbos, sbos = (128, 1024, 2048), (256, 384, 2048)
                    starts = (0, 16, 128, 4096)
            else:
                mn_bytes = n * 2
                if swz.is_swizzled:
                    lbos, sbos = (atom, 3 * atom), (mn_bytes // swz.row_bytes * atom, 2 * mn_bytes // swz.row_bytes * atom)
                    starts = [s for s in (0, 16, 64) if s < swz.row_bytes] + [2 * atom]
                else:
                    lbos, sbos = (mn_bytes * 8, mn_bytes * 8 + 128), (128, 256)
                    starts = (0, 128)
            for lbo, sbo, start in itertools.product(lbos, sbos, starts):
                d = _swz_desc(start, lbo, sbo, swz)
                case = ProbeCase("strides", "f16", target, major, n, d, f"{swz.value} LBO {lbo} SBO {sbo} start {start}")
                if _fits(case):
                    cases.append(case)
    # 8-bit and 32-bit element sizes, K-major (wgmma transposes only 16-bit types)
    for dtype, swz in itertools.product(("tf32", "e4m3"), (Swizzle.NONE, Swizzle.SW64, Swizzle.SW128)):
        atom = swz.atom_bytes
        sbos = (atom, 2 * atom) if swz.is_swizzled else (256, 2048)
        lbos = (16,) if swz.is_swizzled else (128, 1024)
        starts = (0, 32) if swz.is_swizzled else (0, 128)
        for lbo, sbo, start in itertools.product(lbos, sbos, starts):
            case = ProbeCase("strides", dtype, "a", "k", 64, _swz_desc(start, lbo, sbo, swz), f"{dtype} {swz.value} LBO {lbo} SBO {sbo} start {start}")
            if _fits(case):
                cases.append(case)
    return cases


def base_offset_cases() -> list[ProbeCase]:
    """Start the matrix on every 128-byte line of the repeat (so the swizzle pattern the descriptor sees
    does not start on its boundary), with every base-offset value."""
    cases = []
    for major, swz in itertools.product(("k", "mn"), (Swizzle.SW32, Swizzle.SW64, Swizzle.SW128)):
        atom = swz.atom_bytes
        sbo = atom if major == "k" else (64 * 2 // swz.row_bytes) * atom
        lbo = 16 if major == "k" else atom
        for line, bo, kofs in itertools.product(range(8), range(8), (0, 32)):
            if kofs and (major != "k" or kofs + 32 > swz.row_bytes):
                continue
            start = 4096 + 128 * line + kofs
            d = _swz_desc(start, lbo, sbo, swz, base_offset=bo)
            cases.append(ProbeCase("base_offset", "f16", "a", major, 64, d, f"{swz.value} start {start} (line {line} of the repeat) base_offset {bo}"))
    return cases


def _fits(case: ProbeCase) -> bool:
    try:
        addr = readmodel.canonical_addresses(ARCH, case.desc, case.major, case.mn, case.dtype)
    except readmodel.Unmodelled:
        return False
    return addr.min() >= 0 and addr.max() + 1024 < PROBE_REGION


def all_cases() -> list[ProbeCase]:
    return derived_cases() + stride_cases() + base_offset_cases()


# ------------------------------------------------------------------------------------------------
# Hypotheses about the base-offset field (scored on the base_offset cases)
# ------------------------------------------------------------------------------------------------
def hypotheses(case: ProbeCase) -> dict[str, np.ndarray]:
    d = readmodel.decode(ARCH, case.desc)
    addr = readmodel.canonical_addresses(ARCH, case.desc, case.major, case.mn, case.dtype)
    bo = d.base_offset
    return {
        "ignored: XOR keyed on address bits 7+": readmodel.xor_by_line(d.mode, addr, addr >> 7),
        "subtracted: key = (addr >> 7) - base_offset": readmodel.xor_by_line(d.mode, addr, (addr >> 7) - bo),
        "added: key = (addr >> 7) + base_offset": readmodel.xor_by_line(d.mode, addr, (addr >> 7) + bo),
        "start-relative: key = ((addr - start) >> 7) + base_offset": readmodel.xor_by_line(d.mode, addr, ((addr - d.start) >> 7) + bo),
    }


# ------------------------------------------------------------------------------------------------
# Running
# ------------------------------------------------------------------------------------------------
class Prober:
    def __init__(self, seed: int = 0):
        self.device = require_gpu()
        if self.device.arch is not Arch.SM90A:
            from ..launch.gpu import NoGPU

            raise NoGPU(f"the layout probe uses wgmma and needs compute capability 9.0, not {self.device.cc[0]}.{self.device.cc[1]}")
        self.rng = np.random.default_rng(seed)
        self.kernels: dict[tuple, Kernel] = {}
        self.images = {dt: probe_image(dt, self.rng) for dt in ("f16", "bf16", "tf32", "e4m3")}
        self.image_buf = Buffer(IMAGE_BYTES)
        self.out_buf = Buffer(64 * 256 * 4)

    def kernel(self, dtype: str, n: int, a_major: str, b_major: str) -> Kernel:
        key = (dtype, n, a_major, b_major)
        if key not in self.kernels:
            name, src = render_probe(DType(dtype), n, Major(a_major), Major(b_major))
            c = compile_cuda(src, name, ARCH)
            self.kernels[key] = Kernel(c.cubin, name, DYNAMIC_SMEM)
        return self.kernels[key]

    def hardware_read(self, case: ProbeCase) -> np.ndarray:
        """The mn x K matrix (raw codes) the tensor core read through case.desc."""
        kmma = _kmma(case.dtype)
        image = np.zeros(IMAGE_BYTES, dtype=np.uint8)
        image[:PROBE_REGION] = self.images[case.dtype]
        if case.target == "a":
            other, other_desc = identity_operand(case.dtype, kmma)  # B = identity, N = K
            k = self.kernel(case.dtype, kmma, case.major, "k")
            a_desc, b_desc, n = case.desc, other_desc, kmma
        else:
            other, other_desc = identity_operand(case.dtype, 64)  # A = selector: A[m][m] = 1 for m < K
            k = self.kernel(case.dtype, case.n, "k", case.major)
            a_desc, b_desc, n = other_desc, case.desc, case.n
        image[OTHER_OFFSET : OTHER_OFFSET + other.size] = other
        self.image_buf.upload(image)
        self.out_buf.fill_u32(0xFFFFFFFF)
        args = KernelArgs([("ptr", self.image_buf.address), ("i32", IMAGE_BYTES // 16), ("u64", a_desc), ("u64", b_desc), ("ptr", self.out_buf.address)])
        k.launch((1, 1, 1), (128, 1, 1), args)
        synchronize("probe")
        d = self.out_buf.download(np.float32, 64 * n).reshape(64, n)
        read = d if case.target == "a" else d[:kmma, :].T  # D = A (identity B) or B^T (selector A)
        return f32_to_codes(read, case.dtype)

    def run(self, case: ProbeCase) -> ProbeCase:
        hw = self.hardware_read(case)
        img = self.images[case.dtype]
        if case.category == "base_offset":
            for name, addr in hypotheses(case).items():
                pred = readmodel.gather(img, addr, case.dtype)
                case.rules[name] = bool(np.array_equal(pred, hw))
        try:
            model = readmodel.read(ARCH, case.desc, case.major, case.mn, case.dtype, img)
            bad = model != hw
            case.match = not bad.any()
            case.mismatches = int(bad.sum())
            if case.mismatches:
                where = np.argwhere(bad)[:4]
                hw_addr = slot_address(case.dtype, hw)
                m_addr = readmodel.element_addresses(ARCH, case.desc, case.major, case.mn, case.dtype)
                case.examples = [
                    {"row": int(r), "k": int(c), "model_addr": int(m_addr[r, c]),
                     "hw_addr": int(hw_addr[r, c]) if hw_addr is not None else None}
                    for r, c in where
                ]
        except readmodel.Unmodelled as e:
            case.match = None
            case.note += f" (model: {e})"
        return case

    def close(self) -> None:
        self.image_buf.free()
        self.out_buf.free()
        for k in self.kernels.values():
            k.unload()


def summarize(cases: list[ProbeCase]) -> dict:
    summary: dict = {"categories": {}, "base_offset_hypotheses": {}}
    for cat in ("derived", "strides", "base_offset"):
        cs = [c for c in cases if c.category == cat]
        summary["categories"][cat] = {
            "cases": len(cs),
            "model_agrees": sum(1 for c in cs if c.match),
            "model_disagrees": sum(1 for c in cs if c.match is False),
            "model_declines": sum(1 for c in cs if c.match is None),
        }
    bo = [c for c in cases if c.category == "base_offset"]
    if bo:
        names = list(bo[0].rules)
        for name in names:
            nz = [c for c in bo if readmodel.decode(ARCH, c.desc).base_offset]
            summary["base_offset_hypotheses"][name] = {
                "all_cases": f"{sum(c.rules[name] for c in bo)}/{len(bo)}",
                "nonzero_base_offset": f"{sum(c.rules[name] for c in nz)}/{len(nz)}",
            }
    by = {}
    for c in cases:
        key = f"{c.category}/{c.dtype}/{c.target}/{c.major}"
        e = by.setdefault(key, [0, 0])
        e[0] += 1
        e[1] += bool(c.match)
    summary["by_group"] = {k: f"{v[1]}/{v[0]}" for k, v in sorted(by.items())}
    return summary


def run_probe(seed: int = 0, categories: tuple[str, ...] = ("derived", "strides", "base_offset")) -> dict:
    prober = Prober(seed)
    cases = [c for c in all_cases() if c.category in categories]
    try:
        for c in cases:
            prober.run(c)
    finally:
        prober.close()
    return {"device": prober.device.name, "cases": [c.to_json() for c in cases], "summary": summarize(cases)}


def write_report(report: dict, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
        f.write("\n")

