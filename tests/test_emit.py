"""Codegen tier: templates, NVRTC (no GPU), SASS, generated/ files, nvcc as an independent compiler."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import jinja2
import pytest

from ptxgen.emit.generated import KERNEL_FILES, write_kernel_dir
from ptxgen.emit.cexpr import linear_offset_c_expr, swizzle_c_expr
from ptxgen.emit.env import environment
from ptxgen.emit.sources import template_dir
from ptxgen.emit.render import render_kernel
from ptxgen.derive.tile.layout import derive
from ptxgen.runtime.compile.artifacts import build, check_tree, generate
from ptxgen.runtime.compile.sass import check_sass, parse_instructions
from ptxgen.runtime.compile.toolchain import run_tool
from ptxgen.derive.tile.spec import make_spec

SEED = make_spec(bm=128, bn=128, bk=32, a="kmajor-sw64")
ROOT = Path(__file__).resolve().parent.parent


def _eval_c(expr: str, **env) -> int:
    return eval(re.sub(r"(\d)u\b", r"\1", expr), {}, env)  # the rendered expressions use + * >> & ^ only


@pytest.mark.parametrize(
    "spec",
    [SEED, make_spec(bm=64, bn=96, bk=64, a="mnmajor-sw32", b="kmajor-none", a_order="k", arch="sm_90a"),
     make_spec(bm=128, bn=64, bk=32, a="kmajor-sw128", b="mnmajor-sw128b32", dtype="tf32")],
    ids=["seed", "sm90", "b32"],
)
def test_rendered_store_expression_is_the_store_table(spec):
    """The loader's C index expression and the Python store table come from the same terms."""
    t = derive(spec)
    for op in (t.a, t.b):
        lin, swz = linear_offset_c_expr(op.store), swizzle_c_expr(op.store)
        table = op.store.table()
        for r in range(op.store.rows):
            for c in range(op.store.cols):
                linear = _eval_c(lin, row=r, col=c)
                assert _eval_c(swz, linear=linear) == table[r][c]


