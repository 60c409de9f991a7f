"""The problems a review of the sm_100a kernels against CUTLASS found (issue 19), each with the check that
catches it. L1 (models) and L2 (compiler output); none of this has run on a Blackwell GPU."""

from __future__ import annotations

import pytest

from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.tile.spec import make_spec
from ptxgen.model.bridges.check_pipeline import config_of


# ---- fix 4: TMEM for one accumulator where a CTA computes one tile ------------------------------------------
def test_one_tile_per_cta_allocates_one_accumulator():
    """Schedule 'tile': a CTA accumulates one tile, so a second TMEM accumulator is never used; allocating 256
    columns for BN = 128 would let only 2 CTAs (of 512 columns) share an SM and the rest spin in tcgen05.alloc."""
    tile = make_spec(bm=128, bn=128, bk=32, a="kmajor-sw64")
    assert tile.accumulator_stages == 1 and tile.tmem_alloc_columns == 128
    assert plan_kernel(tile).pipeline.acc_stages == 1
    persistent = make_spec(bm=128, bn=128, bk=32, a="kmajor-sw64", schedule="persistent")
    assert persistent.accumulator_stages == 2 and persistent.tmem_alloc_columns == 256
    # block-scaled: the scale factors come after the one accumulator
    mx = make_spec(bm=128, bn=128, bk=128, a="kmajor-sw128", b="kmajor-sw128", dtype="e4m3", scale="ue8m0")
    assert mx.accumulator_stages == 1 and mx.tmem_alloc_columns == 256  # 128 + 2 stages x 8 SF columns -> 256


# ---- fix 5: one tcgen05.wait::ld per group of TMEM loads, the loaded registers tied to it -------------------
def _ptx_counts(spec):
    from ptxgen.runtime.compile.artifacts import generate

    art = generate(spec, sass=False)
    ptx = art.compiled.ptx
    return ptx.count("tcgen05.ld.sync.aligned"), ptx.count("tcgen05.wait::ld"), art.files["kernel.cu"]


@pytest.mark.parametrize("kw", [
    dict(bm=128, bn=128, bk=32, a="kmajor-sw64"),  # the seed: direct epilogue, 4 loads of 32 columns a warp
    dict(bm=128, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", out_dtype="bf16", stages=3,
         schedule="persistent", epilogue="tma"),  # TMA-store chunks of 64 columns, and the direct path beside it
])
def test_tmem_loads_wait_once_per_group(kw):
    """Waiting after every 32-column load serializes the TMEM reads; CUTLASS issues a subtile's loads, then one
    tcgen05.wait::ld (fence_view_async_tmem_load). Here a group is 64 columns: 2 loads of 32 per wait."""
    import re

    n_ld, n_wait, cu = _ptx_counts(make_spec(**kw))
    assert n_ld >= 4 and n_wait * 2 == n_ld, (n_ld, n_wait)
    # the wait names every register its group loaded ("+r"), so no use of them can be scheduled before it
    waits = re.findall(r'asm volatile\("tcgen05\.wait::ld\.sync\.aligned;"\s*:([^;]*);', cu)
    assert waits and all(w.count('"+r"') == 64 for w in waits), waits


# ---- fix 3: the producer drains the last empty arrivals before the CTA exits (CUTLASS load_tail) ------------
def _sm100_cfg(**kw):
    from ptxgen.model.sim import pipesim

    base = dict(arch="sm_100a", loader="tma", stages=2, k_tiles=1, expect_tx_bytes=64, acc_barrier=True, epilogue_warps=4)
    return pipesim.Config(**{**base, **kw})


