"""Block scaling with a CTA pair (``--scale ... --cta-group 2``, tcgen05.mma.cta_group::2 with block_scale, M = 256):
the derived plan, L1 (the scale-factor model over both CTAs' shared and tensor memory, the pair read model, the
pipeline simulator with the peer's scale-factor relay; controls that must fail) and L2 (NVRTC for sm_100a, the
.2CTA SASS forms, no local memory). Nothing here has run on hardware."""

import dataclasses
import os
import subprocess

import pytest

from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.tile.layout import derive
from ptxgen.derive.tile.spec import make_spec
from ptxgen.isa.types import SpecError
from ptxgen.model.sim import pipesim
from ptxgen.model.bridges.check_pipeline import check_spec, config_of, sf_copy_bytes, tma_copy_bytes
from ptxgen.model.bridges.verify import check_tile
from ptxgen.model.bridges.verify_scales import check_scales
from test_cutlass_review import _bulk_loads, _c_eval  # rendered bulk copies and C expressions, read in Python

K = dict(a="kmajor-sw128", b="kmajor-sw128", cta_group=2, bm=256)
NVF4 = dict(K, bn=256, bk=256, dtype="e2m1", scale="ue4m3", stages=3)  # the NVFP4 production shape
MX8 = dict(K, bn=128, bk=128, dtype="e4m3", scale="ue8m0", stages=4)
MXF4 = dict(K, bn=256, bk=256, dtype="e2m1", scale="ue8m0", stages=2)


# ---- spec and plan ---------------------------------------------------------------------------------------------
def test_m128_pairs_are_refused_with_the_2x2_data_path_rule():
    with pytest.raises(SpecError) as e:
        make_spec(**dict(MX8, bm=128))
    msg = str(e.value)
    assert e.value.field == "--bm" and "2x2 data path" in msg and "ScaleFactorDuplicated2by2" in msg and "mma_traits_sm100" in msg


def test_pair_plan_splits_sfa_and_keeps_sfb_whole_in_each_cta():
    spec = make_spec(**NVF4)
    t = derive(spec)
    sc = t.scales
    # each CTA: its 128 rows of SFA (one atom block), all 256 SFB rows (two blocks), 4 atoms along K (BK / 4V = 256 / 64)
    assert (sc.a.rows, sc.a.blocks, sc.b.rows, sc.b.blocks, sc.a.groups) == (128, 1, 256, 2, 4)
    assert sc.a_cta_row0 == (0, 128) and sc.b_cta_row0 == (0, 0)
    assert sc.mma_opcode == "tcgen05.mma.cta_group::2.kind::mxf4nvf4.block_scale.scale_vec::4X"
    assert sc.cp_opcode == "tcgen05.cp.cta_group::2.32x128b.warpx4"
    plan = plan_kernel(spec)
    ab = spec.stage_bytes("a") + spec.stage_bytes("b")
    sf = sc.a.stage_bytes + sc.b.stage_bytes
    assert plan.layout.pair.expect_tx_bytes == 2 * ab + sf == plan.pipeline.expect_tx_bytes
    assert plan.layout.pair.peer_expect_tx_bytes == sf and plan.layout.pair.full_arrivals_leader == 2
    assert plan.pipeline.full_arrivals == 2 and plan.pipeline.peer_full_arrivals == 1 and plan.pipeline.sf_relay
    # the instruction descriptor carries the pair's M = 256 (M >> 7 = 2 at bits 27-28)
    assert (int(t.idesc.hex, 16) >> 27) & 3 == 2
    # TMEM per CTA: one 256-column accumulator + 3 stages x (4 SFA + 8 SFB atoms x 4 columns)
    assert spec.sf_tmem_columns == 3 * 4 * (4 + 8) and spec.tmem_alloc_columns == 512
    j = t.to_json()
    assert j["scales"]["cta_row0"] == {"sfa": [0, 128], "sfb": [0, 0]}
    assert j["cta_pair"]["sf_relay"] == {"peer_expect_tx_bytes": sf, "leader_full_arrivals": 2}


