"""Block-scaled coverage of CUTLASS's operand space (issue 19 item 3): MN-major kind::mxf8f6f4 operands.

Every legal combination builds with descriptors that agree with CuTe's (``cute_ref``, typed from the CUTLASS source),
the L1 models (read model, TMA write model, scale-factor model) agree with the writer, and the kernels compile for
sm_100a with the intended SASS; what stays illegal is refused with exit 2, naming the rule and its source.
"""

from __future__ import annotations

import pytest

import cute_ref
from ptxgen.derive.layout import derive
from ptxgen.derive.spec import make_spec
from ptxgen.isa.types import SpecError
from ptxgen.model import verify_scales
from ptxgen.model.verify import check_tile

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


@pytest.mark.parametrize("t", MN_SPACE[::7], ids=lambda t: t.kernel_name)
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


@pytest.mark.parametrize("kw", L2_MN, ids=["mn-mn", "k-mn-mixed-persistent", "n192-none-korder"])
def test_mn_major_kernels_compile_with_the_intended_sass(kw):
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.sass import check_sass
    from ptxgen.runtime.toolchain import compile_cuda

    t = make_spec(**kw)
    c = compile_cuda(render_kernel(derive(t)), t.kernel_name, "sm_100a")
    ptx = c.ptx if isinstance(c.ptx, str) else c.ptx.decode()
    assert "kind::mxf8f6f4.block_scale.scale_vec::1X" in ptx
    rep = check_sass(t, c.cubin)
    assert rep.ok, rep.problems
    assert rep.local_bytes == 0 and rep.stack_bytes == 0
