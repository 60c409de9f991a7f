"""Block-scaled coverage of CUTLASS's operand space (issue 19 item 3): MN-major kind::mxf8f6f4 operands.

Every legal combination builds with descriptors that agree with CuTe's (``cute_ref``, typed from the CUTLASS source),
the L1 models (read model, TMA write model, scale-factor model) agree with the writer, and the kernels compile for
sm_100a with the intended SASS; what stays illegal is refused with exit 2, naming the rule and its source.
"""

from __future__ import annotations

import pytest

import cute_ref
from ptxgen.derive.tile.layout import derive
from ptxgen.derive.tile.spec import make_spec
from ptxgen.isa.types import SpecError
from ptxgen.model.bridges import verify_scales
from ptxgen.model.bridges.verify import check_tile

MX8 = dict(bm=128, bk=128, dtype="e4m3", scale="ue8m0")


def _mn_major_space():
    out = []
    for a in ("mnmajor-sw128", "mnmajor-sw64", "mnmajor-sw32", "mnmajor-none", "kmajor-sw128"):
        for b in ("mnmajor-sw128", "mnmajor-sw64", "mnmajor-none", "kmajor-sw64"):
            if a.startswith("k") and b.startswith("k"):
                continue
            for bn in (64, 128, 192, 256):
                for order in ("mn", "k"):
                    for b_dtype in ("e4m3", "e5m2"):
                        try:
                            out.append(make_spec(**{**MX8, "bk": 128 if bn != 256 else 256}, bn=bn, a=a, b=b, a_order=order,
                                                 b_order=order, b_dtype=b_dtype))
                        except SpecError:
                            pass
    return out


MN_SPACE = _mn_major_space()


def test_mn_major_space_is_broad():
    toks = {(t.a.token, t.b.token) for t in MN_SPACE}
    assert len(MN_SPACE) > 100 and len(toks) >= 15 and {t.bn for t in MN_SPACE} == {64, 128, 192, 256}


def _swizzle_bytes(token: str) -> int:
    return {"none": 0, "sw32": 32, "sw64": 64, "sw128": 128}[token.split("-")[1]]


@pytest.mark.parametrize("t", MN_SPACE, ids=lambda t: t.kernel_name)
def test_mn_major_descriptors_are_cutes(t):
    lay = derive(t)
    want = cute_ref.instr_desc_block_scaled("mxf8f6f4", t.dtype.value, t.b_dtype.value, "ue8m0", t.bm, t.bn,
                                            t.a.major.value == "mn", t.b.major.value == "mn")
    assert lay.idesc.encode() == want, (lay.idesc.hex, hex(want))
    for name in ("a", "b"):
        op, tok = t.operand(name), t.operand(name).token
        ref = cute_ref.CuteSmemLayout(op.major.value, _swizzle_bytes(tok), t.mn_extent(name), t.bk,
                                      k_first=getattr(lay, name).order.value == "k")
        got = [s.descriptor.encode() for s in getattr(lay, name).k_steps]
        assert got == [ref.umma_desc(s.k, 32) for s in getattr(lay, name).k_steps], name


# every 7th spec of the space; a third of them in every default run, the rest in the slow tier
@pytest.mark.parametrize("t", [pytest.param(t, marks=() if i % 3 == 0 else pytest.mark.slow) for i, t in enumerate(MN_SPACE[::7])],
                         ids=lambda t: t.kernel_name)
def test_mn_major_operands_and_scales_read_back(t):
    lay = derive(t)
    assert check_tile(lay) == []  # read model vs the store table, and the TMA write model
    assert verify_scales.check_scales(lay) == []  # scale factors stay K-major: the operands' majors do not move them


def test_control_cute_reference_sees_a_wrong_lbo():
    """Control: the reference is not a copy of the writer; a K-first layout read as MN-first differs."""
    t = make_spec(**MX8, bn=128, a="mnmajor-sw64", b="mnmajor-sw64", a_order="k")
    lay = derive(t)
    wrong = cute_ref.CuteSmemLayout("mn", 64, 128, 128, k_first=False)
    assert lay.a.k_steps[0].descriptor.encode() != wrong.umma_desc(0, 32)


