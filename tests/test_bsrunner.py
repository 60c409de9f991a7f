"""The block-scaled runner (issue 19 item 4): ``ptxgen validate`` for kinds mxf8f6f4 / mxf4 / mxf4nvf4.

Tiers: the reference's decoders against values written out from the OCP MX spec and the PTX ISA; the host-side
scale-factor packer against CUTLASS's layout function typed from its source (tests/test_cutlass_review.py), with a
control that permutes the layout; the launch parameters' bytes; the whole runner on a simulated 10.0 device whose
"kernel" is a CPU emulation of what the generated kernel does with the buffers (NVRTC compiles the real kernel on
the way; nothing runs on a GPU), with controls (a permuted scale-factor layout, NaN padding that is not zeroed)
that must FAIL; and a ``gpu`` test that needs compute capability 10.x.
"""

from __future__ import annotations

import ctypes
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.scaled.sf_atoms import sf_k_chunks
from ptxgen.derive.tile.spec import make_spec
from ptxgen.model.numerics import mxref
from ptxgen.runtime.check import bsvalidate
from ptxgen.runtime.launch.launch import Problem, gemm_args, problem_errors

sys.path.insert(0, str(Path(__file__).parent))
from test_cutlass_review import cutlass_sf_offset  # noqa: E402 -- CUTLASS's Sm1xxBlockScaledConfig, typed from source

ROOT = Path(__file__).resolve().parents[1]
MX8 = dict(bm=128, bn=128, bk=128, a="kmajor-sw128", b="kmajor-sw128", dtype="e4m3", scale="ue8m0", stages=2)
NVFP4 = dict(bm=128, bn=256, bk=256, a="kmajor-sw128", b="kmajor-sw128", dtype="e2m1", scale="ue4m3", stages=2)
MXFP4 = dict(NVFP4, scale="ue8m0")


# ---- the reference's decoders against known values --------------------------------------------------------
def test_every_e2m1_code():
    """OCP MX v1.0 Table 5, FP4 E2M1: S EE M, bias 1."""
    want = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    got = mxref.decode_mx(np.arange(16), "e2m1")
    assert got[:8].tolist() == want and got[8:].tolist() == [-v for v in want]
    assert math.copysign(1.0, got[8]) == -1.0  # 0b1000 is -0


@pytest.mark.parametrize("code,value", [
    (0x00, 0.0), (0x01, 2.0 ** -9), (0x07, 7 * 2.0 ** -9), (0x08, 2.0 ** -6), (0x38, 1.0), (0x39, 1.125),
    (0x3F, 1.875), (0x40, 2.0), (0x7E, 448.0), (0xFE, -448.0), (0xB8, -1.0), (0x7F, None), (0xFF, None)])
def test_e4m3_edge_codes(code, value):
    """OCP MX 5.3.3: E4M3 bias 7, subnormals 2^-6 x 0.m, max 448, S.1111.111 NaN, no infinity."""
    got = mxref.decode_mx([code], "e4m3")[0]
    assert (math.isnan(got) if value is None else got == value)


@pytest.mark.parametrize("code,value", [(0x01, 2.0 ** -16), (0x3C, 1.0), (0x7B, 57344.0), (0x7C, math.inf), (0xFC, -math.inf),
                                        (0x7D, None), (0x04, 2.0 ** -14)])
def test_e5m2_edge_codes(code, value):
    got = mxref.decode_mx([code], "e5m2")[0]
    assert (math.isnan(got) if value is None else got == value)


def test_ue8m0_is_a_power_of_two_and_0xff_is_nan():
    got = mxref.decode_mx(np.arange(255), "ue8m0")
    assert all(got[c] == math.ldexp(1.0, c - 127) for c in range(255))
    assert got[127] == 1.0 and got[0] == 2.0 ** -127 and got[254] == 2.0 ** 127
    assert math.isnan(mxref.decode_mx([0xFF], "ue8m0")[0])


@pytest.mark.parametrize("code,value", [(0x38, 1.0), (0x30, 0.5), (0x40, 2.0), (0x48, 4.0), (0x7E, 448.0), (0x01, 2.0 ** -9),
                                        (0x08, 2.0 ** -6), (0x00, 0.0), (0x7F, None), (0x80, None), (0xB8, None)])
