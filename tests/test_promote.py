"""--promote (derive.tile.rules_promote): the spec field's rules with controls, the pipeline and the rendered loop, the
kernels a 3xTF32 call's chooser picks (api.select.promoting) compiled by NVRTC for sm_90a through the SASS gate, and the
doors' choice with tf32 calls as the control (CPU only)."""

from __future__ import annotations

import pytest

from ptxgen.derive.tile.spec import TileSpec, make_spec
from ptxgen.isa.types import SpecError

BASE = dict(bm=128, bn=128, bk=32, a="kmajor-sw128", b="kmajor-sw128", dtype="tf32", arch="sm_90a", stages=4,
            schedule="persistent")


def _spec(**kw) -> TileSpec:
    return make_spec(**{**BASE, "promote": 1, **kw})


def test_field_round_trips_and_names_the_kernel():
    s = _spec()
    assert s.promote == 1 and s.kernel_name.endswith("_persistent_promote1") and "--promote 1" in s.cli_args()
    assert TileSpec.from_json(s.to_json()) == s and s.to_json()["promote"] == 1
    plain = make_spec(**BASE)  # control: the default leaves name, flags and JSON as before the field
    assert plain.promote == 0 and "promote" not in plain.kernel_name and "--promote" not in plain.cli_args()
    assert "promote" not in plain.to_json()


@pytest.mark.parametrize("kw,field,words", [
    (dict(dtype="bf16", bk=64), "--promote", "tf32 inputs"),
    (dict(dtype="f16", bk=64), "--promote", "tf32 inputs"),
    (dict(acc="f16", dtype="f16", bk=64), "--promote", "f32 accumulator"),
    (dict(arch="sm_100a", schedule="tile"), "--promote", "tcgen05 (sm_100a)"),
    (dict(promote=3), "--promote", "0, 1, 2, 4"),
    (dict(promote=4, stages=1), "--promote", "--stages 2 or more"),
    (dict(bn=256), "--bn", "partial beside the accumulator"),
    (dict(bm=256), "--bn", "partial beside the accumulator"),
    (dict(grouped="offs"), "--grouped", "grouped"),
])
def test_rules_refuse_with_the_rule_and_the_same_spec_without_promote_is_legal(kw, field, words):
    with pytest.raises(SpecError) as e:
        _spec(**kw)
    assert e.value.field == field and words in str(e.value), str(e.value)
    if "promote" not in kw:  # control: the refusal is --promote's, the tile itself is legal
        make_spec(**{**BASE, **kw})
    elif "stages" in kw:  # control: one stage is legal for a promotion every K-tile (wait_group 0 before each release)
        _spec(stages=1)


@pytest.mark.parametrize("kw", [dict(), dict(bn=192), dict(bm=64, bn=128), dict(loader="cp.async", copy_bytes=4),
                                dict(fuse="c"), dict(batch="ab"), dict(epilogue="tma"), dict(out_dtype="bf16"),
                                dict(promote=2), dict(promote=4), dict(promote=4, stages=2)])
def test_legal_promoting_specs(kw):
    assert _spec(**kw).promote == kw.get("promote", 1)


def test_pipeline_releases_after_wait_group_0():
    from ptxgen.derive.tile.kernel import plan_kernel

    assert plan_kernel(_spec()).pipeline.release_lag == 0
    assert plan_kernel(_spec(promote=4)).pipeline.release_lag == 1  # inside a group: wait_group 1, as the plain loop
    assert plan_kernel(make_spec(**BASE)).pipeline.release_lag == 1  # control: the plain loop keeps a group in flight


def test_rendered_loop_promotes_each_k_tile():
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel

    src = render_kernel(plan_kernel(_spec()))
    assert "float part0[64];" in src and "acc0[i] += part0[i];" in src
    assert "mma(part0, 0x4000004000010000ull + a_start, 0x4000004000010000ull + b_start, 0u);  // K 0..7" in src
    assert src.count(", 1u);  // K ") == 3 and "wgmma_wait<0>();  // the partial sums are complete" in src
    assert "wgmma_wait<1>" not in src and "mma(acc0" not in src
    group = render_kernel(plan_kernel(_spec(promote=4)))  # 4 K-tiles per promotion: the group's first K-step is fresh
    assert "for (int kt = 0; kt < num_k_tiles; kt += 4) {" in group and "const int kg = min(4, num_k_tiles - kt);" in group
    assert "b_start, (j > 0 ? 1u : 0u));  // K 0..7" in group and "wgmma_wait<1>();  // K-tile j - 1's" in group
    assert "if (j > 0 && wg_tid == 0) mbar_arrive(empty_bar + static_cast<unsigned>((itj - 1) % 4) * 8u);" in group
    assert "it += kg - 1;" in group and group.count("acc0[i] += part0[i];") == 1
    plain = render_kernel(plan_kernel(make_spec(**BASE)))  # control: no partial, the one accumulator
    assert "part0" not in plain and "mma(acc0" in plain and "(kt > 0 ? 1u : 0u)" in plain


def _chooser_specs():
    """The promoting kernels ptxgen.api.plan picks for the float32 calls a 3xTF32 door runs (torch's default precision):
    ptxgen.gemm out f32 and bf16, addmm's c, bias + activation, and the batched form (split operands are contiguous and
    K-major with K a multiple of 4, so no narrow or packed kernel)."""
    torch = pytest.importorskip("torch")
    import ptxgen.api as api

    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        a, b = torch.empty(300, 1001, device="meta"), torch.empty(1001, 200, device="meta")
        c = torch.empty(300, 200, device="meta")
        bias = torch.empty(200, device="meta")
        plans = [api.plan("gemm", a, b.t(), device="h100"),
                 api.plan("gemm", a, b.t(), out_dtype="bf16", device="h100"),
                 api.plan("gemm", a, b.t(), c=c, beta=0.5, device="h100"),
                 api.plan("gemm", a, b.t(), bias=bias, activation="gelu_tanh", device="h100"),
                 api.plan("gemm", a.expand(3, 300, 1001), b.t().expand(3, 200, 1001), device="h100")]
    finally:
        torch.set_float32_matmul_precision(before)
    return plans


