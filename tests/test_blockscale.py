"""Block-scaled tcgen05 kinds (mxf8f6f4, mxf4, mxf4nvf4): ISA facts against CuTe/PTX/OCP values, the spec rules,
the L1 scale-factor model against the writer over the legal space (with controls), and L2 codegen."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptxgen.derive.scaled import sf_atoms
from ptxgen.derive.tile.layout import derive
from ptxgen.derive.tile.rules_scaled import BLOCK_SCALED_BN
from ptxgen.derive.tile.spec import make_spec
from ptxgen.isa import numerics
from ptxgen.isa.blockscale import GENERATED, IDESC_BS_TABLES, kind_of
from ptxgen.isa.idesc import BlockScaledInstrDescriptor, lint_block_scaled_idesc
from ptxgen.isa.types import DType, SpecError
from ptxgen.model.numerics import sfmodel
from ptxgen.model.bridges import verify_scales
from ptxgen.model.bridges.verify import check_tile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MX8 = dict(bm=128, bn=128, bk=128, a="kmajor-sw128", b="kmajor-sw128", dtype="e4m3", scale="ue8m0")
MXF4 = dict(bm=128, bn=64, bk=128, a="kmajor-sw64", b="kmajor-sw64", dtype="e2m1", scale="ue8m0")
NVF4 = dict(bm=128, bn=256, bk=256, a="kmajor-sw128", b="kmajor-sw128", dtype="e2m1", scale="ue4m3", stages=3)


# ---- ISA: instruction descriptors ------------------------------------------------------------------------------
# CuTe host runs of make_instr_desc_block_scaled (/work/shared/reference/descriptors.md section 4.2):
#   mxf8f6f4 e4m3, ue8m0, M=128 N=128 -> 0x08a00000; M=256 N=256 -> 0x10c00000; mxf4nvf4 e2m1 ue4m3 M=128 N=128 -> 0x08200480
@pytest.mark.parametrize(
    "args,value",
    [
        (("mxf8f6f4", 128, 128, "e4m3", "e4m3", "ue8m0"), 0x08A00000),
        (("mxf8f6f4", 256, 256, "e4m3", "e4m3", "ue8m0"), 0x10C00000),
        (("mxf4nvf4", 128, 128, "e2m1", "e2m1", "ue4m3"), 0x08200480),
    ],
)
def test_block_scaled_idesc_matches_cute(args, value):
    assert BlockScaledInstrDescriptor(*args).encode() == value
    assert lint_block_scaled_idesc(value, args[0]).valid


def test_sf_id_bits_are_where_cutlass_puts_them():
    # CUTLASS InstrDescriptorBlockScaled: b_sf_id_ bits [4,6), a_sf_id_ bits [29,31) (mma_sm100_desc.hpp)
    d = BlockScaledInstrDescriptor("mxf8f6f4", 128, 128, "e4m3", "e5m2", "ue8m0", a_sf_id=3, b_sf_id=2)
    assert d.encode() == 0x08A00000 | (3 << 29) | (2 << 4) | (1 << 10)


@given(kind=st.sampled_from(["mxf8f6f4", "mxf4", "mxf4nvf4"]), raw=st.integers(0, 2**32 - 1))
@settings(max_examples=300, deadline=None)
def test_block_scaled_bit_tables_round_trip(kind, raw):
    t = IDESC_BS_TABLES[kind]
    f = t.decode(raw)
    assert t.encode(**f) == raw & t.covered_mask
    assert t.covered_mask == 0xFFFFFFFF  # every bit of the word is declared (reserved ones included)


@pytest.mark.parametrize(
    "raw,kind,needle",
    [
        (0x08200480 | (1 << 29), "mxf4nvf4", "scale factor A ID 1"),  # 4X: SF ID must be 0
        (0x08200480 | (1 << 12), "mxf4nvf4", "reserved bit(s) 12"),
        (0x08200480 | (1 << 15), "mxf4nvf4", "cannot transpose"),
        (0x08A00000 & ~(1 << 23), "mxf8f6f4", "scale type ue4m3 is not legal for kind::mxf8f6f4"),
        (0x08A00000 | (1 << 31), "mxf8f6f4", "reserved bit(s) 31"),
        (0x04A00000, "mxf8f6f4", "reserved bit(s) 24-26"),  # CUTLASS's M=64 would be M>>4 = 4 at bit 26
    ],
)
def test_block_scaled_lint_names_the_problem(raw, kind, needle):
    rep = lint_block_scaled_idesc(raw, kind)
    assert not rep.valid and any(needle in p for p in rep.problems), rep.problems


def test_decode_cli_block_scaled(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    ok = subprocess.run([sys.executable, "-m", "ptxgen", "decode", "--idesc", "0x08200480", "--kind", "mxf4nvf4", "--json"],
                        capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stderr
    j = json.loads(ok.stdout)
    assert (j["scale_dtype"], j["a_dtype"], j["m"], j["n"], j["valid"]) == ("ue4m3", "e2m1", 128, 128, True)
    bad = subprocess.run([sys.executable, "-m", "ptxgen", "decode", "--idesc", "0x28200480", "--kind", "mxf4nvf4"],
                         capture_output=True, text=True, env=env)
    assert bad.returncode == 1 and "scale factor A ID 1" in bad.stdout


def test_kinds_and_k_per_mma():
    # PTX Table 55 and the shapes table: mxf8f6f4 K=32 one SF (1X, V=32); mxf4 K=64 two (2X, V=32); mxf4nvf4 ue4m3 K=64 four (4X, V=16)
    assert [(k.kind, k.k_per_mma, k.vec_elements, k.sfs_per_mma, k.scale_vec) for k in
            (kind_of(DType.E4M3, DType.UE8M0), kind_of(DType.E2M1, DType.UE8M0), kind_of(DType.E2M1, DType.UE4M3))] == [
        ("mxf8f6f4", 32, 32, 1, "scale_vec::1X"), ("mxf4", 64, 32, 2, "scale_vec::2X"), ("mxf4nvf4", 64, 16, 4, "scale_vec::4X")]
    assert DType.E2M1.k_per_mma == 64 and DType.E2M1.per_cell == 32 and DType.E2M1.bytes_of(128) == 64
    with pytest.raises(ValueError):
        DType.E2M1.bytes  # half a byte: every user must ask container_bits


# ---- numerics: values typed from the OCP Microscaling Formats (MX) v1.0 spec, not from the code --------------------
def test_e2m1_table_is_the_ocp_one():
    # OCP MX v1.0, FP4 E2M1: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives (codes 8..15)
    want = [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert numerics.E2M1[:8].tolist() == want
    assert numerics.E2M1[8:].tolist() == [-x for x in want]


def test_fp6_and_scale_tables():
    # OCP MX v1.0: E2M3 max normal 7.5, min subnormal 0.125; E3M2 max 28, min subnormal 0.0625; no inf/NaN
    assert numerics.E2M3.max() == 7.5 and numerics.E2M3[1] == 0.125 and np.isfinite(numerics.E2M3).all()
    assert numerics.E3M2.max() == 28.0 and numerics.E3M2[1] == 0.0625 and np.isfinite(numerics.E3M2).all()
    assert numerics.E2M3[0b001000] == 1.0 and numerics.E3M2[0b001100] == 1.0
    # E8M0: 2^(x - 127), 0xFF NaN; exponents -127..127
    assert numerics.UE8M0[127] == 1.0 and numerics.UE8M0[0] == 2.0**-127 and numerics.UE8M0[254] == 2.0**127
    assert np.isnan(numerics.UE8M0[255])
    # UE4M3 (NVFP4 scale): e4m3 magnitudes: 0x7E = 448, 0x08 = 2^-6 (min normal), 0x01 = 2^-9; 0x7F NaN
    assert numerics.UE4M3[0x7E] == 448.0 and numerics.UE4M3[0x08] == 2.0**-6 and numerics.UE4M3[0x01] == 2.0**-9
    assert np.isnan(numerics.UE4M3[0x7F]) and np.isnan(numerics.UE4M3[0x80])


def test_pack_e2m1_low_nibble_first_and_round_trip():
    codes = np.array([[1, 2, 15, 0]], dtype=np.uint8)
    assert numerics.pack_e2m1(codes).tolist() == [[0x21, 0x0F]]
    rng = np.random.default_rng(1)
    c = rng.integers(0, 16, size=(5, 64)).astype(np.uint8)
    assert np.array_equal(numerics.unpack_e2m1(numerics.pack_e2m1(c)), c)


def test_encode_nearest_rounds_to_representable_values():
    assert numerics.decode(numerics.encode_nearest(np.array([0.3, 2.4, 5.5, -7.0]), "e2m1"), "e2m1").tolist() == [0.5, 2.0, 6.0, -6.0]


def test_block_scaled_reference_is_the_scaled_sum():
    rng = np.random.default_rng(0)
    M, N, K, V = 3, 4, 64, 16
    a = numerics.decode(numerics.random_codes("e2m1", (M, K), rng), "e2m1")
    b = numerics.decode(numerics.random_codes("e2m1", (N, K), rng), "e2m1")
    sa = numerics.decode(numerics.random_codes("ue4m3", (M, K // V), rng), "ue4m3")
    sb = numerics.decode(numerics.random_codes("ue4m3", (N, K // V), rng), "ue4m3")
    d = numerics.block_scaled_reference(a, sa, b, sb, V)
    for m in range(M):
        for n in range(N):
            want = sum(a[m, k] * sa[m, k // V] * b[n, k] * sb[n, k // V] for k in range(K))
            assert d[m, n] == pytest.approx(want, rel=1e-12)
    # a wrong vector size gives a different answer (the reference really applies per-chunk scales)
    assert not np.allclose(d, numerics.block_scaled_reference(a, np.repeat(sa, 2, axis=1)[:, : K // 32], b, sb, 32))


# ---- the spec --------------------------------------------------------------------------------------------------
def test_scale_picks_the_kind_and_names():
    t = make_spec(**MX8)
    assert t.mma_kind == "mxf8f6f4" and "_sfue8m0_" in t.kernel_name and "--scale ue8m0" in t.cli_args()
    assert make_spec(**NVF4).mma_kind == "mxf4nvf4" and make_spec(**MXF4).mma_kind == "mxf4"
    assert make_spec(**{**MX8, "b_dtype": "e5m2"}).b_dtype is DType.E5M2
    # dense specs are untouched: no scale key, no name token
    dense = make_spec(bm=128, bn=128, bk=32, a="kmajor-sw64")
    assert "scale" not in dense.to_json() and "_sf" not in dense.kernel_name and "--scale" not in dense.cli_args()
    assert dense.tmem_alloc_columns == 128  # one 128-column accumulator: one tile per CTA (issue 19, fix 4)


@pytest.mark.parametrize(
    "change,flag",
    [
        (dict(dtype="e2m1", scale="none"), "--dtype"),
        (dict(dtype="e2m3", scale="ue4m3"), "--dtype"),  # e2m3 takes ue8m0 (kind::mxf8f6f4) only
        (dict(dtype="e4m3", scale="ue4m3"), "--dtype"),
        (dict(dtype="f16"), "--dtype"),
        (dict(arch="sm_90a"), "--scale"),
        (dict(bm=64), "--bm"),
        (dict(bn=96), "--bn"),
        (dict(bn=32), "--bn"),
        (dict(bn=160), "--bn"),  # 192 is legal since issue 19 (CUTLASS handles it as 256 for SFB)
        (dict(bk=64), "--bk"),
        (dict(dtype="e2m1", a="mnmajor-sw128"), "--a"),  # mxf4 cannot transpose; mxf8f6f4 8-bit MN-major is legal
        (dict(acc="f16"), "--acc"),
        (dict(loader="cp.async"), "--loader"),
        (dict(dtype="e2m1", b_dtype="e4m3", scale="ue4m3", a="kmajor-sw64", b="kmajor-sw64"), "--b-dtype"),  # ue8m0: mxf8f6f4
        (dict(stages=16), "--stages"),
    ],
)
def test_illegal_block_scaled_specs_name_their_flag(change, flag):
    with pytest.raises(SpecError) as e:
        make_spec(**{**MX8, **change})
    assert e.value.field == flag, str(e.value)


def _legal_space():
    """Every legal block-scaled spec over the four (dtype, scale) pairs, BN, two BKs and 1..3 stages."""
    out = []
    for (dt, sc), k in GENERATED.items():
        for bn in BLOCK_SCALED_BN:
            for bk in (4 * k.vec_elements, 8 * k.vec_elements):
                for stages in (1, 2, 3):
                    for swz in ("sw128", "sw64", "none"):
                        try:
                            out.append(make_spec(bm=128, bn=bn, bk=bk, a=f"kmajor-{swz}", b=f"kmajor-{swz}", dtype=dt.value,
                                                 scale=sc.value, stages=stages))
                        except SpecError:
                            pass
    return out


LEGAL = _legal_space()


def test_legal_space_is_not_empty():
    kinds = {t.mma_kind for t in LEGAL}
    assert kinds == {"mxf8f6f4", "mxf4", "mxf4nvf4"} and len(LEGAL) > 60


# ---- L1: the scale-factor model against the writer ---------------------------------------------------------------
def test_global_layout_two_transcriptions_agree_and_match_cute_values():
    # Hand-evaluated CuTe SfKMajorAtom ((32,4),(32,4)):((16,4),(0,1)) tiled K first (V=32, K=256: 2 atoms along K)
    cases = {(1, 0): 16, (32, 0): 4, (0, 1): 1, (0, 4): 512, (128, 0): 1024, (33, 3): 16 + 4 + 3, (127, 7): 16 * 31 + 12 + 512 + 3}
    for (row, chunk), want in cases.items():
        assert sf_atoms.sf_global_offset(row, chunk, sf_atoms.sf_k_atoms(256, 32)) == want
        assert sfmodel.global_offset(row, chunk * 32, 32, 256) == want
    for vec in (16, 32):
        for row in range(0, 300, 7):
            for chunk in range(0, 24):
                assert sf_atoms.sf_global_offset(row, chunk, sf_atoms.sf_k_atoms(24 * vec, vec)) == \
                    sfmodel.global_offset(row, chunk * vec, vec, 24 * vec)


# The whole space takes minutes on 2 cores (slow tier); every default run checks one spec of each (kind, N) and of each
# (kind, swizzle, stage count).
_FIRST = {}
for _t in LEGAL:
    _FIRST.setdefault((_t.mma_kind, _t.bn), _t)
    _FIRST.setdefault((_t.mma_kind, _t.a.swizzle, _t.stages), _t)
LEGAL_SAMPLE = {t.kernel_name for t in _FIRST.values()}


@pytest.mark.parametrize("t", [pytest.param(t, marks=() if t.kernel_name in LEGAL_SAMPLE else pytest.mark.slow) for t in LEGAL],
                         ids=lambda t: t.kernel_name)
def test_scale_factors_reach_the_right_elements_over_the_legal_space(t):
    lay = derive(t)
    assert verify_scales.check_scales(lay) == []


@pytest.mark.parametrize("t", [t for t in LEGAL if t.stages == 2], ids=lambda t: t.kernel_name)
def test_packed_and_8bit_operands_read_back(t):
    assert check_tile(derive(t)) == []


def test_control_wrong_sf_ids_fail():
    lay = derive(make_spec(**MX8))
    p = lay.scales
    wrong = dataclasses.replace(p, steps=tuple(dataclasses.replace(s, idesc=s.idesc.with_sf_ids(0, 0)) for s in p.steps))
    assert any("wrong factor" in m for m in verify_scales.check_scales(lay, wrong))


def test_control_misaligned_sf_id_fails():
    lay = derive(make_spec(**MXF4))
    p = lay.scales
    wrong = dataclasses.replace(p, steps=tuple(dataclasses.replace(s, idesc=s.idesc.with_sf_ids(1, 1)) for s in p.steps))
    assert any("not aligned" in m for m in verify_scales.check_scales(lay, wrong))


def test_control_swapped_sfb_blocks_fail():
    lay = derive(make_spec(**NVF4))
    p = lay.scales
    b = p.b
    swapped = tuple(dataclasses.replace(c, column=c.column ^ 4) for c in b.tmem_copies)  # block 0 <-> block 1
    wrong = dataclasses.replace(p, b=dataclasses.replace(b, tmem_copies=swapped))
    assert any("B:" in m and "wrong factor" in m for m in verify_scales.check_scales(lay, wrong))


def test_control_m_first_global_tiling_fails(monkeypatch):
    """A writer that tiles the global atoms M first (not CUTLASS's K first) is caught."""
    lay = derive(make_spec(**MX8))

    def m_first(plan, name, row0, kt, k_atoms, rows=None):
        op = plan.operand(name)
        rows_atoms = 4
        return tuple((c.smem_offset_bytes, 512 * ((kt * op.groups) * rows_atoms + row0 // 128 + c.block), c.nbytes) for c in op.copies)

    monkeypatch.setattr(verify_scales, "stage_copy_sources", m_first)
    assert any("wrong factor" in m for m in verify_scales.check_scales(lay))


def test_control_missing_in_atom_offset_for_narrow_tiles_fails(monkeypatch):
    lay = derive(make_spec(**MXF4))  # BN = 64: odd tiles start at row 64 of an atom
    monkeypatch.setattr(verify_scales, "sfb_row_column", lambda n0, bn: 0)
    assert any("B:" in m for m in verify_scales.check_scales(lay))


def test_control_a_cp_over_the_accumulator_is_flagged():
    lay = derive(make_spec(**MX8))
    p = lay.scales
    wrong = dataclasses.replace(p, a=dataclasses.replace(p.a, tmem_copies=tuple(
        dataclasses.replace(c, column=c.column - 600) for c in p.a.tmem_copies)))
    assert any("outside the scale-factor region" in m for m in verify_scales.check_scales(lay, wrong))


def test_model_rejects_missing_partition_duplication():
    tm = sfmodel.Tmem({})
    smem = {i: i for i in range(512)}
    sfmodel.tcgen05_cp_32x128b_warpx4(tm, 0, 0, smem)
    assert sfmodel.mma_reads(tm, 0, 0, 1, 128)[1] == []
    del tm.cells[(32 * 3 + 5, 0, 0)]  # partition 3 lost row 5's word
    assert any("partitions" in m for m in sfmodel.mma_reads(tm, 0, 0, 1, 128)[1])


def test_explain_json_carries_the_scale_plan():
    j = derive(make_spec(**NVF4)).to_json()
    s = j["scales"]
    assert s["kind"] == "mxf4nvf4" and s["vec_elements"] == 16 and s["sfs_per_mma"] == 4
    assert s["tcgen05_cp"] == "tcgen05.cp.cta_group::1.32x128b.warpx4"
    assert [x["sf_id"] for x in s["steps"]] == [0, 0, 0, 0] and [x["a_column"] for x in s["steps"]] == [0, 4, 8, 12]
    assert j["idesc"]["kind"] == "mxf4nvf4" and j["idesc"]["hex"] == "0x08400480"
    # the SF smem descriptor: no swizzle, SBO 128 B, version 1 (DeepGEMM make_sf_desc: SBO field 8, bit 46)
    assert int(s["cp_desc_hex"], 16) == (8 << 32) | (1 << 46)


# ---- L2: codegen -----------------------------------------------------------------------------------------------
CODEGEN = [MX8, MXF4, NVF4, dict(MX8, bn=64, b_dtype="e5m2", schedule="persistent")]


@pytest.mark.parametrize("kw", CODEGEN, ids=["mxf8f6f4", "mxf4", "mxf4nvf4", "mxf8f6f4-mixed-persistent"])
def test_block_scaled_kernels_compile_and_pass_the_sass_check(kw):
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda

    t = make_spec(**kw)
    src = render_kernel(derive(t))
    c = compile_cuda(src, t.kernel_name, "sm_100a")
    ptx = c.ptx if isinstance(c.ptx, str) else c.ptx.decode()
    k = kind_of(t.dtype, t.scale.dtype)
    assert f"kind::{k.kind}.block_scale.{k.scale_vec}" in ptx
    assert "tcgen05.cp.cta_group::1.32x128b.warpx4" in ptx and "cp.async.bulk.shared::cluster.global" in ptx
    rep = check_sass(t, c.cubin)
    assert rep.ok, rep.problems
    assert rep.structure["tcgen05.cp"] == len(derive(t).scales.a.tmem_copies) + len(derive(t).scales.b.tmem_copies)
    assert rep.local_bytes == 0 and rep.stack_bytes == 0


def test_sass_check_catches_a_dense_kernel_posing_as_block_scaled():
    """Control: a dense e4m3 kernel's cubin checked as the block-scaled spec fails (no scale operands, no UTCCP)."""
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda

    dense = make_spec(**{**MX8, "scale": "none"})
    c = compile_cuda(render_kernel(derive(dense)), dense.kernel_name, "sm_100a")
    rep = check_sass(make_spec(**MX8), c.cubin)
    assert not rep.ok and any("not block-scaled" in p for p in rep.problems)


def _nvcc():
    try:
        from ptxgen.runtime.compile.toolchain import tool

        return str(tool("nvcc"))
    except Exception:
        import shutil

        return shutil.which("nvcc")


@pytest.mark.parametrize("kw", [MX8, NVF4], ids=["mxf8f6f4", "mxf4nvf4"])
def test_independent_nvcc_compiles_block_scaled_kernels(kw, tmp_path):
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.sass import check_sass

    nvcc = _nvcc()
    if not nvcc:
        pytest.skip("nvcc not installed (pip install nvidia-cuda-nvcc)")
    t = make_spec(**kw)
    cu = tmp_path / "k.cu"
    cu.write_text(render_kernel(derive(t)))
    cubin = tmp_path / "k.cubin"
    proc = subprocess.run([nvcc, "-gencode=arch=compute_100a,code=sm_100a", "-cubin", "-o", str(cubin), str(cu)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    rep = check_sass(t, cubin.read_bytes())
    assert rep.ok, rep.problems


# ---- explain, show, refusals ----------------------------------------------------------------------------------------
def _cli(*argv):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "ptxgen", *argv], capture_output=True, text=True, env=env)


SPEC_FLAGS = ["--bm", "128", "--bn", "128", "--bk", "128", "--a", "kmajor-sw128", "--b", "kmajor-sw128", "--dtype", "e4m3",
              "--scale", "ue8m0"]


def test_explain_text_has_the_block_scaling_section():
    from ptxgen.derive.tile.explain import explain_text

    text = explain_text(derive(make_spec(**MXF4)))
    assert "kind::mxf4.block_scale.scale_vec::2X" in text.splitlines()[0]
    for needle in ("Block scaling", "sf_global_layout", "sfb_tmem", "sf_step[1]", "SF ID 2", "tcgen05.cp.cta_group::1.32x128b.warpx4"):
        assert needle in text, needle


def test_show_draws_the_scale_factor_atom(tmp_path):
    import xml.etree.ElementTree as ET

    out = tmp_path / "s.svg"
    proc = _cli("show", *SPEC_FLAGS, "--svg", str(out))
    assert proc.returncode == 0, proc.stderr
    svg = out.read_text()
    ET.fromstring(svg.split("\n", 1)[1])  # well-formed
    assert "Scale factors: tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X" in svg
    # byte j of word w in lane r0 holds row r0 + 32 w, chunk j: lane 5, column +2 shows r69 c3
    assert ">r69 c3<" in svg and "SF ID 3" in svg


def test_show_of_a_dense_spec_has_no_scale_panel():
    proc = _cli("show", "--bm", "128", "--bn", "128", "--bk", "32", "--a", "kmajor-sw64")
    assert proc.returncode == 0 and "Scale factors" not in proc.stdout


def test_bench_refuses_block_scaled_specs():
    """ptxgen validate runs block-scaled kernels (tests/test_bsrunner.py); bench does not time them."""
    proc = _cli("bench", *SPEC_FLAGS)
    assert proc.returncode == 2 and "not timed" in proc.stderr


def test_launcher_takes_block_scaled_specs():
    from ptxgen.runtime.launch.launch import Problem, problem_errors

    assert problem_errors(make_spec(**MX8), Problem(256, 256, 256, 256, 256, 256)) == []


def test_build_cli_writes_a_block_scaled_kernel(tmp_path):
    proc = _cli("build", "--bm", "128", "--bn", "256", "--bk", "256", "--a", "kmajor-sw128", "--b", "kmajor-sw128",
                "--dtype", "e2m1", "--scale", "ue4m3", "--stages", "3", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    (d,) = list(tmp_path.iterdir())
    ptx = (d / "kernel.ptx").read_text()
    assert "block_scale" in ptx and "tcgen05.cp" in ptx
    assert "L2 only" in (d / "kernel.cu").read_text()
    assert json.loads((d / "layout.json").read_text())["scales"]["kind"] == "mxf4nvf4"


def test_control_packed_e2m1_tma_box_counted_in_elements_fails():
    """The e2m1 tensor map counts bytes; a box counted in elements (twice as wide) is caught by the read-back."""
    from ptxgen.model.bridges.verify import check_operand_tma

    tj = derive(make_spec(**MXF4)).to_json()
    assert check_operand_tma(tj, "a", np.random.default_rng(0)) == []
    tj["a"]["tma"]["box"][0] *= 2
    assert check_operand_tma(tj, "a", np.random.default_rng(0))


def test_control_packed_e2m1_nibble_order_is_checked():
    """Swapping the nibbles of the stage image changes what the read model returns for e2m1 rows."""
    from ptxgen.model.layouts import readmodel

    t = derive(make_spec(**MXF4))
    op = t.a
    rng = np.random.default_rng(3)
    img = rng.integers(0, 256, size=op.ring_offset_bytes + op.stage_bytes, dtype=np.uint8)
    d = op.descriptor(0).encode()
    got = readmodel.read("sm_100a", d, "k", 128, "e2m1", img)
    swapped = ((img >> 4) | (img << 4)).astype(np.uint8)
    got2 = readmodel.read("sm_100a", d, "k", 128, "e2m1", swapped)
    assert np.array_equal(got[:, 0::2], got2[:, 1::2]) and not np.array_equal(got, got2)