def test_ue4m3(code, value):
    """PTX: ue4m3, e4m3 without the sign bit (bias 7); 0x7F is NaN, and a code with bit 7 set is no ue4m3 value."""
    got = mxref.decode_mx([code], "ue4m3")[0]
    assert (math.isnan(got) if value is None else got == value)


def test_the_two_sides_decode_alike():
    """ptxgen.isa.numerics (the writer side) and the reference's own tables agree on every finite code."""
    from ptxgen.isa import numerics

    for fmt, table in (("e4m3", numerics.E4M3), ("e5m2", numerics.E5M2), ("e2m1", numerics.E2M1), ("e2m3", numerics.E2M3),
                       ("e3m2", numerics.E3M2), ("ue8m0", numerics.UE8M0), ("ue4m3", numerics.UE4M3)):
        ours = mxref.TABLES[fmt]
        ok = np.isfinite(ours)
        assert np.array_equal(ours[ok], table[ok]), fmt
        assert np.array_equal(np.isnan(ours), np.isnan(table)), fmt


def test_reference_scales_each_chunk():
    """K = 5 with V = 2: chunks {0,1}, {2,3}, {4}; one row each, known numbers."""
    a = np.array([[2, 2, 2, 2, 2]])  # e2m1 code 2 = 1.0
    b = np.array([[4, 4, 4, 4, 4]])  # 2.0
    sfa = np.array([[127, 128, 126]])  # 1, 2, 0.5
    sfb = np.array([[127, 127, 129]])  # 1, 1, 4
    d = mxref.block_scaled_gemm(a, "e2m1", sfa, b, "e2m1", sfb, "ue8m0", 2)
    assert d.tolist() == [[2 * (1 * 1 * 2) + 2 * (2 * 1 * 2) + 1 * (0.5 * 4 * 2)]]


@pytest.mark.parametrize("fmt,codes,values", [
    ("e2m3", [0x00, 0x01, 0x07, 0x08, 0x0F, 0x1F, 0x3F, 0x20], [0.0, 0.125, 0.875, 1.0, 1.875, 7.5, -7.5, -0.0]),
    ("e3m2", [0x00, 0x01, 0x03, 0x04, 0x0C, 0x1F, 0x3F, 0x21], [0.0, 0.0625, 0.1875, 0.25, 1.0, 28.0, -28.0, -0.0625])])
def test_fp6_codes(fmt, codes, values):
    """OCP MX v1.0 5.3.2: E2M3 bias 1 (subnormals 0.m x 2^0 in eighths, max 7.5), E3M2 bias 3 (subnormals 0.m x 2^-2 in
    quarters, max 28); no infinity, no NaN."""
    assert mxref.decode_mx(codes, fmt).tolist() == values


def test_subbyte_packer_bit_order():
    """Element i at bits [6i, 6i + 6) of the row as a little-endian bit string; 4-bit: element 2i in the low nibble."""
    six = bsvalidate.pack_subbyte(np.array([[0x01, 0x02, 0x03, 0x3F]]), 6)
    word = 0x01 | (0x02 << 6) | (0x03 << 12) | (0x3F << 18)
    assert six.tolist() == [[word & 0xFF, (word >> 8) & 0xFF, word >> 16]]
    assert bsvalidate.pack_subbyte(np.array([[1, 2, 0xF, 0]]), 4).tolist() == [[0x21, 0x0F]]
    with pytest.raises(ValueError):
        bsvalidate.pack_subbyte(np.array([[0x40, 0, 0, 0]]), 6)


