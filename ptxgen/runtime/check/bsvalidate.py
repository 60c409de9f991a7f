"""``ptxgen validate`` for block-scaled kernels (tcgen05 kinds mxf8f6f4, mxf4, mxf4nvf4; sm_100a).

What the runner does, beyond the dense one (ptxgen.runtime.check.validate):

* **Inputs** as the kernel's tensor maps expect them: 8-bit codes (e4m3, e5m2) one a byte in the operand's major;
  e2m1 packed two a byte along K (element 2i in bits 0-3; under kind::mxf4/mxf4nvf4 the map counts bytes, K / 2 a
  row); under kind::mxf8f6f4 e2m1, e2m3 and e3m2 packed without gaps along K (four fp6 in three bytes), loaded by the
  unpacking maps (16U4_ALIGN16B / 16U6_ALIGN16B count elements; K and the row stride multiples of 128 elements).
  Row padding holds the input poison (e4m3/e5m2 NaN; the 6-/4-bit types have no NaN: their largest code).
* **Scale factors**: random UE8M0 (2^-4..2^4) or UE4M3 (0.25..4) codes, one per V elements of a row along K, put
  into a buffer in CUTLASS's ``Sm1xxBlockScaledConfig`` layout by ptxgen's own layout function
  (ptxgen.derive.scaled.sf_atoms.sf_global_offset: 512-byte atoms of 128 rows x 4 chunks, K first, K padded to 4V); every
  byte that is not a scale factor (rows past M or N, chunks past ceil(K / V), and a tail past the buffer) holds a
  NaN code (UE8M0 0xFF, UE4M3 0x7F): the kernel must never let one reach a product (CUTLASS gets zeros there
  from TMA's out-of-bounds fill; ptxgen's kernel zeroes the chunks past K in shared memory, issue 19 fix 6).
* **The launch**: the ABI's SFA and SFB pointers through gemm_launches(extra=...).
* **The reference**: ptxgen.model.numerics.mxref, float64 with its own decode tables (OCP MX v1.0, PTX ISA).

Tolerance: every product A x SFA x B x SFB is exact in f32 (at most 4 significant bits per factor: e4m3 and e2m3 4,
e5m2 and e3m2 3, e2m1 2, UE8M0 1, UE4M3 4; exponents inside f32's range for the scales drawn here), so the error is the
f32 accumulation over K terms and the output rounding: the tolerance of the dense FP8 kinds (1e-3 relative, in the
Frobenius norm; numerics.tolerance), plus 2^-8 for bf16 or 2^-11 for f16 outputs. A scale factor read from the
wrong place is off by up to 2^8 (UE8M0) or 16 (UE4M3) for its chunk of V terms: errors of order 1.
"""

from __future__ import annotations

import time

import numpy as np

from ...derive.tile.kernel import plan_kernel
from ...derive.scaled.sf_atoms import SF_ATOM_BYTES, sf_global_bytes, sf_global_offset, sf_k_atoms, sf_k_chunks
from ...derive.tile.spec import TileSpec
from ...emit.render import render_kernel
from ...isa.numerics import CODE_DTYPE, poison_code, random_codes, tolerance
from ...isa.types import Major
from ...model.numerics.mxref import block_scaled_gemm
from ..launch.errors import ProblemError
from ..compile.cache import compile_cached
from ..launch.gpu import Buffer, Kernel, require_gpu, synchronize
from ..launch.launch import Problem, gemm_launches, global_shape, packed_per_byte
from .vresult import ValidationResult, device_problem, host_operand, judge

SF_NAN_CODE = {"ue8m0": 0xFF, "ue4m3": 0x7F}  # OCP MX E8M0 NaN; e4m3's S.1111.111 without the sign
SF_TAIL_BYTES = 4 * SF_ATOM_BYTES  # NaN bytes after the scale-factor buffer: a copy that read past its end shows


def vec_of(spec: TileSpec) -> int:
    """V: elements of a row along K per scale factor (32 for UE8M0, 16 for UE4M3)."""
    return spec.scaled_kind.vec_elements


def pack_sf(codes: np.ndarray, k: int, vec: int, pad: int) -> np.ndarray:
    """Scale-factor codes of a rows x ceil(K / V) matrix -> the bytes of CUTLASS's Sm1xxBlockScaledConfig buffer
    (sf_global_bytes long; rows padded to 128, K to 4V); bytes that hold no scale factor are ``pad``."""
    rows, chunks = codes.shape
    if chunks != sf_k_chunks(k, vec):
        raise ValueError(f"{chunks} scale factors a row; K={k} with V={vec} has {sf_k_chunks(k, vec)}")
    out = np.full(sf_global_bytes(rows, k, vec), pad, dtype=np.uint8)
    r, c = np.meshgrid(np.arange(rows), np.arange(chunks), indexing="ij")
    out[sf_global_offset(r, c, sf_k_atoms(k, vec))] = codes
    return out


def sf_padding_bytes(rows: int, k: int, vec: int) -> int:
    """Bytes of the buffer that hold no scale factor (rows past the matrix, chunks past ceil(K / V))."""
    return sf_global_bytes(rows, k, vec) - rows * sf_k_chunks(k, vec)