@pytest.mark.parametrize("ctas", [1, 2])
def test_control_without_a_producer_tail_a_commit_arrives_after_exit(ctas):
    """tcgen05.commit arrives asynchronously, on each barrier (and, for a pair, each CTA) on its own: the epilogue
    can see acc_full, finish, and the CTA exit while the commit of the last K-tile is still on its way to empty[s]."""
    from ptxgen.model.sim import pipesim

    extra = dict(ctas=2, acc_empty_arrivals=8, copy_bytes=(32,)) if ctas == 2 else {}  # each CTA loads half
    res = pipesim.explore(_sm100_cfg(producer_tail=False, **extra), seeds=range(40))
    assert any("after the CTA exited" in p for p in res.problems), res.problems


@pytest.mark.parametrize("ctas", [1, 2])
@pytest.mark.parametrize("k_tiles", [1, 2, 3, 5])
def test_the_producer_tail_waits_for_every_arrival(ctas, k_tiles):
    from ptxgen.model.sim import pipesim

    extra = dict(ctas=2, acc_empty_arrivals=8, copy_bytes=(32,)) if ctas == 2 else {}  # each CTA loads half
    res = pipesim.explore(_sm100_cfg(producer_tail=True, k_tiles=k_tiles, stages=3, **extra), seeds=range(40))
    assert res.problems == []


def test_control_cp_async_producers_need_the_tail_too():
    """The cp.async producer warpgroup: every thread waits the empty barriers (found by the derived-plan check)."""
    from ptxgen.model.sim import pipesim

    base = dict(loader="cp.async", producer_threads=4, full_arrivals=4, expect_tx_bytes=0, stages=1, k_tiles=2, tiles_per_cta=3)
    assert any("after the CTA exited" in p for p in pipesim.explore(_sm100_cfg(producer_tail=False, **base), seeds=range(40)).problems)
    assert pipesim.explore(_sm100_cfg(producer_tail=True, **base), seeds=range(40)).problems == []