def test_control_transpose_bits_are_checked():
    t = make_spec(**MX8, bn=128, a="mnmajor-sw128", b="kmajor-sw128")
    want_k = cute_ref.instr_desc_block_scaled("mxf8f6f4", "e4m3", "e4m3", "ue8m0", 128, 128, False, False)
    assert derive(t).idesc.encode() != want_k and derive(t).idesc.encode() == want_k | 1 << 15


@pytest.mark.parametrize(
    "kw,flag,words",
    [
        (dict(dtype="e2m1", bk=128, a="mnmajor-sw128", b="kmajor-sw64", bn=128), "--a", "is No for .kind::mxf4"),
        (dict(dtype="e2m1", scale="ue4m3", bk=128, a="kmajor-sw64", b="mnmajor-sw128", bn=128), "--b", "is No for .kind::mxf4"),
        (dict(dtype="e4m3", bk=128, a="mnmajor-sw128b32", b="kmajor-sw128", bn=128), "--a", "128B_base32B"),
    ],
)
def test_refusals_name_their_rule(kw, flag, words):
    with pytest.raises(SpecError) as e:
        make_spec(bm=128, scale=kw.pop("scale", "ue8m0"), **kw)
    assert e.value.field == flag and words in str(e.value) and e.value.ref, str(e.value)