def test_unpacking_map_arguments():
    """16U6_ALIGN16B / 16U4_ALIGN16B maps: dims in elements, the row stride the packed bytes (ld x 6 or 4 bits)."""
    spec = make_spec(**dict(MX8, dtype="e2m3", b_dtype="e2m1"))
    p = Problem.padded(spec, 200, 136, 384)
    args = gemm_args(plan_kernel(spec), 0x10000, 0x20000, 0x30000, p, encode=_fake_encode,
                     extra={"SFA": 0x40000, "SFB": 0x50000})
    ptrs = ctypes.cast(args.address, ctypes.POINTER(ctypes.c_void_p))
    a, b = (_map_words(ctypes.string_at(ptrs[i], 128)) for i in (0, 1))
    assert a[:6] == [0x10000, 384, 200, 384 * 6 // 8, 128, a[5]] and a[7] == 15  # 16U6_ALIGN16B
    assert b[:5] == [0x20000, 384, 136, 384 * 4 // 8, 128] and b[7] == 14  # 16U4_ALIGN16B


def test_unpack_nibbles_low_first():
    assert mxref.unpack_nibbles(np.array([[0x21, 0x7F]], np.uint8), 3).tolist() == [[1, 2, 0xF]]


# ---- the host-side packer against CUTLASS's layout function ------------------------------------------------
@pytest.mark.parametrize("rows,K,vec", [(128, 256, 32), (200, 424, 32), (300, 200, 16), (64, 40, 16), (384, 1000, 16)])
def test_sf_packer_matches_cutlass(rows, K, vec):
    rng = np.random.default_rng(rows + K)
    codes = rng.integers(1, 255, (rows, sf_k_chunks(K, vec))).astype(np.uint8)
    buf = bsvalidate.pack_sf(codes, K, vec, 0xFF)
    atoms_k = -(-K // (4 * vec))
    assert buf.size == cutlass_sf_offset(-(-rows // 128) * 128 - 1, atoms_k * 4 * vec - 1, rows, K, vec) + 1
    seen = np.zeros(buf.size, bool)
    for r in range(rows):
        for c in range(codes.shape[1]):
            off = cutlass_sf_offset(r, c * vec, rows, K, vec)
            assert buf[off] == codes[r, c], (r, c)
            seen[off] = True
    assert (buf[~seen] == 0xFF).all() and (~seen).sum() == bsvalidate.sf_padding_bytes(rows, K, vec)


def _permuted_offset(row, chunk, k_atoms):
    """A plausible wrong layout: rows r0 + 32 r1 at 16 r1 + 4 r0 (the two row modes swapped) -- still a bijection."""
    from ptxgen.derive.scaled import sf_atoms

    r = row % 128
    swapped = (r // 32) + 4 * (r % 32)
    return sf_atoms.sf_global_offset(row - r + swapped, chunk, k_atoms)


def test_control_a_permuted_packer_is_caught(monkeypatch):
    monkeypatch.setattr(bsvalidate, "sf_global_offset", _permuted_offset)
    rows, K, vec = 128, 256, 32
    codes = np.random.default_rng(1).integers(1, 255, (rows, sf_k_chunks(K, vec))).astype(np.uint8)
    buf = bsvalidate.pack_sf(codes, K, vec, 0xFF)
    wrong = sum(buf[cutlass_sf_offset(r, c * vec, rows, K, vec)] != codes[r, c] for r in range(rows) for c in range(codes.shape[1]))
    assert wrong > rows  # most rows' scale factors land elsewhere


# ---- the launch parameters of a block-scaled kernel, byte by byte -----------------------------------------
def _fake_encode(args):
    words = [args.global_address, *args.global_dims, args.global_strides[0], *args.box, args.swizzle, args.data_type]
    return b"".join(int(w).to_bytes(8, "little") for w in words).ljust(128, b"\0")


def _map_words(raw: bytes) -> list[int]:
    return [int.from_bytes(raw[8 * i: 8 * i + 8], "little") for i in range(8)]


@pytest.mark.parametrize("kw", [MX8, NVFP4])
def test_launch_parameters_of_a_block_scaled_kernel(kw):
    spec = make_spec(**kw)
    plan = plan_kernel(spec)
    assert [q.name for q in plan.abi.params] == ["tmap_a", "tmap_b", "SFA", "SFB", "D", "M", "N", "K", "ldd"]
    p = Problem.padded(spec, 200, 136, 424)
    assert problem_errors(spec, p) == []
    args = gemm_args(plan, 0x10000, 0x20000, 0x30000, p, encode=_fake_encode, extra={"SFA": 0x7F0000041000, "SFB": 0x7F0000052000})
    ptrs = ctypes.cast(args.address, ctypes.POINTER(ctypes.c_void_p))
    assert all(ptrs[i] % 64 == 0 for i in (0, 1))
    raw = [ctypes.string_at(ptrs[i], n) for i, n in enumerate((128, 128, 8, 8, 8, 4, 4, 4, 4))]
    assert raw[2] == (0x7F0000041000).to_bytes(8, "little") and raw[3] == (0x7F0000052000).to_bytes(8, "little")
    assert raw[4] == (0x30000).to_bytes(8, "little")
    assert [int.from_bytes(r, "little", signed=True) for r in raw[5:]] == [200, 136, 424, p.ldd]
    a, b = _map_words(raw[0]), _map_words(raw[1])
    per_byte = 2 if kw["dtype"] == "e2m1" else 1  # packed e2m1: the map counts bytes
    assert a[:4] == [0x10000, 424 // per_byte, 200, p.lda // per_byte] and b[:4] == [0x20000, 424 // per_byte, 136, p.ldb // per_byte]
    assert a[7] == 0  # CU_TENSOR_MAP_DATA_TYPE_UINT8: codes (and e2m1 pairs) travel as bytes


def test_missing_scale_factor_arguments_are_refused():
    from ptxgen.runtime.launch.errors import ProblemError

    spec = make_spec(**MX8)
    with pytest.raises(ProblemError, match="SFA, SFB"):
        gemm_args(plan_kernel(spec), 0x10000, 0x20000, 0x30000, Problem.padded(spec, 128, 128, 128), encode=_fake_encode)


def test_packed_e2m1_problem_rules():
    spec = make_spec(**NVFP4)
    assert Problem.padded(spec, 100, 100, 40).lda == 64  # 16-byte rows: 32 packed elements
    errs = problem_errors(spec, Problem.padded(spec, 100, 100, 41))
    assert any("K=41 is odd" in e for e in errs)
    errs = problem_errors(spec, Problem(100, 100, 40, 48, 64, 100))
    assert any("lda=48" in e and "24 B" in e for e in errs)


# ---- the whole runner on a simulated 10.0 device --------------------------------------------------------
class _Memory:
    """The simulated device's global memory: allocations by address."""

    def __init__(self):
        self.buffers, self.next = {}, 0x100000

    def find(self, addr: int):
        for base, buf in self.buffers.items():
            if base <= addr < base + buf.nbytes:
                return buf, addr - base
        raise AssertionError(f"address {addr:#x} is not allocated")


def _simulated(monkeypatch, specs, zero_fill=True):
    """A CC 10.0 device whose kernel does, on the CPU, what the generated block-scaled kernel does with its buffers:
    TMA loads of A and B through the maps (zeros past the map's dims), scale factors read from SFA/SFB at CUTLASS's
    offsets (ptxgen.model.numerics.sfmodel's own evaluation of the CuTe layout, K padded to 4V), chunks past ceil(K / V) zeroed
    in shared memory before the MMA (issue 19 fix 6; ``zero_fill=False`` leaves the buffer's bytes there), f32 out."""
    from ptxgen.isa import numerics
    from ptxgen.model.numerics import sfmodel
    from ptxgen.runtime.launch.gpu import Device

    mem = _Memory()
    fake = Device(0, "simulated CC 10.0", (10, 0), None, None, 148)
    monkeypatch.setattr(bsvalidate, "require_gpu", lambda: fake)
    monkeypatch.setattr("ptxgen.runtime.launch.tensormap.encode", _fake_encode)
    monkeypatch.setattr(bsvalidate, "synchronize", lambda what="": None)

    class FakeBuffer:
        def __init__(self, nbytes):
            self.nbytes, self.address = nbytes, mem.next
            mem.next += (nbytes + 255) // 256 * 256
            self.data = np.zeros(nbytes, np.uint8)
            mem.buffers[self.address] = self

        def upload(self, host):
            self.data[: host.nbytes] = np.ascontiguousarray(host).view(np.uint8).ravel()

        def fill_u8(self, v):
            self.data[:] = v

        def fill_u32(self, v):
            self.data.view(np.uint32)[:] = v

        def fill_u16(self, v):
            self.data.view(np.uint16)[:] = v

        def download(self, dtype, count):
            return self.data.view(dtype)[:count].copy()

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            del mem.buffers[self.address]

    class FakeKernel:
        def __init__(self, cubin, name, smem):
            assert cubin[:4] == b"\x7fELF"  # NVRTC compiled the real kernel for sm_100a
            self.spec = {sp.kernel_name: sp for sp in specs}[name]

        def unload(self):
            pass

        def launch(self, grid, block, args):
            spec = self.spec
            vals = dict(zip([q.name for q in plan_kernel(spec).abi.params], args.read_back()))
            M, N, K, ldd = vals["M"], vals["N"], vals["K"], vals["ldd"]
            vec = bsvalidate.vec_of(spec)

            def operand(name, rows):
                words = _map_words(vals[f"tmap_{name}"])
                addr, inner, outer, stride, data_type = *words[:4], words[7]
                buf, off = mem.find(addr)
                bits = {14: 4, 15: 6}.get(data_type, 8)  # the unpacking maps count 4-/6-bit elements of packed rows
                nbytes = inner * bits // 8
                g = np.stack([buf.data[off + r * stride: off + r * stride + nbytes] for r in range(outer)])
                dt = spec.operand_dtype(name).value
                if bits == 6:
                    w = g.reshape(outer, -1, 3).astype(np.uint32)
                    w = w[..., 0] | (w[..., 1] << 8) | (w[..., 2] << 16)
                    g = np.stack([(w >> (6 * i)) & 0x3F for i in range(4)], axis=-1).reshape(outer, -1)
                elif dt == "e2m1":
                    g = numerics.unpack_e2m1(g)
                vals_ = numerics.decode(g, dt)
                return vals_ if spec.operand(name).major.value == "k" else vals_.T

            def scales(ptr, rows):
                buf, off = mem.find(ptr)
                table = numerics.UE8M0 if spec.scale.dtype.value == "ue8m0" else numerics.UE4M3
                chunks = -(-K // (4 * vec)) * 4  # every chunk of the last atom: the kernel copies whole atoms
                s = np.empty((rows, chunks))
                for r in range(rows):
                    for c in range(chunks):
                        s[r, c] = table[buf.data[off + sfmodel.global_offset(r, c * vec, vec, K)]]
                if zero_fill:
                    s[:, sf_k_chunks(K, vec):] = 0.0
                return s

            a, b = operand("a", M), operand("b", N)
            kp = -(-K // (4 * vec)) * 4 * vec
            a = np.pad(a, ((0, 0), (0, kp - K)))  # TMA's zeros past K
            b = np.pad(b, ((0, 0), (0, kp - K)))
            sa = np.repeat(scales(vals["SFA"], M), vec, axis=1)
            sb = np.repeat(scales(vals["SFB"], N), vec, axis=1)
            with np.errstate(invalid="ignore"):
                d = ((a * sa) @ (b * sb).T).astype(np.float32)
            buf, off = mem.find(vals["D"])
            out = spec.out_dtype.value
            if out == "f32":
                codes, view = d, buf.data[off:].view(np.float32)
            else:  # 16-bit outputs: the epilogue's round to nearest even
                bits = d.view(np.uint32).astype(np.uint64)
                codes = (d.astype(np.float16).view(np.uint16) if out == "f16"
                         else ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16))
                view = buf.data[off: off + (len(buf.data) - off) // 2 * 2].view(np.uint16)
            for m in range(M):
                view[m * ldd: m * ldd + N] = codes[m]

    monkeypatch.setattr(bsvalidate, "Buffer", FakeBuffer)
    monkeypatch.setattr(bsvalidate, "Kernel", FakeKernel)


def _run_simulated(monkeypatch, kw, m=None, n=None, k=None, **sim):
    spec = make_spec(**kw)
    _simulated(monkeypatch, [spec], **sim)
    return bsvalidate.validate_block_scaled(spec, m, n, k, seed=0)


@pytest.mark.parametrize("kw,mnk", [(MX8, (200, 136, 424)), (NVFP4, (None, None, None)), (MXFP4, (130, 264, 200)),
                                    (dict(MX8, a="mnmajor-sw128", b="mnmajor-sw128", dtype="e5m2"), (136, 128, 296)),
                                    (dict(NVFP4, bm=256, cta_group=2, stages=3), (300, 264, 200)),
                                    (dict(MX8, b_dtype="e5m2", bn=64, b="mnmajor-sw64"), (129, 72, 136)),
                                    (dict(NVFP4, bm=256, cta_group=2, stages=3, out_dtype="bf16", epilogue="tma"), (300, 264, 200)),
                                    (dict(MX8, schedule="persistent", out_dtype="f16"), (None, None, None)),
                                    (dict(MX8, dtype="e2m3"), (200, 136, 384)),
                                    (dict(MX8, dtype="e4m3", b_dtype="e2m1", bn=256, bk=256), (None, None, None)),
                                    (dict(MX8, dtype="e2m1", b_dtype="e3m2", bn=64), (130, 72, 256))],
                         ids=["mxf8f6f4-e4m3", "mxf4nvf4-default", "mxf4", "mxf8f6f4-e5m2-mn", "mxf4nvf4-cta-pair",
                              "mxf8f6f4-e4m3xe5m2-bn64", "mxf4nvf4-pair-tmastore-bf16", "mxf8f6f4-persistent-f16",
                              "mxf8f6f4-e2m3", "mxf8f6f4-e4m3xe2m1", "mxf8f6f4-e2m1xe3m2"])
def test_runner_passes_a_kernel_that_does_what_the_layout_says(monkeypatch, kw, mnk):
    res = _run_simulated(monkeypatch, kw, *mnk)
    assert res.passed, res.verdict
    assert "NaN" in res.notes
    assert res.rel_error < (1e-6 if res.spec.out_dtype.value == "f32" else 4e-3)  # exact products; 16-bit output rounding


def test_control_runner_fails_a_permuted_scale_factor_layout(monkeypatch):
    """Whole 128-row blocks and whole atoms along K (no padding), so the permuted bytes are all scale factors: finite
    but wrong."""
    monkeypatch.setattr(bsvalidate, "sf_global_offset", _permuted_offset)
    res = _run_simulated(monkeypatch, MX8, 256, 128, 512)
    assert not res.passed and res.nonfinite == 0 and res.rel_error > 0.1, res.verdict


def test_control_runner_fails_when_nan_padding_reaches_the_mma(monkeypatch):
    """The NaN-padding question's failure mode: a kernel that does not zero the chunks past K takes the buffer's NaN."""
    res = _run_simulated(monkeypatch, MX8, 200, 136, 424, zero_fill=False)
    assert not res.passed and res.nonfinite > 0, res.verdict


def test_the_default_problem_has_scale_factor_padding():
    from ptxgen.runtime.check.vresult import default_problem

    for kw in (MX8, NVFP4):
        spec = make_spec(**kw)
        m, n, k = default_problem(spec)
        vec = bsvalidate.vec_of(spec)
        assert m % 128 and n % 128 and k % spec.bk and k % (4 * vec) and k % vec and k % 2 == 0
        assert bsvalidate.sf_padding_bytes(m, k, vec) > (128 - m % 128) * (-(-k // (4 * vec)) * 4)


# ---- the CLI ----------------------------------------------------------------------------------------------
def _cli(*args):
    return subprocess.run([sys.executable, "-m", "ptxgen", *args], capture_output=True, text=True, cwd=ROOT)


FLAGS = ("--bm", "128", "--bn", "128", "--bk", "128", "--a", "kmajor-sw128", "--b", "kmajor-sw128", "--dtype", "e4m3", "--scale", "ue8m0")


def test_validate_takes_block_scaled_specs():
    """No longer refused: without a 10.x GPU it is exit 3 (no usable GPU), not exit 2; an odd K for e2m1 is exit 2."""
    pytest.importorskip("cuda.bindings")
    from ptxgen.runtime.launch.gpu import NoGPU, require_gpu

    try:
        dev = require_gpu()
        if dev.cc[0] == 10:
            pytest.skip("a 10.x GPU is present: test_block_scaled_on_blackwell runs it")
    except NoGPU:
        pass
    r = _cli("validate", *FLAGS)
    assert r.returncode == 3 and "Traceback" not in r.stderr, r.stderr
    r = _cli("validate", "--bm", "128", "--bn", "256", "--bk", "256", "--a", "kmajor-sw128", "--b", "kmajor-sw128", "--dtype", "e2m1",
             "--scale", "ue4m3", "--k", "41")
    assert r.returncode == 2 and "K=41 is odd" in r.stderr, r.stderr


def test_validate_on_a_hopper_gpu_says_it_needs_10x(monkeypatch, capsys):
    """A block-scaled spec without --arch on a 9.0 GPU: exit 3 (this GPU cannot run it), not a usage error."""
    from ptxgen import cli
    from ptxgen.runtime.launch import gpu

    monkeypatch.setattr(gpu, "require_gpu", lambda index=0: gpu.Device(0, "Fake H200", (9, 0), None, None, 132))
    monkeypatch.setattr(sys, "argv", ["ptxgen", "validate", *FLAGS])
    try:
        rc = cli.main()
    except SystemExit as e:
        rc = e.code
    err = capsys.readouterr().err
    assert rc == 3 and "needs compute capability 10.x" in err and "sm_100a only" in err, err


def test_bench_still_refuses_block_scaled_specs():
    r = _cli("bench", *FLAGS)
    assert r.returncode == 2 and "not timed" in r.stderr


# ---- on a Blackwell GPU ------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("kw", [MX8, NVFP4, MXFP4, dict(NVFP4, bm=256, cta_group=2, stages=3), dict(MX8, dtype="e2m3", b_dtype="e2m1")],
                         ids=["mxf8f6f4", "mxf4nvf4", "mxf4", "mxf4nvf4-cta-pair", "mxf8f6f4-e2m3xe2m1"])
def test_block_scaled_on_blackwell(gpu, kw):
    if gpu.cc[0] != 10:
        pytest.skip("needs compute capability 10.x")
    res = bsvalidate.validate_block_scaled(make_spec(**kw), seed=0)
    assert res.passed, res.verdict


# ---- selftest's block-scaled steps, on the simulated device ---------------------------------------------
def _selftest_step(name_part):
    from ptxgen.runtime.check import selftest

    (st,) = [s for s in selftest.steps() if name_part in s.name]
    assert st.half == "blackwell" and st.run is not None
    return st


@pytest.mark.parametrize("zero_fill", [True, False], ids=["kernel-zeroes-padding", "control-nan-reaches-mma"])
def test_selftest_nan_padding_step(monkeypatch, zero_fill):
    from ptxgen.runtime.check import selftest

    _simulated(monkeypatch, [make_spec(**kw) for kw in (selftest.MXF8, selftest.NVFP4, selftest.NVFP4_PAIR)], zero_fill=zero_fill)
    status, detail = _selftest_step("NaN in the scale-factor padding").run()
    assert status == (selftest.PASS if zero_fill else selftest.FAIL), detail
    assert "NaN bytes inside rows past K" in detail and ("non-finite 0" in detail) == zero_fill


@pytest.mark.parametrize("what", ["GEMM e4m3 block-scaled", "unpacking loads", "kind::mxf4nvf4", "NVFP4 CTA pair"])
def test_selftest_block_scaled_gemm_steps(monkeypatch, what):
    from ptxgen.runtime.check import selftest

    _simulated(monkeypatch, [make_spec(**kw) for kw in (selftest.MXF8, selftest.MXF6F4, selftest.NVFP4, selftest.NVFP4_PAIR)])
    status, detail = _selftest_step(what).run()
    assert status == selftest.PASS, detail


@pytest.mark.parametrize("kw", [MX8, NVFP4])
def test_abi_doc_states_the_buffer_the_kernel_reads(kw):
    """The kernel header's SFA line gives CUTLASS's padding (K to 4V, as sf_k_atoms), not K to BK (issue 19 fix 2)."""
    spec = make_spec(**kw)
    vec = bsvalidate.vec_of(spec)
    (sfa,) = [q for q in plan_kernel(spec).abi.params if q.name == "SFA"]
    assert f"K to a multiple of 4V={4 * vec} (ceil(K / {4 * vec}) atoms along K" in sfa.doc and "BK" not in sfa.doc