def test_sm100_kernels_have_the_producer_tail():
    from ptxgen.derive.tile.layout import derive
    from ptxgen.emit.render import render_kernel
    from ptxgen.model.bridges.check_pipeline import check_spec

    for kw in (dict(bm=128, bn=128, bk=32, a="kmajor-sw64", stages=3),
               dict(bm=256, bn=128, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", cta_group=2, stages=3)):
        spec = make_spec(**kw)
        plan = plan_kernel(spec).pipeline
        assert plan.producer_tail and config_of(plan, 2).producer_tail
        assert check_spec(spec) == []
        cu = render_kernel(derive(spec))
        assert "for (int j = 0; j < 3; ++j, ++it)" in cu  # one wait on each of the 3 stages' empty barriers
    hopper = make_spec(bm=128, bn=128, bk=64, a="kmajor-sw128", arch="sm_90a")
    assert not plan_kernel(hopper).pipeline.producer_tail  # wgmma releases with plain mbarrier.arrive, in order


# ---- fix 2: the scale-factor buffer is CUTLASS's when K is not a multiple of BK -----------------------------
MXFP8 = dict(bm=128, bn=128, bk=256, a="kmajor-sw128", b="kmajor-sw128", dtype="e4m3", scale="ue8m0", stages=2)
NVFP4 = dict(bm=128, bn=256, bk=256, a="kmajor-sw128", b="kmajor-sw128", dtype="e2m1", scale="ue4m3", stages=2)


def cutlass_sf_offset(row: int, k: int, M: int, K: int, vec: int) -> int:
    """CUTLASS Sm1xxBlockScaledConfig<vec>::tile_atom_to_shape_SFA((M, N, K, 1)), typed from
    include/cutlass/detail/sm100_blockscaled_layout.hpp: tile_to_shape(SfKMajorAtom, make_shape(M, K, L),
    Step<_2,_1,_3>) with SfKMajorAtom = Layout<Shape<Shape<_32,_4>, Shape<Int<SFVecSize>,_4>>,
    Stride<Stride<_16,_4>, Stride<_0,_1>>>. tile_to_shape pads each mode to a multiple of the atom (128 rows,
    4 x vec K elements) and lays the atoms out with make_ordered_layout(product, Step<_2,_1,_3>): the K mode
    (order 1) is stride 1, M (order 2) next; each atom is cosize(SfKMajorAtom) = 512 bytes long."""
    atom_rows, atom_k = 32 * 4, vec * 4
    prod_m, prod_k = -(-M // atom_rows), -(-K // atom_k)
    assert row < prod_m * atom_rows and k < prod_k * atom_k
    stride_k, stride_m = 1, prod_k  # make_ordered_layout: the smallest order gets stride 1
    cosize = (32 - 1) * 16 + (4 - 1) * 4 + (vec - 1) * 0 + (4 - 1) * 1 + 1
    r, kk = row % atom_rows, k % atom_k
    inside = (r % 32) * 16 + (r // 32) * 4 + (kk % vec) * 0 + (kk // vec) * 1
    return cosize * ((row // atom_rows) * stride_m + (k // atom_k) * stride_k) + inside


def _c_eval(expr: str, **env) -> int:
    """A rendered C integer expression of the kernel, in Python (size_t casts dropped, / is integer division)."""
    import re

    py = re.sub(r"(\d+)u\b", r"\1", re.sub(r"static_cast<\w+>", "", expr)).replace("/", "//")
    return eval(py, {"min": min, "max": max}, env)  # noqa: S307 -- our own rendered expression


@pytest.mark.parametrize("kw,K", [(MXFP8, 384), (MXFP8, 300), (MXFP8, 256), (NVFP4, 384), (NVFP4, 200), (NVFP4, 1000)])
def test_kernel_sf_strides_match_cutlass(kw, K):
    """The kernel's scale-factor atom stride (sf_k_atoms) and each K-tile's bulk-copy sources, evaluated from the
    rendered C, address exactly CUTLASS's bytes, and never past the end of CUTLASS's buffer."""
    import re

    from ptxgen.derive.tile.layout import derive
    from ptxgen.emit.render import render_kernel
    from ptxgen.isa.blockscale import kind_of

    spec = make_spec(**kw)
    vec = kind_of(spec.dtype, spec.scale.dtype).vec_elements
    cu = render_kernel(derive(spec))
    num_k_tiles = -(-K // spec.bk)
    k_atoms = _c_eval(re.search(r"const size_t sf_k_atoms = (.*?);", cu).group(1), K=K, num_k_tiles=num_k_tiles)
    rows = 2 * max(spec.bm, spec.bn)
    # CUTLASS: the first byte of row block 1 (rows 128..) is 512 x ceil(K / 4V)
    assert 512 * k_atoms == cutlass_sf_offset(128, 0, rows, K, vec)
    buffer_bytes = cutlass_sf_offset(rows - 1, -(-K // (4 * vec)) * 4 * vec - 1, rows, K, vec) + 1
    copies = _bulk_loads(cu)
    assert copies
    for kt in range(num_k_tiles):
        for row0 in (0, 128):
            for _, smem_offset, _, src, nbytes in copies:
                groups = spec.bk // (4 * vec)
                block = int(smem_offset) // (512 * groups)  # the stage holds each 128-row block's atoms in turn
                env = dict(K=K, kt=kt, num_k_tiles=num_k_tiles, sf_k_atoms=k_atoms, m0=row0, n0=row0,
                           sfa_last_block=rows // 128 - 1, sfb_last_block=rows // 128 - 1)
                first = _c_eval(src, **env)
                n = _c_eval(nbytes, sf_atoms=max(0, min(groups, k_atoms - kt * groups)), **env)
                assert first == cutlass_sf_offset(row0 + 128 * block, kt * spec.bk, rows, K, vec)
                assert first + n <= buffer_bytes, (kt, row0, first, n, buffer_bytes)


# ---- fixes 2 and 6 at L1: the scale-factor model over K % BK != 0, chunks past K zero -----------------------
@pytest.mark.parametrize("kw,K", [(MXFP8, 384), (MXFP8, 300), (MXFP8, 520), (NVFP4, 200), (NVFP4, 330),
                                  (dict(MXFP8, bk=128, bn=64), 200)])
def test_scale_model_over_partial_k_tiles(kw, K):
    from ptxgen.derive.tile.layout import derive
    from ptxgen.model.bridges.verify_scales import check_scales

    assert check_scales(derive(make_spec(**kw)), k_elements=K) == []


def test_control_whole_stage_copies_read_past_the_buffer(monkeypatch):
    """The pre-fix copy (BK / 4V atoms every K-tile) reads past CUTLASS's buffer in the last K-tile."""
    from ptxgen.derive.scaled import scales
    from ptxgen.derive.tile.layout import derive
    from ptxgen.model.bridges import verify_scales

    monkeypatch.setattr(scales, "stage_atoms", lambda groups, kt, k_atoms: groups)
    problems = verify_scales.check_scales(derive(make_spec(**MXFP8)), k_elements=384)
    assert any("reads past" in p for p in problems), problems


def test_control_without_the_zero_fill_padding_reaches_the_mma(monkeypatch):
    """Fix 6: without zeroing, the MMA of the last K-tile takes the buffer's padding bytes (the user's: NaN is
    possible) or a stage's stale bytes for chunks past K."""
    from ptxgen.derive.tile.layout import derive
    from ptxgen.model.bridges import verify_scales

    monkeypatch.setattr(verify_scales, "stage_zero_fill", lambda *a: ())
    for K, what in ((300, "padding"), (384, "stale")):
        problems = verify_scales.check_scales(derive(make_spec(**MXFP8)), k_elements=K)
        assert any("a chunk past K" in p and what in p for p in problems), problems


# ---- coverage: block-scaled N = 192 (CUTLASS: SFB as if N were 256) --------------------------------------------
@pytest.mark.parametrize("K", [None, 300])
def test_block_scaled_n192_scale_model(K):
    from ptxgen.derive.tile.layout import derive
    from ptxgen.model.bridges.verify_scales import check_scales

    spec = make_spec(**dict(MXFP8, bn=192))
    assert check_scales(derive(spec), k_elements=K) == []


def test_control_n192_without_the_column_offset_misreads(monkeypatch):
    from ptxgen.derive.tile.layout import derive
    from ptxgen.model.bridges import verify_scales

    monkeypatch.setattr(verify_scales, "sfb_row_column", lambda n0, bn: 0)
    assert any("B:" in p for p in verify_scales.check_scales(derive(make_spec(**dict(MXFP8, bn=192)))))


def test_block_scaled_n192_compiles_with_the_intended_sass():
    from ptxgen.runtime.compile.artifacts import generate

    art = generate(make_spec(**dict(MXFP8, bn=192, bk=128)))
    assert art.sass.ok, art.sass.problems
    assert "(n0 % 128) / 32" in art.files["kernel.cu"]


def _bulk_loads(cu: str) -> list[tuple[str, str, str, str, str]]:
    """(stage, smem offset, SFA/SFB, source offset, bytes) of every bulk_load call of a rendered kernel; the
    arguments split at top-level commas (the source offset holds a min(a, b))."""
    out = []
    for line in cu.splitlines():
        line = line.strip()
        if not line.startswith("bulk_load("):
            continue
        args, depth, cur = [], 0, ""
        for ch in line[len("bulk_load("):line.rindex(");")]:
            if ch == "," and depth == 0:
                args.append(cur.strip())
                cur = ""
                continue
            depth += ch == "("
            depth -= ch == ")"
            cur += ch
        args.append(cur.strip())
        dst, src, nbytes, _bar = args
        stage, offset = (x.strip() for x in dst.split("+"))
        op, source = (x.strip() for x in src.split("+", 1))
        out.append((stage.replace("_stage", ""), offset.rstrip("u"), op, source, nbytes))
    return out
