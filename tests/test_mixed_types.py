"""Mixed input types (``--b-dtype``): e4m3 x e5m2 and u8 x s8, either way, on both archs.

PTX allows them: tcgen05 kind::f8f6f4 and kind::i8 have an A and a B format field each in the instruction
descriptor; wgmma.mma_async names ``.dtype.atype.btype`` with .atype/.btype in {.e4m3, .e5m2} or {.s8, .u8}.
Element sizes are equal within each pair, so shared-memory layouts, descriptors and TMA maps are unchanged;
what changes is the instruction descriptor, the wgmma opcode, the numpy reference and the SASS mnemonic.
"""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from ptxgen.cli import main
from ptxgen.derive.tile.explain import explain_text
from ptxgen.derive.tile.layout import derive
from ptxgen.derive.tile.rules_operand import legal_b_dtypes
from ptxgen.derive.tile.spec import TileSpec, make_spec
from ptxgen.isa.idesc import WgmmaInstr, lint_instr_descriptor
from ptxgen.isa.numerics import decode, random_codes, tolerance
from ptxgen.isa.types import DType, Major, SpecError
from ptxgen.model.bridges.verify import check_tile

ROOT = Path(__file__).resolve().parent.parent
ARCHS = ("sm_100a", "sm_90a")
# (A, B, accumulator)
PAIRS = [("e4m3", "e5m2", "f32"), ("e5m2", "e4m3", "f32"), ("e4m3", "e5m2", "f16"), ("e5m2", "e4m3", "f16"),
         ("u8", "s8", "s32"), ("s8", "u8", "s32")]


def _spec(a_type, b_type, acc, arch="sm_100a", **kw):
    base = dict(bm=128, bn=128, bk=128, a="kmajor-sw128", b="kmajor-sw128", dtype=a_type, b_dtype=b_type, acc=acc, arch=arch)
    return make_spec(**dict(base, **kw))


# ---- the spec field ------------------------------------------------------------------------------


def test_default_is_the_same_type_and_leaves_everything_as_before():
    s = make_spec(bm=128, bn=128, bk=128, a="kmajor-sw128", b="kmajor-sw128", dtype="e4m3")
    assert s.b_dtype is DType.E4M3 and not s.mixed
    assert "b_dtype" not in s.to_json()  # specs and layout.json from before the field are unchanged
    assert "--b-dtype" not in s.cli_args()
    assert s.kernel_name == "ptxgen_sm100a_e4m3_f32_128x128x128_s2_a_k_sw128_ok_b_k_sw128_ok"  # no B type token
    assert s == make_spec(bm=128, bn=128, bk=128, a="kmajor-sw128", b="kmajor-sw128", dtype="e4m3", b_dtype="e4m3")
    assert TileSpec(128, 128, 32, a="kmajor-sw64").b_dtype is DType.F16


@pytest.mark.parametrize("a,b,acc", PAIRS)
@pytest.mark.parametrize("arch", ARCHS)
def test_mixed_spec_serialises(arch, a, b, acc):
    s = _spec(a, b, acc, arch)
    assert s.mixed and s.operand_dtype("a").value == a and s.operand_dtype("b").value == b
    j = s.to_json()
    assert j["dtype"] == a and j["b_dtype"] == b
    assert TileSpec.from_json(json.loads(json.dumps(j))) == s
    assert f"--dtype {a} --b-dtype {b}" in s.cli_args()
    assert s.kernel_name.startswith(f"ptxgen_{arch.replace('_', '')}_{a}_b{b}_{acc}_")
    # Python callers may pass strings, as for every enum field
    assert TileSpec(128, 128, 128, a="kmajor-sw128", b="kmajor-sw128", dtype=a, b_dtype=b, acc=acc, arch=arch) == s