def test_single_cta_plans_are_unchanged():
    one = make_spec(**dict(MX8, bm=128, cta_group=1))
    sc = derive(one).scales
    assert sc.mma_opcode == "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X" and sc.cta_group == 1
    assert "cta_row0" not in sc.to_json() and plan_kernel(one).pipeline.full_arrivals == 1


def test_explain_names_the_split_and_the_relay(capsys):
    from ptxgen.cli import main

    args = ["explain", "--bm", "256", "--bn", "256", "--bk", "256", "--a", "kmajor-sw128", "--b", "kmajor-sw128", "--dtype",
            "e2m1", "--scale", "ue4m3", "--cta-group", "2", "--stages", "3"]
    assert main(args) == 0
    out = capsys.readouterr().out
    for word in ("sf_split", "sf_tcgen05_cp", "sf_relay", "tcgen05.cp.cta_group::2", "SFA rows r x 128"):
        assert word in out, word


# ---- L1: the scale-factor model over both CTAs -------------------------------------------------------------------
def _pair_space():
    out = []
    for dt, sc, bks in (("e4m3", "ue8m0", (128, 256)), ("e2m1", "ue8m0", (256,)), ("e2m1", "ue4m3", (128, 256))):
        for bn in (64, 128, 192, 256):
            for bk in bks:
                for stages in (1, 3):
                    try:
                        out.append(make_spec(**dict(K, bn=bn, bk=bk, dtype=dt, scale=sc, stages=stages, b_dtype=None)))
                    except SpecError:
                        pass
    return out


PAIRS = _pair_space()


def test_pair_space_is_not_empty():
    assert {t.mma_kind for t in PAIRS} == {"mxf8f6f4", "mxf4", "mxf4nvf4"} and len(PAIRS) >= 20


# The whole space takes minutes on 2 cores (slow tier); every default run checks one spec of each kind, and the NVFP4
# production tile's N = 256.
SAMPLE = [next(t for t in PAIRS if t.mma_kind == kind) for kind in sorted({t.mma_kind for t in PAIRS})] + \
    [next(t for t in PAIRS if (t.mma_kind, t.bn) == ("mxf4nvf4", 256))]


@pytest.mark.parametrize("t", [pytest.param(t, marks=() if t in SAMPLE else pytest.mark.slow) for t in PAIRS],
                         ids=lambda t: t.kernel_name)
def test_every_element_of_the_pair_is_scaled_by_its_own_factor(t):
    lay = derive(t)
    assert check_scales(lay) == []
    assert check_scales(lay, k_elements=2 * t.bk - 40) == []  # K % BK != 0: chunks past K zeroed in both CTAs


@pytest.mark.parametrize("t", [t for t in PAIRS if t.stages == 3][::3], ids=lambda t: t.kernel_name)
def test_pair_operands_read_back_through_the_pair_model(t):
    assert check_tile(derive(t)) == []


@pytest.mark.parametrize(
    "wrong",
    [
        dict(a_cta_row0=(0, 0)),  # both CTAs copy the first 128 rows' SFA
        dict(b_cta_row0=(0, 128)),  # SFB split like B (CTA 1 copies rows 128.. only)
        dict(cta_group=1),  # tcgen05.cp.cta_group::1 by the leader: the peer's Tensor Memory gets no scale factors
    ],
    ids=["sfa-not-split", "sfb-split-like-b", "cp-cta-group-1"],
)
@pytest.mark.slow
def test_control_a_wrong_pair_scale_plan_fails_slow_tier(wrong):
    _wrong_plan_fails(wrong)


def test_control_a_wrong_pair_scale_plan_fails():
    """One control in every default run (the SFA of both CTAs from the first 128 rows); all three in the slow tier."""
    _wrong_plan_fails(dict(a_cta_row0=(0, 0)))


def _wrong_plan_fails(wrong):
    lay = derive(make_spec(**NVF4))
    assert check_scales(lay) == []
    assert check_scales(lay, plan=dataclasses.replace(lay.scales, **wrong)), f"the model passed {wrong}"


def test_control_the_peer_must_zero_its_chunks_past_k():
    lay = derive(make_spec(**MX8))
    k = 2 * lay.spec.bk - 40
    assert check_scales(lay, k_elements=k) == []
    problems = check_scales(lay, k_elements=k, zeroing_ctas=(0,))  # only the leader's MMA thread zeroes
    assert problems and all("CTA 0's rows" not in p for p in problems if "B (" in p), problems[:3]


