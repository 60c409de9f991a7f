"""Pure math tier: the DSL and its validation."""

import pytest

from ptxgen.derive.tile.spec import OperandSpec, TileSpec, make_spec
from ptxgen.isa.types import Arch, AtomOrder, DType, Major, SpecError, Swizzle

SEED = dict(bm=128, bn=128, bk=32, a="kmajor-sw64")


def test_seed_defaults():
    s = make_spec(**SEED)
    assert (s.b.major, s.b.swizzle, s.dtype, s.acc, s.arch, s.stages) == (
        Major.MN, Swizzle.SW128, DType.F16, DType.F32, Arch.SM100A, 2)
    # default atom order is the operand's own major dimension
    assert s.a.order is AtomOrder.K and s.b.order is AtomOrder.MN
    assert s.out_dtype is DType.F32


def test_tokens_parse_and_print():
    for major in ("kmajor", "mnmajor"):
        for swz in ("none", "sw32", "sw64", "sw128", "sw128b32"):
            assert OperandSpec.parse(f"{major}-{swz}").token == f"{major}-{swz}"
    with pytest.raises(SpecError) as e:
        OperandSpec.parse("kmajor-sw96")
    assert "sw128" in str(e.value) and e.value.field == "--a"
    with pytest.raises(SpecError):
        OperandSpec.parse("rowmajor-sw64")


def test_python_api_accepts_strings():
    s = TileSpec(128, 64, 64, a="kmajor-sw128", b="kmajor-sw64", dtype="bf16", arch="sm_90a")
    assert s.dtype is DType.BF16 and s.arch is Arch.SM90A and s.b.swizzle is Swizzle.SW64


def test_json_roundtrip_and_kernel_name_is_deterministic():
    s = make_spec(bm=64, bn=96, bk=64, a="mnmajor-sw32", b="kmajor-none", a_order="k", dtype="bf16",
                  arch="sm_90a", stages=3, out_dtype="bf16", smem_offset=256)
    again = TileSpec.from_json(s.to_json())
    assert again == s and again.kernel_name == s.kernel_name
    assert s.kernel_name.isidentifier()
    assert make_spec(**SEED).kernel_name == make_spec(**SEED).kernel_name


def _refused(field, **kw):
    args = dict(SEED)
    args.update(kw)
    with pytest.raises(SpecError) as e:
        make_spec(**args)
    assert e.value.field == field, e.value
    msg = str(e.value)
    assert "Legal:" in msg and "is illegal" in msg
    return msg


@pytest.mark.parametrize(
    "field, kw, needle",
    [
        ("--bm", dict(bm=96), "64, 128"),
        ("--bm", dict(bm=320, arch="sm_90a"), "64, 128, 192, 256"),
        ("--bn", dict(bn=100), "8, 16, 24"),
        ("--bn", dict(bn=264), "256"),
        ("--bn", dict(bn=40, dtype="s8", acc="s32", b="kmajor-sw32"), "steps of 16"),
        ("--bn", dict(bn=24, dtype="e4m3", b="mnmajor-none"), "16"),  # 8-bit N-major B: N % 16
        ("--bk", dict(bk=24), "16, 32"),
        ("--bk", dict(bk=16, dtype="e4m3", a="kmajor-sw32"), "32"),
        ("--acc", dict(dtype="bf16", acc="f16"), "f32"),
        ("--acc", dict(dtype="s8", acc="f32", b="kmajor-sw64"), "s32"),
        ("--acc", dict(dtype="tf32", acc="f16", bk=32, b="kmajor-sw128", a="kmajor-sw128"), "f32"),
        ("--out-dtype", dict(dtype="s8", acc="s32", out_dtype="f16", b="kmajor-sw64"), "s32"),
        ("--dtype", dict(dtype="f32"), "f16"),
        ("--a", dict(a="kmajor-sw128"), "sw64"),  # BK=32 f16 = 64 B cannot fill a 128 B atom row
        ("--b", dict(bn=16, b="mnmajor-sw128"), "mnmajor-{none,sw32}"),  # 16 x 2 B = 32 B of N
        ("--a", dict(a="mnmajor-sw64", arch="sm_90a", dtype="tf32", bk=32, b="kmajor-sw128"), "kmajor"),
        ("--b", dict(b="mnmajor-sw128", arch="sm_90a", dtype="e4m3", bk=128), "kmajor"),
        ("--b", dict(b="mnmajor-sw128b32", arch="sm_90a"), "mnmajor-"),
        ("--a", dict(a="kmajor-sw128b32"), "kmajor-"),
        ("--b", dict(b="mnmajor-sw128b32", dtype="f16"), "mnmajor-"),
        ("--b", dict(b="mnmajor-sw128", dtype="tf32", bk=32, a="kmajor-sw128"), "mnmajor-sw128b32"),
        ("--stages", dict(stages=0), "1..16"),
        ("--stages", dict(bm=128, bn=256, bk=128, a="kmajor-sw128", b="kmajor-sw128", stages=4), "at most"),
        ("--bn", dict(bm=256, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", arch="sm_90a"), "BN <="),
        ("--smem-offset", dict(smem_offset=64), "128"),
        ("--smem-offset", dict(smem_offset=1024), "896"),
        ("--arch", dict(arch="sm_80"), "sm_100a"),
    ],
)
def test_illegal_specs_are_refused_with_field_rule_and_legal_values(field, kw, needle):
    msg = _refused(field, **kw)
    assert needle in msg, msg


def test_smem_limit_counts_every_stage():
    ok = make_spec(bm=128, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", stages=4)  # 4 x 48 KB
    assert ok.smem_plan().dynamic_bytes <= 232448
    msg = _refused("--stages", bm=128, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", stages=5)
    assert "at most 4 stages" in msg


def test_legal_extremes():
    make_spec(bm=64, bn=8, bk=16, a="kmajor-none", b="kmajor-none")
    make_spec(bm=128, bn=256, bk=128, a="kmajor-sw128", b="mnmajor-sw128", dtype="bf16", stages=2)
    make_spec(bm=128, bn=24, bk=32, a="kmajor-sw32", b="kmajor-none", dtype="s8", acc="s32")
    make_spec(bm=128, bn=64, bk=32, a="mnmajor-sw128b32", b="mnmajor-sw128b32", dtype="tf32")
    make_spec(bm=256, bn=64, bk=64, a="mnmajor-sw128", b="mnmajor-sw32", arch="sm_90a")
