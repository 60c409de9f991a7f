"""DeepSeek-style block-scaled FP8 on Hopper at L1: the plan's rules, its per-thread scale loads against the
independent recipe model (ptxgen.model.numerics.bfp8model) with controls, the global scale layouts torch._scaled_mm takes,
and the promotion every 128 of K against a model of limited-precision accumulation (a test that fails without it)."""

from dataclasses import replace
from math import gcd

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptxgen.derive.scaled.blockfp8 import BLOCK_K, ScaleLoad, plan_block_fp8
from ptxgen.isa import numerics
from ptxgen.isa.types import SpecError
from ptxgen.model.numerics import bfp8model


@pytest.mark.parametrize("kw, field", [
    (dict(arch="sm_100a"), "--fp8-blocks"), (dict(dtype="bf16"), "--fp8-blocks"), (dict(b_major="mn"), "--fp8-blocks"),
    (dict(bk=64), "--bk"), (dict(bn=176), "--bn"), (dict(bn=200), "--bn"), (dict(bn=100), "--bn"), (dict(bm=96), "--bm"),
])
def test_rules(kw, field):
    with pytest.raises(SpecError) as e:
        plan_block_fp8(**{**dict(bm=128, bn=128, bk=128), **kw})
    assert e.value.field == field


class CaiArray:
    """__cuda_array_interface__ v3 with a dtype name (how the reader tells float8 and bfloat16 from u8 and f2): a device
    array at a made-up address, for the simulated launches."""

    def __init__(self, shape, dtype, strides_elems, ptr):
        size = {"float8_e4m3fn": 1, "bfloat16": 2, "float32": 4}[dtype]
        self.dtype = dtype
        self.__cuda_array_interface__ = {
            "shape": shape, "typestr": {1: "|u1", 2: "<f2", 4: "<f4"}[size], "data": (ptr, False), "version": 3,
            "stream": None, "strides": tuple(x * size for x in strides_elems)}

    def __dlpack_device__(self):
        return (2, 0)