# ---- L1: the pipeline with the relay ------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [NVF4, MX8, dict(MXF4, schedule="persistent"), dict(MX8, stages=1, bn=64)],
                         ids=["nvf4", "mxf8", "mxf4-persistent", "one-stage"])
def test_pair_pipeline_with_the_relay_neither_deadlocks_nor_races(kw):
    assert check_spec(make_spec(**kw)) == []


@pytest.mark.parametrize(
    "wrong,expect",
    [
        (dict(relay_waits=False), "torn read"),  # the relay arrives before the peer's scale factors landed
        (dict(sf_relay=False), "deadlock"),  # nobody forwards the peer's barrier: the leader's full[s] never completes
        (dict(full_arrivals=1), "deadlock"),  # the leader does not wait for the relay
        (dict(peer_full_arrivals=2), "deadlock"),
    ],
    ids=["relay-does-not-wait", "no-relay", "leader-counts-one", "peer-counts-two"],
)
def test_control_a_wrong_relay_fails_the_simulator(wrong, expect):
    spec = make_spec(**MX8)
    plan = plan_kernel(spec).pipeline
    cfg = config_of(plan, 5, tma_copy_bytes(spec), 2, sf_copy_bytes=sf_copy_bytes(spec))
    assert pipesim.explore(cfg, range(6)).ok
    r = pipesim.explore(dataclasses.replace(cfg, **wrong), range(6))
    assert not r.ok and any(expect in p for p in r.problems), r.problems[:2]


# ---- L2: NVRTC, SASS ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [NVF4, MX8, dict(MXF4, schedule="persistent"), dict(NVF4, out_dtype="bf16", epilogue="tma")],
                         ids=["mxf4nvf4", "mxf8f6f4", "mxf4-persistent", "mxf4nvf4-tma-store"])
def test_block_scaled_pair_kernels_compile_with_the_pair_forms(kw):
    from ptxgen.runtime.compile.artifacts import generate

    spec = make_spec(**kw)
    art = generate(spec)
    ptx, cu = art.files["kernel.ptx"], art.files["kernel.cu"]
    sc = derive(spec).scales
    for form in (sc.mma_opcode, "tcgen05.cp.cta_group::2.32x128b.warpx4", "tcgen05.commit.cta_group::2", "cp.async.bulk.tensor.2d.cta_group::2",
                 "cp.async.bulk.shared::cluster.global", ".reqnctapercluster 2, 1, 1"):
        assert form in ptx, form
    assert "cta_group::1" not in ptx
    # the remote arrivals: the epilogue's acc_empty and the peer's relay of its scale-factor barrier
    assert ptx.count("mbarrier.arrive.release.cluster.shared::cluster") == 2
    assert "m_cta / 128" in cu and "(cluster_ctarank() == 0u ? 2u : 1u)" in cu
    rep = art.sass
    assert rep.ok, rep.problems
    assert rep.mma_in_loop == spec.mmas_per_k_tile and rep.local_bytes == 0 and rep.stack_bytes == 0
    assert rep.structure["tcgen05.cp"] == len(sc.a.tmem_copies) + len(sc.b.tmem_copies)


def test_sass_check_tells_a_pair_copy_from_a_single_one():
    """Control: the block-scaled pair's cubin fails the cta_group::1 spec's check on its UTCCP (and MMA) forms."""
    from ptxgen.runtime.compile.artifacts import generate
    from ptxgen.runtime.compile.cache import compile_cached, sass_dumps
    from ptxgen.runtime.compile.sass import check_sass

    pair = make_spec(**MX8)
    single = make_spec(**dict(MX8, bm=128, cta_group=1))
    for have, judge, word in ((pair, single, "UTCCP) with .2CTA"), (single, pair, "UTCCP) without .2CTA")):
        art = generate(have, sass=False)
        res = compile_cached(art.files["kernel.cu"], have.kernel_name, have.arch.value)
        dump, resources = sass_dumps(res)
        rep = check_sass(judge, art.compiled.cubin, dump, resources)
        assert any(word in p for p in rep.problems), rep.problems