def test_legal_b_types():
    assert legal_b_dtypes(DType.E4M3) == (DType.E4M3, DType.E5M2)
    assert legal_b_dtypes(DType.E5M2) == (DType.E5M2, DType.E4M3)
    assert legal_b_dtypes(DType.U8) == (DType.U8, DType.S8)
    assert legal_b_dtypes(DType.S8) == (DType.S8, DType.U8)
    for d in (DType.F16, DType.BF16, DType.TF32):
        assert legal_b_dtypes(d) == (d,)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(
    "a,b,acc,bk",
    [("f16", "bf16", "f32", 64), ("bf16", "f16", "f32", 64), ("tf32", "f16", "f32", 32), ("f16", "e4m3", "f32", 64),
     ("e4m3", "s8", "f32", 128), ("u8", "e5m2", "s32", 128), ("s8", "f32", "s32", 128), ("e4m3", "s32", "f32", 128)],
)
def test_illegal_mixes_are_refused_naming_the_flag_rule_values_and_reference(arch, a, b, acc, bk):
    with pytest.raises(SpecError) as e:
        _spec(a, b, acc, arch, bk=bk)
    err = e.value
    assert err.field == "--b-dtype" and err.value == b
    assert "e4m3 x e5m2" in err.rule and "u8 x s8" in err.rule
    assert err.legal == ", ".join(d.value for d in legal_b_dtypes(DType(a)))
    assert err.ref and "PTX ISA" in err.ref
    assert ("wgmma" in err.ref) == (arch == "sm_90a")


def test_accumulators_follow_the_family():
    for a, b in (("e4m3", "e5m2"), ("e5m2", "e4m3")):
        for acc in ("f32", "f16"):
            _spec(a, b, acc)
        with pytest.raises(SpecError, match="--acc"):
            _spec(a, b, "s32")
    for a, b in (("u8", "s8"), ("s8", "u8")):
        for acc in ("f32", "f16"):
            with pytest.raises(SpecError, match="--acc"):
                _spec(a, b, acc)