def _loads(plan, kb, m0, n0):
    return lambda warp, lane: [(l.operand, l.index, l.targets) for l in plan.promotion_loads(warp % 4, lane, kb, m0, n0, warp // 4)]


BNS = [8, 16, 32, 64, 96, 128, 136, 144, 160, 192, 256]  # BN | 128, and tiles spanning two 128-column blocks of B


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([64, 128, 192, 256]), st.sampled_from(BNS), st.integers(0, 5), st.integers(0, 3),
       st.integers(0, 17), st.integers(0, 99))
def test_every_register_is_scaled_by_its_rows_and_blocks_scales(bm, bn, kb, tm, tn, seed):
    plan = plan_block_fp8(bm, bn, 128)
    m0, n0 = tm * bm, tn * bn
    rng = np.random.default_rng(seed)
    assert bfp8model.check_loads(_loads(plan, kb, m0, n0), bn, kb, m0, n0, bm, kb + 1, rng) == []


@pytest.mark.parametrize("bn", BNS)
def test_every_phase_of_every_bn_against_the_model(bn):
    """Every residue n0 % 128 a tile of BN columns can start at (one tile per residue), one 64-row slab."""
    plan = plan_block_fp8(64, bn, 128)
    rng = np.random.default_rng(bn)
    for t in range(128 // gcd(bn, 128)):
        n0 = t * bn
        assert bfp8model.check_loads(_loads(plan, 2, 64, n0), bn, 2, 64, n0, 64, 3, rng) == [], (bn, n0)


def test_phases_are_the_tile_splits():
    """BN = 192 starts at n0 % 128 = 0 (128 + 64 columns) or 64 (64 + 128); BN = 160 at 0, 32, 64, 96; BN | 128 never splits."""
    assert [(p.residue, p.first_groups) for p in plan_block_fp8(128, 192, 128).phases] == [(0, 16), (64, 8)]
    assert [(p.residue, p.first_groups) for p in plan_block_fp8(128, 160, 128).phases] == [(0, 16), (32, 12), (64, 8), (96, 4)]
    for bn in (8, 64, 128):
        plan = plan_block_fp8(128, bn, 128)
        assert not plan.spans_two_blocks and len(plan.phases) == 1
    assert plan_block_fp8(128, 192, 128).spans_two_blocks


TWO_BLOCK_CONTROLS = {
    "the whole tile with block n0 / 128's scale": lambda loads: [
        (o, i, t + sum((tt for oo, ii, tt in loads if oo == "sfb" and ii[1] != i[1]), ())) if o == "sfb" else (o, i, t)
        for o, i, t in loads if not (o == "sfb" and i[1] != loads[2][1][1])],
    "the split one group late": lambda loads: [
        (o, i, tuple(r for r in t if r != max(t)) if o == "sfb" and j == 3 else
         t + (max(loads[3][2][:4]), ) if o == "sfb" and j == 2 else t) for j, (o, i, t) in enumerate(loads)]
    if len(loads) > 3 else loads,
    "the second block from the next tile column": lambda loads: [
        (o, (i[0], i[1] + 1), t) if o == "sfb" and j == 3 else (o, i, t) for j, (o, i, t) in enumerate(loads)],
}


@pytest.mark.parametrize("name", sorted(TWO_BLOCK_CONTROLS))
@pytest.mark.parametrize("bn, tile", [(192, 1), (160, 3), (144, 5)])
def test_two_block_controls_fail(name, bn, tile):
    plan = plan_block_fp8(128, bn, 128)
    n0 = tile * bn
    assert plan.phase_of(n0).first_groups < plan.groups  # this tile spans two blocks
    wrong = TWO_BLOCK_CONTROLS[name]

    def loads(warp, lane):
        return wrong([(l.operand, l.index, l.targets) for l in plan.promotion_loads(warp % 4, lane, 1, 0, n0, warp // 4)])

    assert bfp8model.check_loads(loads, bn, 1, 0, n0, 128, 3, np.random.default_rng(0))


CONTROLS = {
    "sfb by the tile, not the 128-block": lambda l, n0, bn: replace(l, index=(l.index[0], n0 // bn)) if l.operand == "sfb" else l,
    "sfa of the next K block": lambda l, n0, bn: replace(l, index=(l.index[0], l.index[1] + 1)) if l.operand == "sfa" else l,
    "rows +8 swapped": lambda l, n0, bn: replace(l, index=(l.index[0] + (8 if l.index[0] % 16 < 8 else -8), l.index[1]))
    if l.operand == "sfa" else l,
}


@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_controls_fail(name):
    plan = plan_block_fp8(128, 64, 128)
    kb, m0, n0 = 1, 128, 192
    wrong = CONTROLS[name]

    def loads(warp, lane):
        return [(l.operand, l.index, l.targets) for l in
                (wrong(x, n0, plan.bn) for x in plan.promotion_loads(warp % 4, lane, kb, m0, n0, warp // 4))]

    assert bfp8model.check_loads(loads, plan.bn, kb, m0, n0, 128, 3, np.random.default_rng(0))


def test_global_offsets_are_torch_scaled_mm_layouts():
    """scale_a outer-dim-major (s.t().contiguous().t()), scale_b = s.t() of a row-major Nb x Kb' array."""
    m, kbs, nbs, kb_pad = 37, 5, 3, 8
    sa = np.arange(m * kbs, dtype=np.float64).reshape(m, kbs)
    storage_a = np.ascontiguousarray(sa.T).reshape(-1)  # what .t().contiguous() holds
    sb_rows = np.arange(nbs * kb_pad, dtype=np.float64).reshape(nbs, kb_pad)
    storage_b = sb_rows.reshape(-1)
    sb = sb_rows.T[:kbs]  # logical Kb x Nb
    for mi, kb in ((0, 0), (36, 4), (5, 2)):
        assert storage_a[ScaleLoad("sfa", (mi, kb), ()).offset(m)] == sa[mi, kb]
    for kb, nb in ((0, 0), (4, 2), (3, 1)):
        assert storage_b[ScaleLoad("sfb", (kb, nb), ()).offset(kb_pad)] == sb[kb, nb]


def test_promotion_points_every_128_of_k():
    plan = plan_block_fp8(128, 128, 128)
    assert plan.promotion_points(300) == (128, 256, 300) and plan.mmas_per_block == 4 and plan.partial_registers == 64


def test_promotion_every_128_is_what_keeps_the_error_small():
    """Under the model of a ~14-bit FP8 accumulator (DeepSeek-V3's report; not measured here), promoting every 128
    of K matches the float64 recipe to ~3e-6; accumulating all of K = 16384 before promoting misses by ~3e-4."""
    rng = np.random.default_rng(0)
    m, n, k = 32, 32, 16384
    a = np.abs(numerics.decode(numerics.random_codes("e4m3", (m, k), rng), "e4m3"))
    b = np.abs(numerics.decode(numerics.random_codes("e4m3", (n, k), rng), "e4m3"))
    sfa = np.repeat(rng.random((m, 1)) + 0.5, k // BLOCK_K, axis=1)  # uniform along K: promoting late is then meaningful
    sfb = np.repeat(rng.random((1, 1)) + 0.5, k // BLOCK_K, axis=0)
    ref = bfp8model.reference(a, sfa, b, sfb)

    def err(every):
        got = bfp8model.limited_accumulate(a, sfa, b, sfb, every)
        return np.linalg.norm(got - ref) / np.linalg.norm(ref)

    tol = 2e-5
    assert err(plan_block_fp8(128, 128, 128).promotion_points(k)[0]) < tol
    assert err(k) > tol  # the control: no promotion


def test_reference_applies_each_blocks_scales():
    a = np.ones((2, 256))
    b = np.ones((130, 256))
    sfa = np.array([[1.0, 2.0], [3.0, 4.0]])
    sfb = np.array([[1.0, 10.0], [100.0, 1000.0]])  # Kb x Nb
    d = bfp8model.reference(a, sfa, b, sfb)
    assert d[0, 0] == 128 * (1 * 1 + 2 * 100) and d[1, 129] == 128 * (3 * 10 + 4 * 1000)


# ---- the kernel (codegen tier) and the API up to the launch ------------------------------------------------------
def _spec(**kw):
    from ptxgen.api.fp8blocks import default_spec

    return default_spec(**kw)


def test_spec_field_abi_and_pipeline():
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.derive.tile.spec import make_spec

    s = _spec()
    assert s.kernel_name.endswith("_bs128") and make_spec(**s.to_json()) == s and "--fp8-blocks 1x128x128" in s.cli_args()
    plan = plan_kernel(s)
    assert [p.name for p in plan.abi.params][-4:] == ["SFA", "SFB", "lds_a", "lds_b"]
    assert plan.pipeline.release_lag == 0  # each K block's partial is read after wait_group 0
    with pytest.raises(SpecError) as e:
        _spec(consumers="pingpong", stages=6)  # two slabs x (accumulator + partial) does not fit
    assert e.value.field == "--bn"
    with pytest.raises(SpecError):
        _spec(bk=64)


@pytest.mark.parametrize("scale_load", ["block", "auto"])
def test_wide_tile_compiles_with_two_b_scales_and_no_local_memory(scale_load):
    """BN = 192 (two 128-column blocks of B per tile): accumulator + partial = 192 registers in the consumer branch
    after setmaxnreg.inc 232; a promotion branch per split; no local memory. The second block's B scale: loaded by
    each consumer thread (block), or by lane 1 of the scale warp and read from the stage (auto = smem)."""
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda

    s = _spec(bn=192, stages=4, epilogue="tma", fp8_scale_load=scale_load)
    src = render_kernel(plan_kernel(s))
    second = ("bfp8_sfb[static_cast<size_t>(lds_b) + kt]" if scale_load == "block" else
              "bfp8_sfb[static_cast<size_t>(lane) * lds_b + kt]")
    assert "bfp8_first == 16" in src and second in src
    assert ("bfp8_sb1 = ld_shared_f32(" in src) == (scale_load == "auto")
    c = compile_cuda(src, s.kernel_name, "sm_90a")
    rep = check_sass(s, c.cubin)
    assert rep.ok and rep.local_bytes == 0, rep.problems
    assert "wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3" in c.ptx and "C7514" not in c.log


@pytest.mark.parametrize("stagger", ["issue", "complete"])
def test_staggered_warpgroups_compile_with_their_barriers(stagger):
    """--fp8-stagger: warpgroup 1 syncs on warpgroup 0's named barrier before each K block, warpgroup 0 (after the first)
    on warpgroup 1's; warpgroup 0 takes warpgroup 1's last arrival after its tiles. Still no local memory, no C7514."""
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda

    s = _spec(bn=192, stages=4, epilogue="tma", fp8_stagger=stagger)
    assert s.kernel_name.endswith("_st" + stagger) and f"--fp8-stagger {stagger}" in s.cli_args()
    src = render_kernel(plan_kernel(s))
    assert src.count("named_barrier_sync(5, 256)") == 1 and src.count("named_barrier_sync(6, 256)") == 2
    assert src.count("named_barrier_arrive(") == 2 + 1  # one arrival per warpgroup and K-tile, and the wrapper
    c = compile_cuda(src, s.kernel_name, "sm_90a")
    rep = check_sass(s, c.cubin)
    assert rep.ok and rep.local_bytes == 0 and "C7514" not in c.log, rep.problems
    sass_bars = c.ptx.count("bar.arrive")
    assert sass_bars >= 1
    with pytest.raises(SpecError) as e:
        _spec(bm=64, fp8_stagger=stagger)  # one consumer warpgroup: nothing to order
    assert e.value.field == "--fp8-stagger"
    with pytest.raises(SpecError):
        from ptxgen.derive.tile.spec import make_spec
        make_spec(bm=128, bn=128, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", arch="sm_90a", stages=4,
                  fp8_stagger=stagger)  # not block-scaled


def _steps(stagger):
    from ptxgen.derive.scaled.bfp8steps import stagger_steps

    return [(x.wg, x.where, x.op, x.barrier, x.not_first) for x in stagger_steps(stagger)]


@pytest.mark.parametrize("stagger", ["issue", "complete"])
@pytest.mark.parametrize("k_tiles", [0, 1, 2, 7])
def test_stagger_protocol_against_the_model(stagger, k_tiles):
    """The plan's named-barrier steps under random interleavings of the two warpgroups (bfp8model.check_stagger): no
    deadlock, no warpgroup counted twice in a generation, none left over, and the order the option promises."""
    assert bfp8model.check_stagger(_steps(stagger), k_tiles, mode=stagger) == []


STAGGER_CONTROLS = {
    "no tail sync": lambda st: [x for x in st if x[1] != "tail"],
    "warpgroup 0 does not wait": lambda st: [x for x in st if not (x[0] == 0 and x[1] == "before_issue")],
    "warpgroup 1 does not wait": lambda st: [x for x in st if not (x[0] == 1 and x[1] == "before_issue")],
    "warpgroup 1 signals on warpgroup 0's barrier": lambda st: [(g, w, op, 0 if (g, op) == (1, "arrive") else b, nf)
                                                               for g, w, op, b, nf in st],
}


@pytest.mark.parametrize("name", sorted(STAGGER_CONTROLS))
def test_stagger_controls_fail(name):
    assert bfp8model.check_stagger(STAGGER_CONTROLS[name](_steps("complete")), 5, mode="complete")
    assert bfp8model.check_stagger(_steps("issue"), 5, mode="complete")  # issue order does not give the complete order


def test_kernel_compiles_with_promotion_and_no_local_memory():
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda

    s = _spec(bn=128, stages=5, epilogue="direct", fp8_scale_load="block")  # the 128 x 128 tiles (one B scale per K block)
    src = render_kernel(plan_kernel(s))
    assert "part0" in src and "bfp8_sfb[kt]" in src and "bfp8_first" not in src and "wgmma_wait<0>();  // the partial sums" in src
    c = compile_cuda(src, s.kernel_name, "sm_90a")
    rep = check_sass(s, c.cubin)
    assert rep.ok and rep.local_bytes == 0, rep.problems
    assert "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3" in c.ptx


def simulated_bfp8_launches(monkeypatch) -> list:
    """A simulated H200 (132 SMs, 66 active 2-CTA clusters) for ptxgen.api.fp8blocks.gemm: the list each launch appends
    (grid, its arguments read back) to; tensor maps encoded as zero bytes."""
    from ptxgen.api.launch import streams
    from ptxgen.runtime.launch.gpu import Device

    launches = []

    class FakeKernel:
        def __init__(self, cubin, name, smem):
            pass

        def max_active_clusters(self, size, block):
            return 66

        def launch(self, grid, block, args, stream=0):
            launches.append((grid, args.read_back()))

    dev = Device(0, "simulated H200", (9, 0), None, None, 132)
    monkeypatch.setattr(streams, "require_gpu", lambda index=None: dev)
    monkeypatch.setattr(streams, "ensure_current", lambda d: None)
    monkeypatch.setattr("ptxgen.runtime.launch.gpu.Kernel", FakeKernel)
    monkeypatch.setattr("ptxgen.runtime.launch.tensormap.encode", lambda args: bytes(128))
    # nothing launches through another test's simulated kernels: loaded kernels and prepared launches start afresh
    from ptxgen.api import fp8blocks, fused

    for k in fused._KERNELS.values():
        monkeypatch.setattr(k, "_modules", {})
    for table in (fp8blocks._BY_INFO, fp8blocks._BY_TORCH):
        table.clear()
    # stream-K kernels (gemm's pick where the tiles fill less than half the SMs) get a made-up workspace
    monkeypatch.setattr(fp8blocks, "launcher", lambda: "driver")
    monkeypatch.setattr(fp8blocks, "streamk_workspace", lambda drv, di, stream, nbytes, like, ens: (SIMULATED_WORKSPACE, None))
    return launches


SIMULATED_WORKSPACE = 0x7000000


def test_api_marshals_the_scales(monkeypatch):
    import ptxgen.api.fp8blocks

    launches = simulated_bfp8_launches(monkeypatch)

    m, n, k = 200, 300, 400  # K blocks 4, N blocks 3
    a = CaiArray((m, k), "float8_e4m3fn", (k, 1), 0x10000000)
    b = CaiArray((n, k), "float8_e4m3fn", (k, 1), 0x20000000)
    out = CaiArray((m, n), "bfloat16", (304, 1), 0x30000000)
    sa = CaiArray((m, 4), "float32", (1, 208), 0x40000000)  # outer-dim-major, lds_a 208
    sb = CaiArray((4, 3), "float32", (1, 8), 0x50000000)  # s.t() of a 3 x 8 array
    ptxgen.api.fp8blocks.gemm(a, b, sa, sb, out, spec=ptxgen.api.fp8blocks.default_spec())  # scales by the scale warp
    ((_, args),) = launches
    assert args[-4:] == [0x40000000, 0x50000000, 208, 8]
    # no spec, lds_a % 4 == 0: tma_scales_spec, scale_a's tensor map after the scales; 2 x 3 tiles on 132 SMs: with
    # stream-K (fp8blocks.chosen_spec), the workspace last
    ptxgen.api.fp8blocks.gemm(a, b, sa, sb, out)
    assert launches[1][1][-6:-2] == [0x40000000, 0x50000000, 208, 8] and launches[1][1][-2] == bytes(128)
    assert launches[1][1][-1] == SIMULATED_WORKSPACE
    with pytest.raises(ptxgen.api.fp8blocks.ArgumentError, match="outer-dim-major"):
        ptxgen.api.fp8blocks.gemm(a, b, CaiArray((m, 4), "float32", (4, 1), 0x40000000), sb, out)
    with pytest.raises(ptxgen.api.fp8blocks.ArgumentError, match="shape"):
        ptxgen.api.fp8blocks.gemm(a, b, sa, CaiArray((4, 2), "float32", (1, 8), 0x50000000), out)


def test_show_draws_each_phase_of_the_b_scales():
    """layout.svg's block-FP8 panel: one row per split n0 % 128, each 8-column group coloured by its B block."""
    import re

    from ptxgen.derive.tile.layout import derive
    from ptxgen.emit.pictures.svg import layout_svg

    def phases(spec):
        by_phase = {}
        for ph, g, b in re.findall(r'data-phase="(\d+)" data-group="(\d+)" data-block="(\d)"', layout_svg(derive(spec))):
            by_phase.setdefault(int(ph), []).append(int(b))
        return by_phase

    assert phases(_spec(bn=192, stages=4, epilogue="tma")) == {0: [0] * 16 + [1] * 8, 64: [0] * 8 + [1] * 16}
    assert phases(_spec(bn=128, stages=5, epilogue="direct")) == {0: [0] * 16}
    assert phases(make_plain()) == {}


def make_plain():
    from ptxgen.derive.tile.spec import make_spec

    return make_spec(bm=128, bn=128, bk=128, a="kmajor-sw128", b="kmajor-sw128", dtype="e4m3", arch="sm_90a", stages=4)



# ---- --fp8-overlap halves: two column halves, each promoted while the other's wgmma group runs ----------------------
def _overlap(k_blocks, halves=2):
    return [(x.op, x.kb, x.half, x.n) for x in plan_block_fp8(128, 192, 128, overlap="halves" if halves == 2 else "none")
            .overlap_steps(k_blocks)]


@pytest.mark.parametrize("k_blocks", [0, 1, 2, 3, 7])
def test_overlap_steps_against_the_model(k_blocks):
    """The plan's order (the kernel's) in the model of one warpgroup's wgmma groups (bfp8model.check_overlap): fragments
    overwritten only after promotion, promotions of complete fragments once per K block and half, stages released in
    order after their MMAs, nothing in flight at a K block's start (the C7514 rule) and a group in flight during every
    promotion but the last. The one-fragment order passes the same checks except the last, which it cannot meet."""
    assert bfp8model.check_overlap(_overlap(k_blocks), k_blocks, 2) == []
    assert bfp8model.check_overlap(_overlap(k_blocks, 1), k_blocks, 1, require_overlap=False) == []
    if k_blocks >= 2:
        assert bfp8model.check_overlap(_overlap(k_blocks, 1), k_blocks, 1)  # no overlap without halves


def _rotated(k_blocks):
    """The first order tried: both halves issued before the loop, half 0 of kb + 1 issued before half 1 of kb is
    promoted, so two groups cross each K block boundary (ptxas: C7514)."""
    out = [("issue", 0, 0, 0), ("issue", 0, 1, 0)]
    for kb in range(k_blocks):
        out += [("wait", 0, 0, 1), ("promote", kb, 0, 0)]
        out += [("wait", 0, 0, 0)] if kb + 1 == k_blocks else [("issue", kb + 1, 0, 0), ("wait", 0, 0, 1)]
        out += [("release", kb, 0, 0), ("promote", kb, 1, 0)] + ([] if kb + 1 == k_blocks else [("issue", kb + 1, 1, 0)])
    return out


OVERLAP_CONTROLS = {
    "no wait before half 0's promotion": lambda st: [x for x in st if x != ("wait", 0, 0, 1)],
    "wait 1 instead of wait 0": lambda st: [("wait", 0, 0, 1) if x == ("wait", 0, 0, 0) else x for x in st],
    "release before the last wait": lambda st: [y for i, x in enumerate(st) for y in
                                                ([("release", st[i + 2][1], 0, 0), x] if x == ("wait", 0, 0, 1) else
                                                 [] if x[0] == "release" else [x])],
    "last half 1 not promoted": lambda st: st[:-1],
    "half 1 promoted with the current block": lambda st: [("promote", x[1] + 1, 1, 0) if x[0] == "promote" and x[2] == 1
                                                          and x is not st[-1] else x for x in st],
    "both halves across the K block boundary": lambda st: _rotated(4),
}


@pytest.mark.parametrize("name", sorted(OVERLAP_CONTROLS))
def test_overlap_controls_fail(name):
    assert bfp8model.check_overlap(OVERLAP_CONTROLS[name](_overlap(4)), 4, 2)


def test_rotated_order_is_correct_but_crosses_the_back_edge():
    """The control above fails only for the back-edge rule: its data flow is right (it is what ptxas refused)."""
    assert bfp8model.check_overlap(_rotated(4), 4, 2, back_edge_empty=False) == []
    assert bfp8model.check_overlap(_rotated(4), 4, 2) != []


@pytest.mark.parametrize("overlap", ["halves", "interleave"])
@pytest.mark.parametrize("bn", [b for b in BNS if b % 16 == 0])
def test_half_fragments_take_their_columns_b_scales(bn, overlap):
    """Register i of column half h (an m64n(BN/2) fragment, fragmodel) holds the column of accumulator register
    acc_offsets[h] + i (the m64nBN fragment) and takes block n0 / 128's B scale exactly when that column lies in it,
    for every split n0 % 128 of the tile (--fp8-overlap halves and interleave share the fragments and the split)."""
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.views.mma_view import half_mma_view
    from ptxgen.model.layouts import fragmodel

    plan = plan_block_fp8(128, bn, 128, overlap=overlap)
    view = half_mma_view(plan_kernel(_spec(bn=bn, stages=3, epilogue="direct", fp8_overlap=overlap))) if bn <= 192 else None
    assert plan.halves == 2 and view is not None or bn > 192
    regs = bn // 4
    for residue in sorted({t * bn % 128 for t in range(128)}):
        n0 = 1024 + residue
        ph = plan.phase_of(n0)
        for h in range(2):
            first = plan.half_first_regs(ph, h)
            for warp in range(4):
                for lane in range(32):
                    for i in range(regs):
                        r, c = fragmodel.wgmma_d_coords(warp, lane, i)
                        c += h * bn // 2
                        if view is not None:
                            assert fragmodel.wgmma_d_coords(warp, lane, view.acc_offsets[h] + i) == (r, c)
                        want = (n0 + c) // 128 - n0 // 128
                        assert (0 if i < first else 1) == want, (bn, residue, h, warp, lane, i)


def test_half_split_control_fails():
    """Control: the whole tile's split (first_groups x 4 registers) applied to half 1's fragment is wrong at BN 192."""
    plan = plan_block_fp8(128, 192, 128, overlap="halves")
    ph = plan.phase_of(0)  # columns 0..127 in block 0: half 1 (96..191) has groups 0..3 in block 0
    assert plan.half_first_regs(ph, 1) == 16 and min(48, ph.first_groups * 4) != 16


@pytest.mark.parametrize("scale_load", ["block", "smem"])
def test_overlap_halves_compiles_without_serialized_wgmma(scale_load):
    """NVRTC sm_90a: 8 QGMMA.64x96x32 per K block in the loop (two halves) and K block 0's 8 before it, two
    WARPGROUP.DEPBAR in the loop, no local memory, and neither C7514 (serialized wgmma) nor C7517 (an injected wait);
    with the scales from global memory or staged in shared memory (--fp8-scale-load smem)."""
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda

    s = _spec(bn=192, stages=4, epilogue="tma", fp8_overlap="halves", fp8_scale_load=scale_load)
    assert "_ovhalves" in s.kernel_name and "--fp8-overlap halves" in s.cli_args()
    src = render_kernel(plan_kernel(s))
    assert "mma_half(part0_1" in src and "wgmma_wait<1>();" in src
    c = compile_cuda(src, s.kernel_name, "sm_90a")
    rep = check_sass(s, c.cubin)
    assert rep.ok and rep.local_bytes == 0 and rep.mma_in_loop == 8 and rep.mma_total == 16, rep.problems
    assert "m64n96k32.f32.e4m3.e4m3" in c.ptx and "C7514" not in c.log and "C7517" not in c.log, c.log


@pytest.mark.parametrize("kw", [dict(fp8_stagger="issue"), dict(bn=136), dict(fp8_blocks="none"), dict(grouped="offs")])
def test_overlap_rules(kw):
    from ptxgen.derive.tile.spec import make_spec

    with pytest.raises(SpecError) as e:
        make_spec(**{**_spec(bn=192, stages=4, epilogue="tma").to_json(), "fp8_overlap": "halves", **kw})
    assert e.value.field == "--fp8-overlap"


def test_ffma_yield_patch_changes_only_the_flags_it_names():
    """ptxgen.runtime.compile.ffma_yield on the default kernel: some promotion FFMA are selected, the patched cubin disassembles
    to the same instructions at the same addresses, and only the selected FFMA differ, by the reuse and yield flags of
    their high word. Control: flipping one more bit of one FFMA is reported."""
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile import ffma_yield
    from ptxgen.runtime.compile.cache import compile_cached
    from ptxgen.runtime.compile.toolchain import run_tool

    s = _spec()
    cubin = compile_cached(render_kernel(plan_kernel(s)), s.kernel_name, "sm_90a").compiled.cubin
    before = run_tool("cuobjdump", ["--dump-sass"], cubin)
    new, patch = ffma_yield.interleave_ffma(cubin, before)
    assert patch.runs >= 1 and patch.changed and new != cubin
    after = run_tool("cuobjdump", ["--dump-sass"], new)
    assert ffma_yield.check_patch(before, after, patch) == []
    assert sum(x != y for x, y in zip(cubin, new)) <= 2 * len(patch.changed)
    bad = bytearray(new)
    ins = {i.addr: i for i in ffma_yield.instructions(before)}
    base = cubin.find(b"".join(i.encoded() for i in list(ins.values())[:8]))
    bad[base + patch.changed[0] + 8] ^= 0x01  # one more bit of the first patched FFMA's high word
    assert ffma_yield.check_patch(before, run_tool("cuobjdump", ["--dump-sass"], bytes(bad)), patch)


def test_outside_bound_passes_accumulation_error_and_catches_a_dropped_or_misscaled_block():
    """bfp8model.outside_bound: an output off by a tensor-core-sized accumulation error (1e-4 of each element's term
    magnitude, below the 6.2e-4 measured on the H200) passes everywhere, including near-cancelling sums, where a bound
    in the mean |D| fails; controls: one K block dropped, or one row's A scale of one block doubled, fail."""
    rng = np.random.default_rng(7)
    m, n, k = 64, 160, 512
    a, b = rng.standard_normal((m, k)), rng.standard_normal((n, k))
    sfa, sfb = rng.uniform(0.5, 1.5, (m, k // 128)), rng.uniform(0.5, 1.5, (k // 128, 2))
    ref = bfp8model.reference(a, sfa, b, sfb)
    mag = bfp8model.reference(np.abs(a), sfa, np.abs(b), sfb)
    noisy = ref + 1e-4 * mag * rng.choice([-1.0, 1.0], ref.shape)
    assert not bfp8model.outside_bound(noisy, a, sfa, b, sfb, 2.0 ** -7).any()
    near_zero = np.abs(ref) < 1e-3 * np.abs(ref).mean() + 1e-4 * mag  # where the old bound fails this noise
    old_bad = np.abs(noisy - ref) > 2.0 ** -7 * np.abs(ref) + 1e-3 * np.abs(ref).mean()
    assert old_bad.any() and near_zero.any()
    dropped = ref - bfp8model.reference(a[:, :128], sfa[:, :1], b[:, :128], sfb[:1])
    assert bfp8model.outside_bound(dropped, a, sfa, b, sfb, 2.0 ** -7).mean() > 0.5
    sfa2 = sfa.copy()
    sfa2[5, 2] *= 2
    wrong_scale = bfp8model.reference(a, sfa2, b, sfb)
    assert bfp8model.outside_bound(wrong_scale, a, sfa, b, sfb, 2.0 ** -7)[5].mean() > 0.5