def test_independent_nvcc_compiles_a_block_scaled_pair_kernel(tmp_path):
    from ptxgen.runtime.compile.artifacts import build
    from ptxgen.runtime.compile.sass import check_sass
    from test_emit import _nvcc

    nvcc = _nvcc()
    if not nvcc:
        pytest.skip("nvcc not installed (pip install nvidia-cuda-nvcc)")
    spec = make_spec(**NVF4)
    d, _ = build(spec, tmp_path)
    cubin = tmp_path / "pair.cubin"
    proc = subprocess.run([nvcc, "-gencode=arch=compute_100a,code=sm_100a", "-cubin", "-o", str(cubin), str(d / "kernel.cu")],
                          capture_output=True, text=True, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    rep = check_sass(spec, cubin.read_bytes())
    assert rep.ok and rep.local_bytes == 0, rep.problems


# ---- the buffers' row padding: a tile block past the last 128 rows (BN = 256 at the N edge, a pair's CTA 1) ------
@pytest.mark.parametrize("kw", [pytest.param(MX8, marks=pytest.mark.slow), dict(MX8, bn=256), dict(MX8, bm=128, bn=256, cta_group=1),
                                pytest.param(dict(NVF4, stages=2), marks=pytest.mark.slow)],
                         ids=["pair-bn128", "pair-bn256", "one-cta-bn256", "pair-nvf4"])
def test_edge_tiles_copy_inside_cutlass_buffers(kw):
    """CUTLASS pads SFA/SFB rows to 128, not to the tile: with M = N = 300 the pair's CTA 1 at m0 = 256 (rows 384..)
    and a BN = 256 tile at n0 = 256 (rows 384..) have no atoms; their copies take the last block, in bounds, and
    every row inside the matrix still gets its own scale factors."""
    lay = derive(make_spec(**kw))
    assert check_scales(lay, m_rows=300, n_rows=300) == []
    assert check_scales(lay, m_rows=300, n_rows=300, k_elements=2 * lay.spec.bk - 40) == []


def test_control_without_the_last_block_rule_a_copy_reads_past_the_buffer():
    lay = derive(make_spec(**dict(MX8, bn=256)))
    problems = check_scales(lay, m_rows=300, n_rows=300, clamp=False)
    assert any("SFA copy" in p and "reads past" in p for p in problems), problems[:3]  # the pair's CTA 1 at m0 = 256
    assert any("SFB copy" in p and "reads past" in p for p in problems), problems[:3]  # BN = 256 at n0 = 256


def test_rendered_copy_sources_stay_inside_the_buffers_at_the_edges():
    """The kernel's rendered bulk-copy sources, evaluated in Python for M = N = 300: inside CUTLASS's buffers."""
    import re

    from ptxgen.derive.scaled.sf_atoms import sf_global_bytes, sf_k_atoms
    from ptxgen.emit.render import render_kernel

    spec = make_spec(**dict(MX8, bn=256))
    cu = render_kernel(derive(spec))
    M = N = 300
    K = 4 * spec.bk
    env = {"M": M, "N": N, "K": K}
    for name in ("sf_k_atoms", "sfa_last_block", "sfb_last_block"):
        expr = re.search(rf"const size_t {name} = (.*?);", cu).group(1)
        env[name] = _c_eval(expr, **env)
    assert env["sf_k_atoms"] == sf_k_atoms(K, 32) and env["sfa_last_block"] == env["sfb_last_block"] == 2
    copies = _bulk_loads(cu)
    assert len(copies) == 3  # SFA one block, SFB two
    for m0, n0 in ((0, 0), (256, 256)):
        for rank in (0, 1):
            for kt in range(4):
                for op, _, _, src, nbytes in copies:
                    e = dict(env, kt=kt, m0=m0, n0=n0, m_cta=m0 + 128 * rank, sf_atoms=spec.bk // 128)
                    first, n = _c_eval(src, **e), _c_eval(nbytes, **e)
                    assert first + n <= sf_global_bytes(M if op == "sfa" else N, K, 32), (op, m0, n0, rank, kt)