def test_templates_do_no_layout_math():
    """Templates get numbers and rendered expressions; no shifts, XORs or masks of their own."""
    paths = sorted(template_dir().rglob("*.j2"))  # the public pieces (templates/author/) too
    assert any(p.parent.name == "author" for p in paths)
    for path in paths:
        text = path.read_text()
        code = re.sub(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", "", text, flags=re.S)
        for bad in ("<<", ">>", " ^ ", "0x"):
            assert bad not in code, f"{path.name} contains {bad!r}"


def test_strict_undefined():
    assert environment().undefined is jinja2.StrictUndefined
    with pytest.raises(jinja2.UndefinedError):
        environment().get_template("gemm_sm100.cu.j2").render(k={"name": "x"})


def test_seed_kernel_compiles_for_sm100a_with_the_expected_sass():
    art = generate(SEED)
    assert art.sass.ok, art.sass.problems
    assert art.sass.opcode == "UTCHMMA" and art.sass.mma_in_loop == 2  # two m128n128k16 per K-tile of 32
    assert art.sass.ldtm > 0 and art.sass.local_bytes == 0
    ptx = art.files["kernel.ptx"]
    for op in ("tcgen05.alloc", "tcgen05.mma", "tcgen05.commit", "tcgen05.ld", "tcgen05.dealloc"):
        assert op in ptx, op
    assert ".target sm_100a" in ptx


@pytest.mark.parametrize("arch", ["sm_100a", "sm_90a"])
def test_nvjitlink_assembles_the_ptx_to_the_same_instructions(arch):
    """kernel.ptx, assembled by nvJitLink instead of NVRTC, passes the same SASS check."""
    from ptxgen.runtime.compile.toolchain import link_ptx

    spec = SEED if arch == "sm_100a" else make_spec(bm=128, bn=128, bk=64, a="kmajor-sw128", b="mnmajor-sw128", arch=arch)
    art = generate(spec)
    rep = check_sass(spec, link_ptx(art.compiled.ptx, arch), relocatable=True)
    assert rep.ok and rep.mma_in_loop == art.sass.mma_in_loop, rep.problems


def test_wgmma_kernel_compiles_for_sm90a():
    spec = make_spec(bm=128, bn=128, bk=64, a="kmajor-sw128", b="mnmajor-sw128", arch="sm_90a")
    art = generate(spec)
    assert art.sass.ok and art.sass.opcode == "HGMMA" and art.sass.mma_in_loop == 4
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in art.files["kernel.ptx"]


def test_sass_check_detects_problems():
    spec = make_spec(bm=128, bn=128, bk=64, a="kmajor-sw128", b="mnmajor-sw128", arch="sm_90a")
    art = generate(spec)
    sass = run_tool("cuobjdump", ["--dump-sass"], art.compiled.cubin)
    res = run_tool("cuobjdump", ["--dump-resource-usage"], art.compiled.cubin)
    # a spec that expects a different MMA count than the kernel holds
    other = make_spec(bm=128, bn=128, bk=128, a="kmajor-sw128", b="mnmajor-sw128", arch="sm_90a")
    assert not check_sass(other, b"", sass, res).ok
    spilled = sass + "\n        /*9990*/                   STL [R1], R2 ;\n"
    assert any("spill" in p for p in check_sass(spec, b"", spilled, res).problems)
    assert not check_sass(spec, b"", sass, res.replace("LOCAL:0", "LOCAL:64")).ok
    assert parse_instructions(sass)


def test_generated_files_have_headers_and_are_reproducible(tmp_path):
    d1, _ = build(SEED, tmp_path / "one")
    d2, _ = build(SEED, tmp_path / "two")
    for name in KERNEL_FILES:
        a, b = (d1 / name).read_bytes(), (d2 / name).read_bytes()
        assert a == b, name
        head = a.decode()[:400]
        assert "generated by ptxgen" in head and "do not edit" in head, name
        assert str(tmp_path) not in a.decode() and "/work/" not in a.decode()
    assert not re.search(r"20\d\d-\d\d-\d\d", (d1 / "kernel.cu").read_text())


def test_check_passes_then_fails_after_a_hand_edit(tmp_path):
    d, _ = build(SEED, tmp_path)
    assert check_tree(tmp_path).ok
    with open(d / "kernel.cu", "a") as f:
        f.write("// tweak\n")
    res = check_tree(tmp_path)
    assert not res.ok and [p.name for p in res.differing] == ["kernel.cu"]


def test_writes_are_atomic(tmp_path, monkeypatch):
    files = {"kernel.cu": "x", "kernel.ptx": "y"}
    write_kernel_dir(tmp_path, "k", files)
    real_open = open

    def failing_open(path, *a, **kw):
        if str(path).endswith("kernel.ptx") and "tmp" in str(path):
            raise OSError("disk full")
        return real_open(path, *a, **kw)

    monkeypatch.setattr("builtins.open", failing_open)
    with pytest.raises(OSError):
        write_kernel_dir(tmp_path, "k", {"kernel.cu": "new", "kernel.ptx": "new"})
    monkeypatch.undo()
    assert (tmp_path / "k" / "kernel.cu").read_text() == "x"  # the old kernel is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k"]  # no half-written folder left


def test_checked_in_generated_tree_matches_the_generator():
    res = check_tree(ROOT / "generated")
    assert res.ok, [str(p) for p in res.differing] + res.errors
    names = {p.parent.name for p in res.checked}
    assert SEED.kernel_name in names
    assert any("sm90a" in n for n in names) and len(names) >= 5


def _nvcc():
    try:
        from ptxgen.runtime.compile.toolchain import tool

        return str(tool("nvcc"))
    except Exception:
        return shutil.which("nvcc")


def test_independent_nvcc_compiles_the_seed_kernel(tmp_path):
    """nvcc (not NVRTC) on the checked-in kernel.cu: two UTCHMMA per K-tile, LDTM, no local memory."""
    nvcc = _nvcc()
    if not nvcc:
        pytest.skip("nvcc not installed (pip install nvidia-cuda-nvcc)")
    cu = ROOT / "generated" / SEED.kernel_name / "kernel.cu"
    cubin = tmp_path / "seed.cubin"
    env = dict(os.environ)
    proc = subprocess.run([nvcc, "-gencode=arch=compute_100a,code=sm_100a", "-cubin", "-o", str(cubin), str(cu)],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    rep = check_sass(SEED, cubin.read_bytes())
    assert rep.ok and rep.mma_in_loop == 2 and rep.ldtm > 0, rep.problems


@pytest.mark.parametrize(
    "kw",
    [dict(bm=128, bn=128, bk=64, a="kmajor-sw128", b="kmajor-sw128", arch="sm_90a", stages=6, schedule="persistent", consumers="pingpong"),
     dict(bm=128, bn=128, bk=32, a="kmajor-sw64", schedule="persistent"),
     dict(bm=128, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", arch="sm_90a", stages=4)],
    ids=["pingpong", "tcgen05", "cooperative"],
)
def test_every_barrier_the_smem_plan_places_is_initialised(kw):
    """Each 8-byte mbarrier of the shared-memory plan gets exactly one mbarrier.init (the ring's in a loop)."""
    from ptxgen.derive.tile.kernel import plan_kernel

    plan = plan_kernel(make_spec(**kw))
    src = render_kernel(plan)
    singles = {int(m) for m in re.findall(r"mbar_init\(base \+ (\d+)u,", src)}
    arrays = plan.layout.smem.barrier_arrays
    want = {off + 8 * i for name, off, n in arrays if name not in ("full", "empty") for i in range(n)}
    assert singles == want, (singles, want)
    assert "mbar_init(full_bar + s * 8u" in src and "mbar_init(empty_bar + s * 8u" in src


def test_warm_build_reuses_the_cached_cubin_and_sass_dump(tmp_path, monkeypatch):
    """A second build of the same spec runs neither NVRTC nor cuobjdump, and checks the same SASS."""
    import ptxgen.runtime.compile.cache as cache
    import ptxgen.runtime.compile.toolchain as toolchain

    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("PTXGEN_NO_CACHE", raising=False)
    first = generate(SEED)

    def refuse(*a, **k):
        raise AssertionError("should have come from the cache")

    monkeypatch.setattr(cache, "compile_cuda", refuse)
    monkeypatch.setattr(toolchain, "run_tool", refuse)
    second = generate(SEED)
    assert second.files == first.files and second.sass.summary() == first.sass.summary() and second.sass.ok
    # control: with the side file gone the dump is taken again (and here refused)
    for side in tmp_path.glob("*.sass.json"):
        side.unlink()
    with pytest.raises(AssertionError, match="from the cache"):
        generate(SEED)