def pack_subbyte(codes: np.ndarray, bits: int) -> np.ndarray:
    """Rows of 4- or 6-bit codes -> rows of bytes, packed without gaps, element i at bits [i x bits, (i + 1) x bits) of
    the row read as a little-endian bit string (CUTLASS's sub-byte arrays; for 4 bits: element 2i in the low nibble).
    The row length times ``bits`` must be a multiple of 8 (of 24 for 6 bits: four elements in three bytes)."""
    c = np.asarray(codes).astype(np.uint32)
    if (c >> bits).any():
        raise ValueError(f"codes wider than {bits} bits")
    per = 8 // np.gcd(8, bits)  # elements per whole group of bytes: 2 for 4 bits, 4 for 6 bits
    if c.shape[-1] % per:
        raise ValueError(f"a row of {c.shape[-1]} {bits}-bit codes is not a whole number of {per}-element groups")
    g = c.reshape(*c.shape[:-1], -1, per)
    word = np.zeros(g.shape[:-1], dtype=np.uint32)
    for i in range(per):
        word |= g[..., i] << np.uint32(bits * i)
    nbytes = per * bits // 8
    out = np.stack([(word >> np.uint32(8 * j)) & 0xFF for j in range(nbytes)], axis=-1).astype(np.uint8)
    return out.reshape(*c.shape[:-1], -1)


def row_poison_code(dtype: str) -> int:
    """The largest positive code of a 6-/4-bit type (no NaN exists): what padding a kernel must not read holds."""
    return {"e2m1": 0x7, "e2m3": 0x1F, "e3m2": 0x1F}[dtype]


def host_block_operand(spec: TileSpec, name: str, codes: np.ndarray, p: Problem, extra_rows: int) -> np.ndarray:
    """Operand ``name``'s global array (logical MN x K codes): 8-bit codes as the dense runner lays them out; e2m1, e2m3
    and e3m2 (K-major only) packed along K without gaps (two e2m1 a byte; four fp6 in three bytes), whole rows of ``ld``
    elements, the padding and the extra rows holding the type's largest code."""
    dt = spec.operand_dtype(name)
    if not spec.unpacked(name) and packed_per_byte(spec, name) == 1:
        return host_operand(spec, name, codes, p, extra_rows)
    if spec.operand(name).major is not Major.K:
        raise ProblemError(f"packed {dt.value} operand {name.upper()} must be K-major")
    rows, ld = global_shape(spec, name, p)
    full = np.full((rows + extra_rows, ld), row_poison_code(dt.value), dtype=np.uint8)
    full[:rows, : codes.shape[1]] = codes
    return pack_subbyte(full, dt.bits)


def bs_tolerance(spec: TileSpec) -> float:
    """The dense FP8 kinds' tolerance with the spec's accumulator and output (see the module docstring)."""
    return tolerance("e4m3", spec.acc.value, spec.out_dtype.value)


def validate_block_scaled(spec: TileSpec, m: int | None = None, n: int | None = None, k: int | None = None,
                          seed: int | None = None) -> ValidationResult:
    if not spec.block_scaled:
        raise ValueError(f"{spec.kernel_name} is not block-scaled")
    dev = require_gpu()
    p = device_problem(spec, dev, m, n, k)
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    plan = plan_kernel(spec)
    compiled = compile_cached(render_kernel(plan), spec.kernel_name, spec.arch.value).compiled  # the on-disk cubin cache
    a_type, b_type, sf_type = spec.dtype.value, spec.b_dtype.value, spec.scale.dtype.value
    vec = vec_of(spec)
    a_codes = random_codes(a_type, (p.m, p.k), rng)
    b_codes = random_codes(b_type, (p.n, p.k), rng)
    sfa_codes = random_codes(sf_type, (p.m, sf_k_chunks(p.k, vec)), rng)
    sfb_codes = random_codes(sf_type, (p.n, sf_k_chunks(p.k, vec)), rng)
    nan = SF_NAN_CODE[sf_type]
    sfa = pack_sf(sfa_codes, p.k, vec, nan)
    sfb = pack_sf(sfb_codes, p.k, vec, nan)
    extra = max(spec.bm, spec.bn, spec.bk)
    ga, gb = host_block_operand(spec, "a", a_codes, p, extra), host_block_operand(spec, "b", b_codes, p, extra)
    out_bytes = spec.out_dtype.bytes
    code = CODE_DTYPE[out_bytes]
    poison = poison_code(spec.out_dtype.value)
    d_rows = p.m + spec.bm
    kernel = Kernel(compiled.cubin, spec.kernel_name, plan.abi.dynamic_smem_bytes)
    with Buffer(ga.nbytes) as da, Buffer(gb.nbytes) as db, Buffer(d_rows * p.ldd * out_bytes) as dd, \
            Buffer(sfa.nbytes + SF_TAIL_BYTES) as dsa, Buffer(sfb.nbytes + SF_TAIL_BYTES) as dsb:
        da.upload(ga)
        db.upload(gb)
        for buf, host in ((dsa, sfa), (dsb, sfb)):
            buf.fill_u8(nan)
            buf.upload(host)
        (dd.fill_u32 if out_bytes == 4 else dd.fill_u16)(poison)
        for kern, grid, block, args in gemm_launches(plan, kernel, da.address, db.address, dd.address, 0, p,
                                                     dev.sm_count, extra={"SFA": dsa.address, "SFB": dsb.address}):
            kern.launch(grid, block, args)
        synchronize(spec.kernel_name)
        whole = dd.download(code, d_rows * p.ldd).reshape(d_rows, p.ldd)
    kernel.unload()
    ref = block_scaled_gemm(a_codes, a_type, sfa_codes, b_codes, b_type, sfb_codes, sf_type, vec)
    pad = sf_padding_bytes(p.m, p.k, vec) + sf_padding_bytes(p.n, p.k, vec)
    notes = (f"scale factors {sf_type} V={vec} in CUTLASS's layout, {pad} padding bytes + {2 * SF_TAIL_BYTES} tail bytes "
             f"NaN (0x{nan:02X})")
    return judge(spec, p, whole, poison, ref, bs_tolerance(spec), t0, dev.name, notes)