def test_3xtf32_plans_promote_and_tf32_plans_do_not():
    torch = pytest.importorskip("torch")
    import ptxgen.api as api

    plans = _chooser_specs()
    for p in plans:
        assert p.precision == "3xtf32" and p.promotes, p
        assert "_promote4" in p.kernel and p.spec.promote == 4 and (p.spec.bm, p.spec.bn) == (128, 128), p
        assert "promot" in p.why and p.to_json()["promotes"] is True and "(promoting kernel)" in str(p)
    a, b = torch.empty(300, 1001, device="meta"), torch.empty(200, 1001, device="meta")
    tf32 = api.plan("gemm", a, b, precision="tf32", device="h100")  # control: tf32 keeps today's kernel (128 x 256)
    assert tf32.precision == "tf32" and not tf32.promotes and tf32.spec.promote == 0 and tf32.spec.bn == 256, tf32
    assert "promot" not in tf32.why and "(promoting kernel)" not in str(tf32)


def test_chooser_restricts_the_tf32_tiles_to_promoting_ones():
    from ptxgen.api.select import default_spec, promoting
    from ptxgen.isa.types import Major

    plain = default_spec("tf32", "sm_90a", Major.K, Major.K, "f32")
    with promoting():
        promoted = default_spec("tf32", "sm_90a", Major.K, Major.K, "f32")
        bf16 = default_spec("bf16", "sm_90a", Major.K, Major.K, "bf16")  # other types never promote
        sm100 = default_spec("tf32", "sm_100a", Major.K, Major.K, "f32")  # tcgen05: no promoting form, tf32 kept
    assert (plain.bm, plain.bn, plain.promote) == (128, 256, 0)  # control: 128 x 256 needs 256 registers to promote
    assert (promoted.bm, promoted.bn, promoted.stages, promoted.promote) == (128, 128, 4, 4)
    assert bf16.promote == 0 and sm100.promote == 0


@pytest.mark.parametrize("index", range(5))
def test_chooser_kernels_compile_without_local_memory(index):
    """NVRTC for sm_90a: the SASS gate passes (HGMMA count BK / 8 x 4 K-tiles per promotion = 16 in the loop, none outside,
    setmaxnreg, no LDL/STL), and ptxas neither serializes the wgmma (C7514) nor injects a wait (C7517)."""
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda

    s = _chooser_specs()[index].spec
    c = compile_cuda(render_kernel(plan_kernel(s)), s.kernel_name, "sm_90a")
    rep = check_sass(s, c.cubin)
    assert rep.ok and rep.local_bytes == 0 and rep.stack_bytes == 0, rep.problems
    assert rep.opcode == "HGMMA" and rep.mma_in_loop == 16 and rep.mma_total == 16, rep
    assert "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32" in c.ptx
    assert "C7514" not in c.log and "C7517" not in c.log, c.log


def test_dispatch_keys_keep_3xtf32_apart_from_tf32():
    from ptxgen.api import dispatch
    from ptxgen.api.select import promoting

    assert dispatch._okey("f32") == "f32" and dispatch._okey(None) is None
    with promoting():
        assert dispatch._okey("f32") == ("f32", "3xtf32") and dispatch._okey(None) == (None, "3xtf32")
    assert dispatch._okey("f32") == "f32"  # the context ends with the call


def test_sass_gate_counts_the_promotion_group():
    """check_sass expects BK / K x G HGMMA in the loop for --promote G: a promote-1 kernel's SASS checked as a promote-4
    spec fails the count (control), and passes as its own spec."""
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda

    s = _spec(promote=1)
    c = compile_cuda(render_kernel(plan_kernel(s)), s.kernel_name, "sm_90a")
    assert check_sass(s, c.cubin).ok and check_sass(s, c.cubin).mma_in_loop == 4
    wrong = check_sass(_spec(promote=4), c.cubin)
    assert not wrong.ok and any("4 K-tiles per promotion" in p for p in wrong.problems), wrong.problems


@pytest.mark.parametrize("fused_call", [False, True])
def test_doors_run_the_split_operands_inside_promoting(monkeypatch, fused_call):
    """ptxgen.gemm (plain and with c=) calls on with the split operands inside api.select.promoting, where the chooser
    and the dispatch keys promote; a tf32 call does not (control). The split and the slow paths are stand-ins (no GPU)."""
    from ptxgen.api import dispatch, fused
    from ptxgen.api.arrays import precision as fp32
    from ptxgen.api.select import PROMOTE

    seen = []

    def operands(a, b, out, precision, stream=None, grouped=False):
        return (("split", a), ("split", b)) if precision == "3xtf32" else (a, b)

    def slow(a, b, out, *rest, **kw):
        seen.append((a, PROMOTE.get()))
        return "result"

    monkeypatch.setattr(fp32, "operands", operands)
    monkeypatch.setattr(dispatch, "_gemm_slow", slow)
    monkeypatch.setattr(fused, "_gemm_slow", slow)
    kw = dict(c="c", beta=1.0) if fused_call else {}
    assert dispatch.gemm("a", "b", precision="3xtf32", **kw) == "result"
    assert dispatch.gemm("a", "b", precision="tf32", **kw) == "result"
    assert seen == [(("split", "a"), True), ("a", False)], seen
    assert PROMOTE.get() is False