def test_cli_refuses_mxf4_transpose_with_exit_2(capsys):
    from ptxgen.cli import main

    rc = main(["explain", "--bm", "128", "--bn", "128", "--bk", "128", "--a", "mnmajor-sw128", "--b", "kmajor-sw64",
               "--dtype", "e2m1", "--scale", "ue8m0"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "transpose" in err and "PTX ISA" in err and "Traceback" not in err


def test_explain_names_the_transposed_operands(capsys):
    from ptxgen.cli import main

    assert main(["explain", "--bm", "128", "--bn", "128", "--bk", "128", "--a", "mnmajor-sw128", "--b", "mnmajor-sw64",
                 "--dtype", "e4m3", "--b-dtype", "e5m2", "--scale", "ue8m0"]) == 0
    out = capsys.readouterr().out
    assert "a_major            1" in out and "b_major            1" in out and "kind::mxf8f6f4" in out


# ---- L2 ---------------------------------------------------------------------------------------------------------
L2_MN = [
    dict(MX8, bn=128, a="mnmajor-sw128", b="mnmajor-sw128"),
    dict(MX8, bn=64, a="kmajor-sw128", b="mnmajor-sw64", b_dtype="e5m2", schedule="persistent"),
    dict(MX8, bn=192, a="mnmajor-none", b="mnmajor-sw64", a_order="k", b_order="k"),
]


@pytest.mark.parametrize("kw", [L2_MN[0]] + [pytest.param(k, marks=pytest.mark.slow) for k in L2_MN[1:]],
                         ids=["mn-mn", "k-mn-mixed-persistent", "n192-none-korder"])
def test_mn_major_kernels_compile_with_the_intended_sass(kw):
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda

    t = make_spec(**kw)
    c = compile_cuda(render_kernel(derive(t)), t.kernel_name, "sm_100a")
    ptx = c.ptx if isinstance(c.ptx, str) else c.ptx.decode()
    assert "kind::mxf8f6f4.block_scale.scale_vec::1X" in ptx
    rep = check_sass(t, c.cubin)
    assert rep.ok, rep.problems
    assert rep.local_bytes == 0 and rep.stack_bytes == 0


# =================================================================================================================
# fp6 (e2m3, e3m2) and fp4 (e2m1) inside kind::mxf8f6f4, and mixed A/B types
# =================================================================================================================
MX_TYPES = ("e4m3", "e5m2", "e2m3", "e3m2", "e2m1")
BITS = {"e4m3": 8, "e5m2": 8, "e2m3": 6, "e3m2": 6, "e2m1": 4}
# CUTLASS to_CUtensorMapDataType (include/cute/arch/copy_sm90_desc.hpp) for the types its builder hands TMA under an
# f8f6f4 kind (sm1xx_kernel_input_element_to_mma_input_element: float_e2m1_t -> float_e2m1_unpacksmem_t, ...), with
# cuda.h's values: UINT8 0, 16U4_ALIGN16B 14, 16U6_ALIGN16B 15.
CUTLASS_TMA_TYPE = {"e4m3": ("UINT8", 0), "e5m2": ("UINT8", 0), "e2m1": ("16U4_ALIGN16B", 14),
                    "e2m3": ("16U6_ALIGN16B", 15), "e3m2": ("16U6_ALIGN16B", 15)}


def _types_space():
    out = []
    for a in MX_TYPES:
        for b in MX_TYPES:
            if a == b == "e2m1":
                continue  # kind::mxf4 (packed), covered by test_blockscale.py
            if BITS[a] == BITS[b] == 8:
                continue  # the 8-bit pairs: test_blockscale.py and the MN-major space above
            for bn in (64, 128, 192, 256):
                for stages in (1, 2):
                    out.append(make_spec(bm=128, bn=bn, bk=128 if bn < 256 else 256, a="kmajor-sw128", b="kmajor-sw128",
                                         dtype=a, b_dtype=b, scale="ue8m0", stages=stages))
    return out


TYPES_SPACE = _types_space()


def test_types_space_is_every_pair():
    pairs = {(t.dtype.value, t.b_dtype.value) for t in TYPES_SPACE}
    assert len(pairs) == 5 * 5 - 1 - 4 and all(t.mma_kind == "mxf8f6f4" for t in TYPES_SPACE)


@pytest.mark.parametrize("t", TYPES_SPACE, ids=lambda t: t.kernel_name)
def test_subbyte_descriptors_tensor_maps_and_tx_are_cutlasss(t):
    lay = derive(t)
    want = cute_ref.instr_desc_block_scaled("mxf8f6f4", t.dtype.value, t.b_dtype.value, "ue8m0", t.bm, t.bn, False, False)
    assert lay.idesc.encode() == want, (lay.idesc.hex, hex(want))
    for name in ("a", "b"):
        op, dt = getattr(lay, name), t.operand_dtype(name).value
        # CUTLASS allocates 4-/6-bit stages as uint8_t: the uint8 K-major SW128 layout's descriptors
        ref = cute_ref.CuteSmemLayout("k", 128, t.mn_extent(name), t.bk, elem_bytes=1, k_first=op.order.value == "k")
        assert [s.descriptor.encode() for s in op.k_steps] == [ref.umma_desc(s.k, 32) for s in op.k_steps], name
        assert [s.k for s in op.k_steps] == list(range(0, t.bk, 32))  # K = 32 per MMA for every mxf8f6f4 type
        tma_name, tma_value = CUTLASS_TMA_TYPE[dt]
        assert (op.tma.data_type.cuda_name, op.tma.data_type.value) == (tma_name, tma_value), name
        # CUTLASS ABTmaTransactionBytes: cosize(SmemLayout) x sizeof_bits<Element> / 8 (Element the 4/6/8-bit type)
        assert op.tma.expect_tx_bytes == t.mn_extent(name) * t.bk * BITS[dt] // 8, name
        assert op.stage_bytes == t.mn_extent(name) * t.bk  # one byte of shared memory an element
        if BITS[dt] < 8:
            assert op.tma.box[0] == 128 and op.tma.swizzle.json_name == "128B"  # cuTensorMapEncodeTiled: boxDim[0] 128


# every 3rd spec of the space; a third of them in every default run, the rest in the slow tier
@pytest.mark.parametrize("t", [pytest.param(t, marks=() if i % 3 == 0 else pytest.mark.slow) for i, t in enumerate(TYPES_SPACE[::3])],
                         ids=lambda t: t.kernel_name)
def test_subbyte_operands_and_scales_read_back(t):
    lay = derive(t)
    assert check_tile(lay) == []  # TMA unpacking model -> read model, whole and partial tiles, first and last stage
    assert verify_scales.check_scales(lay) == []


def _json(a="e2m3", b="e2m1", bn=64):
    return derive(make_spec(bm=128, bn=bn, bk=128, a="kmajor-sw128", b="kmajor-sw128", dtype=a, b_dtype=b,
                            scale="ue8m0")).to_json()


def test_control_a_reader_taking_one_element_per_byte_fails():
    """The brief's first guess ('unpacked, one byte per element') read back against TMA's real form: it misreads."""
    import numpy as np

    from ptxgen.model.bridges.verify import check_operand_tma

    tj = _json()
    assert check_operand_tma(tj, "a", np.random.default_rng(1)) == []
    tj["a"]["smem_element"] = "e4m3"  # the read model takes each byte as one element
    assert check_operand_tma(tj, "a", np.random.default_rng(1))


def test_control_the_wrong_unpacking_type_fails():
    """A 4-bit operand loaded with the 6-bit unpacking type (12-byte chunks) is misread."""
    import numpy as np

    from ptxgen.model.bridges.verify import check_operand_tma

    tj = _json()
    assert tj["b"]["tma"]["data_type"] == "16U4_ALIGN16B" and check_operand_tma(tj, "b", np.random.default_rng(2)) == []
    tj["b"]["tma"]["data_type"] = "16U6_ALIGN16B"
    assert check_operand_tma(tj, "b", np.random.default_rng(2))


def test_control_a_byte_map_of_packed_rows_fails():
    """A UINT8 map (no data_type: bytes copied as they are) over the packed global rows is caught."""
    import numpy as np

    from ptxgen.model.bridges.verify import check_operand_tma

    tj = _json()
    del tj["a"]["tma"]["data_type"]
    assert check_operand_tma(tj, "a", np.random.default_rng(3))


def test_control_padding_is_never_read():
    """Garbage in every gap byte changes nothing the read model returns; garbage in a packed byte does."""
    import numpy as np

    from ptxgen.model.layouts import readmodel

    lay = derive(make_spec(bm=128, bn=64, bk=128, a="kmajor-sw128", b="kmajor-sw128", dtype="e3m2", b_dtype="e4m3",
                           scale="ue8m0"))
    op = lay.a
    rng = np.random.default_rng(4)
    img = rng.integers(0, 256, size=op.ring_offset_bytes + op.stage_bytes, dtype=np.uint8)
    d = op.descriptor(0).encode()
    got = readmodel.read("sm_100a", d, "k", 128, "e3m2_unpacksmem", img)
    gaps = img.copy()
    base = op.ring_offset_bytes
    cells = np.arange(base, base + op.stage_bytes, 16)
    for off in range(12, 16):
        gaps[cells + off] ^= 0xFF
    assert np.array_equal(readmodel.read("sm_100a", d, "k", 128, "e3m2_unpacksmem", gaps), got)
    data = img.copy()
    data[cells + 5] ^= 0xFF
    assert not np.array_equal(readmodel.read("sm_100a", d, "k", 128, "e3m2_unpacksmem", data), got)


def test_read_model_refuses_transposed_subbyte():
    from ptxgen.model.layouts import readmodel

    with pytest.raises(readmodel.Unmodelled):
        readmodel.canonical_addresses("sm_100a", 0x4000004000010000, "mn", 128, "e2m3_unpacksmem")


@pytest.mark.parametrize(
    "kw,flag,words",
    [
        (dict(dtype="e2m3", a="mnmajor-sw128"), "--a", "Major value of 1 is only valid"),
        (dict(dtype="e4m3", b_dtype="e3m2", b="mnmajor-sw128"), "--b", "K-major only"),
        (dict(dtype="e2m3", a="kmajor-sw64"), "--a", "16U6_ALIGN16B"),
        (dict(dtype="e4m3", b_dtype="e2m1", b="kmajor-none"), "--b", "boxDim[0] must be 128"),
        (dict(dtype="e2m3", scale="ue4m3"), "--dtype", "takes ue8m0"),
        (dict(dtype="e2m1", b_dtype="e4m3", scale="ue4m3"), "--b-dtype", "e2m1 only"),
    ],
)
def test_subbyte_refusals_name_their_rule(kw, flag, words):
    base = dict(bm=128, bn=128, bk=128, a="kmajor-sw128", b="kmajor-sw128", scale="ue8m0")
    with pytest.raises(SpecError) as e:
        make_spec(**{**base, **kw})
    assert e.value.field == flag and words in str(e.value) and e.value.ref, str(e.value)


def test_cli_refuses_transposed_fp6_with_exit_2(capsys):
    from ptxgen.cli import main

    rc = main(["build", "--bm", "128", "--bn", "128", "--bk", "128", "--a", "mnmajor-sw128", "--b", "kmajor-sw128",
               "--dtype", "e3m2", "--scale", "ue8m0"])
    err = capsys.readouterr().err
    assert rc == 2 and "mma_sm100_desc.hpp" in err and "Traceback" not in err


def test_explain_and_show_describe_the_unpacked_types(capsys, tmp_path):
    from ptxgen.cli import main

    args = ["--bm", "128", "--bn", "64", "--bk", "128", "--a", "kmajor-sw128", "--b", "kmajor-sw128", "--dtype", "e2m3",
            "--b-dtype", "e2m1", "--scale", "ue8m0"]
    assert main(["explain", *args]) == 0
    out = capsys.readouterr().out
    assert "16 e2m3 packed in 12 B + 4 B of padding per 16-B cell" in out
    assert "16 e2m1 packed in 8 B + 8 B of padding per 16-B cell" in out
    assert "CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B" in out and "CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B" in out
    svg = tmp_path / "l.svg"
    assert main(["show", *args, "--svg", str(svg)]) == 0
    text = svg.read_text()
    assert "unpacked: 16 packed in 12 B + 4 B padding" in text and "unpacked: 16 packed in 8 B + 8 B padding" in text


L2_TYPES = [
    dict(dtype="e2m3", b_dtype="e2m3", bn=128),
    dict(dtype="e4m3", b_dtype="e2m1", bn=256, bk=256, schedule="persistent"),
    dict(dtype="e2m1", b_dtype="e3m2", bn=64),
]


def _types_spec(kw):
    return make_spec(**{**dict(bm=128, bk=128, a="kmajor-sw128", b="kmajor-sw128", scale="ue8m0"), **kw})


@pytest.mark.parametrize("kw", [L2_TYPES[0]] + [pytest.param(k, marks=pytest.mark.slow) for k in L2_TYPES[1:]],
                         ids=["fp6", "fp8xfp4-persistent", "fp4xfp6-n64"])
def test_subbyte_kernels_compile_with_the_intended_sass(kw):
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda

    t = _types_spec(kw)
    lay = derive(t)
    src = render_kernel(lay)
    c = compile_cuda(src, t.kernel_name, "sm_100a")
    ptx = c.ptx if isinstance(c.ptx, str) else c.ptx.decode()
    assert "kind::mxf8f6f4.block_scale.scale_vec::1X" in ptx
    rep = check_sass(t, c.cubin)
    assert rep.ok, rep.problems
    assert rep.local_bytes == 0 and rep.stack_bytes == 0
    # the full barrier expects the packed bytes (CUTLASS's count), not the padded stage bytes
    assert f"mbar_arrive_expect_tx(full, {lay.a.tma.expect_tx_bytes + lay.b.tma.expect_tx_bytes}u" in src


@pytest.mark.slow
def test_subbyte_kernels_pass_the_sass_gate_under_the_oldest_nvrtc(tmp_path):
    """L2 under CUDA 12.8's NVRTC too (tests/test_toolchains.py's toolchain; skips where it is not installed)."""
    from ptxgen.runtime.compile import toolchains

    tc = next((x for x in toolchains.installed() if x.name == toolchains.OLDEST), None)
    if tc is None:
        pytest.skip(f"NVRTC {toolchains.OLDEST} not installed (${toolchains.ENV})")
    specs = [_types_spec(kw) for kw in L2_TYPES] + [make_spec(**L2_MN[0])]
    results = toolchains.compile_and_check(tc, specs, tmp_path)
    assert {r.kernel: r.problems for r in results if r.problems} == {}
    assert all(r.local_instructions == 0 and r.stack_bytes == 0 for r in results)


def test_validate_states_the_unpacking_maps_rules_before_the_gpu():
    """The runner takes 6-/4-bit mxf8f6f4 operands (tests/test_bsrunner.py); the unpacking maps' rules (K and the row
    stride multiples of 128 elements) are problem errors, named before any GPU work (exit 2 in the CLI)."""
    from ptxgen.runtime.launch.launch import Problem, problem_errors

    spec = _types_spec(L2_TYPES[2])
    assert problem_errors(spec, Problem.padded(spec, 200, 136, 384)) == []
    errs = problem_errors(spec, Problem.padded(spec, 200, 136, 424))
    assert len(errs) == 2 and all("unpacking tensor map" in e and "multiple of 128" in e for e in errs)
