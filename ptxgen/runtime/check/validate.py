"""``ptxgen validate``: run a generated kernel on the GPU and compare with a float64 numpy reference.

Memory the kernel must not read (row padding, rows past the end of A and B) is filled with NaN (or the
largest integer); memory it must not write (D's padding and the rows past M) starts as poison and must
stay so; every element of D inside M x N must be written.
"""

from __future__ import annotations

import time

import numpy as np

from ...derive.tile.kernel import plan_kernel
from ...derive.tile.spec import TileSpec
from ...emit.render import render_kernel
from ...isa.numerics import CODE_DTYPE, decode, poison_code, random_codes, tolerance
from ..compile.cache import compile_cached
from ..launch.gpu import Buffer, Kernel, require_gpu, synchronize
from ..launch.launch import gemm_launches, workspace_bytes, workspace_zero_bytes
from .vresult import ValidationResult, device_problem, host_operand, judge


def reference(a_codes: np.ndarray, a_type: str, b_codes: np.ndarray, b_type: str) -> np.ndarray:
    """D = A · Bᵀ in float64, each operand's codes decoded with its own type (exact for every input type here)."""
    return decode(a_codes, a_type) @ decode(b_codes, b_type).T


def validate_spec(spec: TileSpec, m: int | None = None, n: int | None = None, k: int | None = None, seed: int | None = None) -> ValidationResult:
    if spec.block_scaled:  # kinds mxf8f6f4 / mxf4 / mxf4nvf4: scale-factor arrays, their own inputs and reference
        from .bsvalidate import validate_block_scaled

        return validate_block_scaled(spec, m, n, k, seed)
    dev = require_gpu()
    p = device_problem(spec, dev, m, n, k)
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    plan = plan_kernel(spec)
    compiled = compile_cached(render_kernel(plan), spec.kernel_name, spec.arch.value).compiled  # the on-disk cubin cache
    a_type, b_type = spec.dtype.value, spec.b_dtype.value  # differ for mixed inputs: e4m3 x e5m2, u8 x s8
    a_codes = random_codes(a_type, (p.m, p.k), rng)
    b_codes = random_codes(b_type, (p.n, p.k), rng)
    extra = max(spec.bm, spec.bn, spec.bk)  # an overhanging tile that read past the end would hit poison
    ga, gb = host_operand(spec, "a", a_codes, p, extra), host_operand(spec, "b", b_codes, p, extra)
    out_bytes = spec.out_dtype.bytes
    code = CODE_DTYPE[out_bytes]
    poison = poison_code(spec.out_dtype.value)
    m_major = spec.d_major.value == "m"  # D's memory: rows of ldd elements, one per column of D (derive.store.output)
    d_rows = p.n + spec.bn if m_major else p.m + spec.bm
    kernel = Kernel(compiled.cubin, spec.kernel_name, plan.abi.dynamic_smem_bytes)
    with Buffer(ga.nbytes) as da, Buffer(gb.nbytes) as db, Buffer(d_rows * p.ldd * out_bytes) as dd, \
            Buffer(max(16, workspace_bytes(plan, p, dev.sm_count))) as dw:
        da.upload(ga)
        db.upload(gb)
        (dd.fill_u32 if out_bytes == 4 else dd.fill_u16)(poison)
        dw.fill_u32(0x7FC00000)  # NaN: a workspace element the MMA kernel left unwritten would poison D
        if workspace_zero_bytes(plan):  # split-K's counters, stream-K's flags start at zero (the partial slots stay NaN-poisoned)
            dw.upload(np.zeros(workspace_zero_bytes(plan), dtype=np.uint8))
        for kern, grid, block, args in gemm_launches(plan, kernel, da.address, db.address, dd.address, dw.address, p,
                                                     dev.sm_count):
            kern.launch(grid, block, args)
        synchronize(spec.kernel_name)
        whole = dd.download(code, d_rows * p.ldd).reshape(d_rows, p.ldd)
    if m_major:
        whole = whole.T  # element (i, j) at j x ldd + i
    kernel.unload()
    ref = reference(a_codes, a_type, b_codes, b_type)
    return judge(spec, p, whole, poison, ref, tolerance(a_type, spec.acc.value, spec.out_dtype.value, b_type), t0, dev.name)