def test_cli_flag(capsys):
    args = ["--bm", "128", "--bn", "128", "--bk", "128", "--a", "kmajor-sw128", "--b", "kmajor-sw128", "--dtype", "e4m3"]
    assert main(["explain", *args, "--b-dtype", "e5m2", "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert j["spec"]["b_dtype"] == "e5m2" and j["idesc"]["fields"]["b_format"] == 1 and j["idesc"]["hex"] == "0x08200410"
    assert main(["explain", *args, "--b-dtype", "bf16"]) == 2
    assert "--b-dtype=bf16 is illegal" in capsys.readouterr().err
    assert main(["explain", *args, "--b-dtype", "e6m1"]) == 2
    assert "--b-dtype" in capsys.readouterr().err


# ---- instructions -------------------------------------------------------------------------------


@pytest.mark.parametrize("a,b,acc", PAIRS)
def test_wgmma_opcode_is_dtype_atype_btype(a, b, acc):
    t = derive(_spec(a, b, acc, "sm_90a"))
    assert t.wgmma.opcode == f"wgmma.mma_async.sync.aligned.m64n128k32.{acc}.{a}.{b}"
    assert t.to_json()["idesc"]["instruction"] == t.wgmma.opcode
    # without b_dtype WgmmaInstr keeps naming one type for both
    assert WgmmaInstr(64, DType(a), DType(acc), Major.K, Major.K).opcode.endswith(f".{acc}.{a}.{a}")


@pytest.mark.parametrize("a,b,acc", PAIRS)
def test_tcgen05_idesc_has_each_operands_format(a, b, acc):
    codes = {"e4m3": 0, "e5m2": 1, "u8": 0, "s8": 1}
    t = derive(_spec(a, b, acc))
    f = t.idesc.fields()
    assert (f["a_format"], f["b_format"]) == (codes[a], codes[b])
    rep = lint_instr_descriptor(t.idesc.encode(), t.idesc.kind)
    assert rep.valid, rep.problems
    assert (rep.fields["a_dtype"], rep.fields["b_dtype"]) == (a, b)


@pytest.mark.parametrize("arch", ARCHS)
def test_explain_names_both_types(arch):
    t = derive(_spec("e4m3", "e5m2", "f32", arch))
    text = explain_text(t)
    if arch == "sm_90a":
        assert "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e5m2" in text and "A e4m3, B e5m2" in text
    else:
        assert "A e4m3 under kind::f8f6f4 -> 0" in text and "B e5m2 under kind::f8f6f4 -> 1" in text
    assert "--b-dtype e5m2" in text and "_be5m2_" in text


# ---- layouts: identical per operand, and the read model agrees -----------------------------------


@pytest.mark.parametrize("a,b,acc", PAIRS)
@pytest.mark.parametrize("arch", ARCHS)
def test_layouts_equal_the_unmixed_ones_and_check_tile_passes(arch, a, b, acc):
    for loader in ("tma", "cp.async"):
        for tok_b in ("kmajor-sw64", "kmajor-none"):
            mixed = derive(_spec(a, b, acc, arch, loader=loader, b=tok_b))
            same = derive(_spec(a, a, acc, arch, loader=loader, b=tok_b))
            assert mixed.b.dtype.value == b and mixed.a.dtype.value == a
            for name in "ab":
                mj, sj = mixed.operand(name).to_json(), same.operand(name).to_json()
                assert mj == sj, name
            assert check_tile(mixed) == []


# ---- numpy reference -----------------------------------------------------------------------------


def test_reference_decodes_each_operand_with_its_own_type():
    from ptxgen.runtime.check.validate import reference

    rng = np.random.default_rng(1)
    for a, b in (("e4m3", "e5m2"), ("e5m2", "e4m3"), ("u8", "s8"), ("s8", "u8")):
        ac, bc = random_codes(a, (16, 32), rng), random_codes(b, (8, 32), rng)
        ref = reference(ac, a, bc, b)
        assert np.array_equal(ref, decode(ac, a) @ decode(bc, b).T)
        assert not np.array_equal(ref, decode(ac, a) @ decode(bc, a).T)  # B read as A's type is a different matrix
    # one hand-checked value: e4m3 0x38 = 1.0, e5m2 0x40 = 2.0; u8 0xFF = 255, s8 0xFF = -1
    assert reference(np.array([[0x38]]), "e4m3", np.array([[0x40]]), "e5m2")[0, 0] == 2.0
    assert reference(np.array([[0xFF]]), "u8", np.array([[0xFF]]), "s8")[0, 0] == -255.0


def test_host_operand_poisons_with_each_operands_type():
    from ptxgen.runtime.launch.launch import Problem
    from ptxgen.runtime.check.validate import host_operand

    s = _spec("u8", "s8", "s32")
    p = Problem.padded(s, 128, 128, 128)
    for name, poison in (("a", 0xFF), ("b", 0x7F)):  # the largest u8 and s8
        g = host_operand(s, name, np.zeros((128, 128), dtype=np.uint8), p, extra_rows=1)
        assert g[-1, 0] == poison


def test_tolerance_takes_both_types():
    assert tolerance("e4m3", "f32", "f32", "e5m2") == tolerance("e4m3", "f32", "f32") == 1e-3
    assert tolerance("e5m2", "f16", "f16", "e4m3") == tolerance("e5m2", "f16", "f16")
    assert tolerance("u8", "s32", "s32", "s8") == 0.0
    assert tolerance("f16", "f32", "f32", "e4m3") == 1e-3  # the looser of the two


# ---- compiler: NVRTC for both archs, SASS check -------------------------------------------------


@pytest.mark.parametrize(
    "a,b,acc,want",
    [("e4m3", "e5m2", "f32", ("UTCQMMA", "QGMMA")), ("e5m2", "e4m3", "f16", ("UTCQMMA", "QGMMA")),
     ("u8", "s8", "s32", ("UTCIMMA", "IGMMA")), ("s8", "u8", "s32", ("UTCIMMA", "IGMMA"))],
)
@pytest.mark.parametrize("arch", ARCHS)
def test_mixed_kernels_compile_and_pass_the_sass_check(arch, a, b, acc, want):
    from ptxgen.runtime.compile.artifacts import generate

    spec = _spec(a, b, acc, arch, bn=64, bk=64, a="kmajor-sw64", b="kmajor-sw64")
    art = generate(spec)
    assert art.sass.ok, art.sass.problems
    assert art.sass.opcode == want[arch == "sm_90a"] and art.sass.mma_in_loop == 2  # BK 64 / K 32
    ptx = art.files["kernel.ptx"]
    if arch == "sm_90a":
        assert f"wgmma.mma_async.sync.aligned.m64n64k32.{acc}.{a}.{b}" in ptx
    else:
        assert f"kind::{DType(a).kind}" in ptx and derive(spec).idesc.hex in art.files["kernel.cu"]


def test_sass_check_catches_wgmma_input_types():
    """The QGMMA/IGMMA mnemonic spells both input types; a kernel built for other types fails the check."""
    from ptxgen.runtime.compile.artifacts import generate
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import run_tool

    kw = dict(bn=64, bk=64, a="kmajor-sw64", b="kmajor-sw64")
    mixed = _spec("e4m3", "e5m2", "f32", "sm_90a", **kw)
    art = generate(mixed)
    sass = run_tool("cuobjdump", ["--dump-sass"], art.compiled.cubin)
    res = run_tool("cuobjdump", ["--dump-resource-usage"], art.compiled.cubin)
    assert ".E4M3.E5M2" in sass
    assert check_sass(mixed, b"", sass, res).ok
    for other in (_spec("e4m3", "e4m3", "f32", "sm_90a", **kw), _spec("e5m2", "e4m3", "f32", "sm_90a", **kw)):
        rep = check_sass(other, b"", sass, res)
        assert any("input types" in p for p in rep.problems), rep.problems


# ---- GPU jobs: the mixed configs, and the filter that selects them --------------------------------


def test_gpu_jobs_include_mixed_configs_selected_by_the_b_dtype_filter():
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from test_gpu import gpu_jobs
    finally:
        sys.path.remove(str(ROOT / "tests"))
    for arch in ARCHS:
        jobs = gpu_jobs(arch)
        picked = [j for j in jobs if "b_dtype" in str(j)]  # tools/gpu_validate.py --filter b_dtype
        assert picked and all(j["spec"]["b_dtype"] != j["spec"]["dtype"] for j in picked)
        assert all(j in picked for j in jobs if "b_dtype" in j["spec"])
        pairs = {(j["spec"]["dtype"], j["spec"]["b_dtype"]) for j in picked}
        assert pairs == {("e4m3", "e5m2"), ("e5m2", "e4m3"), ("u8", "s8"), ("s8", "u8")}
        assert {j["spec"]["loader"] for j in picked} == {"tma", "cp.async"}
        for j in picked:
            assert make_spec(**j["spec"]).mixed


def test_sweep_grids_take_b_dtype():
    from ptxgen.sweep import grid_from_tables

    g = grid_from_tables("mixed", [dict(bm=128, bn=128, bk=128, a="kmajor-sw128", b="kmajor-sw128", acc="f32",
                                        dtype=["e4m3", "e5m2", "f16"], b_dtype=["e4m3", "e5m2", "default"],
                                        arch=["sm_100a", "sm_90a"])])
    got = {(s.arch.value, s.dtype.value, s.b_dtype.value) for s in g.specs}
    assert got == {(arch, a, b) for arch in ARCHS for a in ("e4m3", "e5m2") for b in ("e4m3", "e5m2")} | {
        (arch, "f16", "f16") for arch in ARCHS}
    assert g.dropped == 4  # f16 A with an e4m3 or e5m2 B, on each arch
