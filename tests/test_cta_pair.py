"""--cta-group 2: the CTA pair (tcgen05.mma.cta_group::2). L1 (pair read model against the writer's per-CTA
loads, with controls that split the pair wrongly) and L2 (NVRTC and nvcc compile for sm_100a, SASS has the .2CTA
forms, no local memory). Nothing here ran on Blackwell hardware."""

import os
import subprocess

import numpy as np
import pytest

from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.tile.layout import derive
from ptxgen.derive.tile.spec import TileSpec, make_spec
from ptxgen.isa.shapes import legal_bn
from ptxgen.isa.types import Arch, DType, Major, SpecError
from ptxgen.model.layouts import pairmodel
from ptxgen.model.bridges.verify import check_tile
from ptxgen.model.bridges.verify_pair import check_epilogue, check_pair, check_pair_stage, mutated

PAIR = dict(bm=256, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", cta_group=2, stages=4)
PAIR128 = dict(bm=128, bn=128, bk=64, a="kmajor-sw128", b="mnmajor-sw128", cta_group=2, stages=4)


# ---- spec --------------------------------------------------------------------------------------------
def test_cta_group_1_leaves_names_specs_and_flags_unchanged():
    t = make_spec(bm=128, bn=128, bk=32, a="kmajor-sw64")
    assert t.cta_group == 1 and not t.pair
    assert "cta" not in t.kernel_name and "--cta-group" not in t.cli_args() and "cta_group" not in t.to_json()
    assert "cta_pair" not in derive(t).to_json()


def test_pair_spec_round_trips_and_is_named():
    t = make_spec(**PAIR)
    assert t.kernel_name.endswith("_cta2") and "--cta-group 2" in t.cli_args()
    assert TileSpec.from_json(t.to_json()) == t
    # each CTA holds half of A and half of B; the accumulator holds all BN columns of its 128 rows (Layout A)
    assert (t.mn_extent("a"), t.mn_extent("b"), t.cta_rows, t.tmem_columns) == (128, 128, 128, 256)
    t2 = make_spec(**PAIR128)  # Layout B: 64 rows per CTA, BN/2 columns in each of two lane halves
    assert (t2.mn_extent("a"), t2.mn_extent("b"), t2.cta_rows, t2.acc_columns) == (64, 64, 64, 64)


@pytest.mark.parametrize(
    "kw,flag,words",
    [
        (dict(cta_group=3), "--cta-group", "::1 or ::2"),
        (dict(cta_group=2, arch="sm_90a"), "--cta-group", "tcgen05"),
        (dict(cta_group=2, loader="cp.async"), "--cta-group", "TMA"),
        (dict(cta_group=2, bm=64), "--bm", "cta_group::2 has M = 128 or 256"),
        (dict(cta_group=2, bn=24), "--bn", "16..256 in steps of 16"),
        (dict(cta_group=2, bn=48, dtype="s8", acc="s32", a="kmajor-sw32", b="kmajor-sw32"), "--bn", "32..256 in steps of 32"),
        (dict(cta_group=2, bn=48, dtype="e4m3", a="kmajor-sw32", b="mnmajor-sw32"), "--bn", "N-major"),
        # per-CTA N = 32 f16 = 64 B: an MN-major 128-byte atom row does not fit one CTA's half of B
        (dict(cta_group=2, bn=64, b="mnmajor-sw128"), "--b", "atom row"),
    ],
)
def test_illegal_pairs_are_refused_with_the_rule(kw, flag, words):
    base = dict(bm=128, bn=128, bk=64, a="kmajor-sw128", b="kmajor-sw128")
    base.update(kw)
    with pytest.raises(SpecError) as e:
        make_spec(**base)
    assert e.value.field == flag and words in str(e.value), str(e.value)


def test_pair_n_legality_is_the_ptx_table():
    """PTX '.kind and shapes', cta_group::2: f16/tf32/f8f6f4 N = 16..256 step 16; i8 N = 32..256 step 32; 8-bit
    N-major B N step 32 (Table 52). Transcribed, not computed by the code under test."""
    assert legal_bn(Arch.SM100A, DType.F16, Major.K, 2) == tuple(range(16, 257, 16))
    assert legal_bn(Arch.SM100A, DType.TF32, Major.K, 2) == tuple(range(16, 257, 16))
    assert legal_bn(Arch.SM100A, DType.E4M3, Major.K, 2) == tuple(range(16, 257, 16))
    assert legal_bn(Arch.SM100A, DType.E4M3, Major.MN, 2) == tuple(range(32, 257, 32))
    assert legal_bn(Arch.SM100A, DType.S8, Major.K, 2) == tuple(range(32, 257, 32))


# ---- the instruction descriptor: CuTe's values -------------------------------------------------------
# CuTe host run: MMA_Traits<SM100_MMA_*_2x1SM_SS<...>>{}.idesc_ printed by a host program built with nvcc
# (/usr/local/cuda-13.0) against NVIDIA/cutlass include/ at commit 7107b0553 (2026-11-30); make_instr_desc sets
# m_dim_ = M >> 4 with the 2x1SM atom's M, the pair's whole M.
CUTE_2SM_IDESC = [
    (dict(PAIR), 0x10400010),  # SM100_MMA_F16BF16_2x1SM_SS<half_t, half_t, float, 256, 256, K, K>
    (dict(PAIR, dtype="bf16", bn=128), 0x10200490),  # <bfloat16_t, bfloat16_t, float, 256, 128, K, K>
    (dict(PAIR, dtype="bf16", bn=128, a="mnmajor-sw128"), 0x10208490),  # <bfloat16_t, ..., 256, 128, MN, K>
    (dict(PAIR128), 0x08210010),  # <half_t, half_t, float, 128, 128, K, MN>
    (dict(PAIR128, b="kmajor-sw128"), 0x08200010),  # <half_t, half_t, float, 128, 128, K, K>
    (dict(PAIR, dtype="tf32", bk=32), 0x10400910),  # SM100_MMA_TF32_2x1SM_SS<tfloat32_t, ..., 256, 256, K, K>
    (dict(PAIR, dtype="e4m3", bk=128, bn=128), 0x10200010),  # SM100_MMA_F8F6F4_2x1SM_SS<float_e4m3_t, ..., 256, 128>
    (dict(PAIR, dtype="s8", acc="s32", bk=128, bn=128), 0x102004A0),  # SM100_MMA_S8_2x1SM_SS<int8_t, int8_t, int32_t, 256, 128>
]


@pytest.mark.parametrize("kw,cute", CUTE_2SM_IDESC,
                         ids=["f16-256", "bf16-256x128", "bf16-amn", "f16-128-bmn", "f16-128", "tf32", "e4m3", "s8"])
def test_pair_instruction_descriptor_is_cutes(kw, cute):
    t = derive(make_spec(**kw))
    assert t.idesc.encode() == cute, (t.idesc.hex, hex(cute))
    assert pairmodel.decode_mn(cute) == (t.spec.bm, t.spec.bn)


# ---- the plan ------------------------------------------------------------------------------------------
def test_pair_plan_fields():
    t = derive(make_spec(**PAIR))
    p = t.pair
    assert (p.cluster, p.leader_rank, p.commit_mask, p.tmem_layout) == ((2, 1, 1), 0, 0b11, "A")
    assert [(s.a_row0, s.b_row0) for s in p.shares] == [(0, 0), (128, 128)]
    cta_bytes = 128 * 64 * 2 * 2  # A and B halves, f16
    assert p.expect_tx_bytes == 2 * cta_bytes == plan_kernel(t.spec).pipeline.expect_tx_bytes
    assert plan_kernel(t.spec).pipeline.acc_empty_arrivals == 8
    j = t.to_json()["cta_pair"]
    assert j["a_row0"] == [0, 128] and j["b_row0"] == [0, 128] and j["commit_mask"] == 3
    names = [d.name for d in p.derivation]
    assert {"cluster", "leader", "a_share", "b_share", "descriptors", "d_share", "tmem_alloc", "full_barrier",
            "commit_mask", "acc_empty", "cluster_sync", "grid"} <= set(names)


def test_pair_grid_is_whole_clusters():
    for schedule in ("tile", "persistent"):
        abi = plan_kernel(make_spec(**PAIR, schedule=schedule)).abi
        assert abi.cluster == (2, 1, 1)
        for m, n, sms in ((256, 256, 148), (1000, 3000, 148), (5000, 5000, 148), (100, 100, 7)):
            g = abi.grid(m, n, sms)[0]
            tiles = -(-m // 256) * -(-n // 256)
            assert g % 2 == 0 and g // 2 == (min(tiles, sms // 2) if schedule == "persistent" else tiles)
            assert g <= max(2 * tiles, 2)


def test_explain_names_the_pair(capsys):
    from ptxgen.cli import main

    assert main(["explain", *make_spec(**PAIR).cli_args().split()]) == 0
    out = capsys.readouterr().out
    assert "CTA pair (cta_group::2; L1/L2 only" in out and "tcgen05.mma.cta_group::2" in out
    assert main(["explain", "--bm", "128", "--bn", "128", "--bk", "64", "--a", "kmajor-sw128", "--cta-group", "2",
                 "--arch", "sm_90a"]) == 2


# ---- L1: the pair model against the writer --------------------------------------------------------------
def _legal_pairs():
    out = []
    for bm in (128, 256):
        for a in ("kmajor-none", "kmajor-sw32", "kmajor-sw128", "mnmajor-none", "mnmajor-sw64"):
            for b in ("kmajor-sw64", "kmajor-none", "mnmajor-sw32", "mnmajor-sw128"):
                out.append(dict(bm=bm, bn=256, bk=64, a=a, b=b, cta_group=2, stages=2))
    for bn in legal_bn(Arch.SM100A, DType.F16, Major.K, 2):
        out.append(dict(bm=256, bn=bn, bk=32, a="kmajor-sw64", b="kmajor-sw64", cta_group=2, stages=1))
    out += [
        dict(bm=256, bn=128, bk=32, a="kmajor-sw128", b="mnmajor-sw128b32", dtype="tf32", cta_group=2, stages=2),
        dict(bm=128, bn=64, bk=128, a="kmajor-sw128", b="mnmajor-sw32", dtype="e4m3", b_dtype="e5m2", cta_group=2, stages=2),
        dict(bm=256, bn=96, bk=64, a="kmajor-sw64", b="kmajor-sw32", dtype="u8", b_dtype="s8", acc="s32", cta_group=2, stages=2),
        dict(bm=256, bn=128, bk=64, a="kmajor-sw128", b="kmajor-sw128", b_order="mn", cta_group=2, stages=3, smem_offset=384),
    ]
    return out


@pytest.mark.slow
def test_pair_model_agrees_with_the_writer_over_the_legal_space():
    """Every CTA's TMA copies (from its own row origin) put exactly A[BM x BK] and B[BN x BK] where the pair MMA reads
    them, through one pair of descriptors; the epilogues read every D element from where the MMA put it."""
    failures = {}
    specs = _legal_pairs()
    for kw in specs:
        spec = make_spec(**kw)
        problems = check_tile(derive(spec))
        if problems:
            failures[spec.kernel_name] = problems[:2]
    assert not failures, failures
    assert len(specs) >= 50


@pytest.mark.parametrize("kw", [PAIR, PAIR128], ids=["M256", "M128"])
@pytest.mark.parametrize(
    "wrong",
    ["swapped_a", "swapped_b", "b_not_split", "a_not_split", "peer_origin", "epilogue_rows", "epilogue_cols"],
)
def test_a_wrong_cta_split_fails_the_check(kw, wrong):
    """Controls: the same check must fail when the pair is split wrongly."""
    tj = derive(make_spec(**kw)).to_json()
    p, bm = tj["cta_pair"], kw["bm"]
    e = p["epilogue"]
    bad = {
        "swapped_a": dict(a_row0=p["a_row0"][::-1]),
        "swapped_b": dict(b_row0=p["b_row0"][::-1]),
        "b_not_split": dict(b_row0=[0, 0]),
        "a_not_split": dict(a_row0=[0, 0]),
        "peer_origin": dict(a_row0=[0, bm // 4]),
        "epilogue_rows": dict(epilogue=dict(e, row="lane + warp * 16")),
        "epilogue_cols": dict(epilogue=dict(e, col="c0")) if e["col"] != "c0" else dict(epilogue=dict(e, col="c0 + 1")),
    }[wrong]
    assert check_pair(tj) == []
    assert check_pair(mutated(tj, **bad)), wrong


def test_reading_the_pair_as_one_cta_fails():
    """Control on the model side: a cta_group::1 reading (all M rows from one CTA's image) disagrees."""
    tj = derive(make_spec(**PAIR)).to_json()
    rng = np.random.default_rng(1)
    assert check_pair_stage(tj, 0, False, rng) == []
    assert check_pair_stage(tj, 0, False, np.random.default_rng(1), cta_group=1)


def test_d_home_is_a_bijection_onto_each_ctas_lanes():
    for m, n in ((256, 64), (128, 64), (128, 256)):
        homes = {pairmodel.d_home(2, r, c, m, n) for r in range(m) for c in range(n)}
        assert len(homes) == m * n
        lanes = 128 if m == 256 else 128  # Layout B uses all lanes too, half the columns
        assert {h[1] for h in homes} == set(range(lanes))
        assert max(h[2] for h in homes) == (n - 1 if m == 256 else n // 2 - 1)


def test_epilogue_check_passes_for_both_layouts():
    for kw in (PAIR, PAIR128, dict(PAIR128, bn=48, b="kmajor-sw128")):
        assert check_epilogue(derive(make_spec(**kw)).to_json()) == []


# ---- L2: NVRTC and nvcc for sm_100a ---------------------------------------------------------------------
L2_SPECS = [
    PAIR,
    PAIR128,
    dict(PAIR, schedule="persistent"),
    dict(bm=256, bn=128, bk=64, a="mnmajor-sw128", b="kmajor-sw64", dtype="bf16", out_dtype="bf16", cta_group=2, stages=4),
    dict(bm=256, bn=128, bk=128, a="kmajor-sw128", b="kmajor-sw128", dtype="e4m3", cta_group=2, stages=4),
    dict(bm=128, bn=64, bk=32, a="kmajor-sw128", b="mnmajor-sw128b32", dtype="tf32", cta_group=2, stages=3, schedule="persistent"),
]


@pytest.mark.parametrize("kw", L2_SPECS, ids=["M256", "M128", "persistent", "bf16", "e4m3", "tf32"])
def test_pair_kernels_compile_with_the_pair_instructions(kw):
    from ptxgen.runtime.compile.artifacts import generate

    spec = make_spec(**kw)
    art = generate(spec)
    ptx, cu = art.files["kernel.ptx"], art.files["kernel.cu"]
    for form in (f"tcgen05.mma.cta_group::2.kind::{spec.dtype.kind}", "tcgen05.alloc.cta_group::2",
                 "tcgen05.dealloc.cta_group::2", "tcgen05.relinquish_alloc_permit.cta_group::2",
                 "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64",
                 "cp.async.bulk.tensor.2d.cta_group::2", "mapa.shared::cluster", "barrier.cluster.arrive",
                 ".reqnctapercluster 2, 1, 1"):
        assert form in ptx, form
    assert "cta_group::1" not in ptx  # every tcgen05 instruction of a kernel uses the same .cta_group
    assert "L2 only" in cu and "cta_group::2" in cu
    rep = art.sass
    assert rep.ok, rep.problems
    assert rep.mma_in_loop == spec.mmas_per_k_tile and rep.local_bytes == 0 and rep.stack_bytes == 0


def test_sass_check_tells_pair_from_single():
    """Control: the pair kernel's SASS fails the cta_group::1 spec's check and the other way round."""
    from ptxgen.runtime.compile.artifacts import generate
    from ptxgen.runtime.compile.cache import compile_cached, sass_dumps
    from ptxgen.runtime.compile.sass import check_sass

    pair = make_spec(**PAIR128)
    single = make_spec(**dict(PAIR128, cta_group=1))
    for have, judge in ((pair, single), (single, pair)):
        art = generate(have, sass=False)
        res = compile_cached(art.files["kernel.cu"], have.kernel_name, have.arch.value)
        dump, resources = sass_dumps(res)
        rep = check_sass(judge, art.compiled.cubin, dump, resources)
        assert any("2CTA" in p for p in rep.problems), rep.problems


def test_independent_nvcc_compiles_a_pair_kernel(tmp_path):
    """nvcc (not NVRTC) on `ptxgen build --cta-group 2 --bm 256 ...`'s kernel.cu: UTCHMMA.2CTA, no local memory."""
    from ptxgen.runtime.compile.artifacts import build
    from ptxgen.runtime.compile.sass import check_sass
    from test_emit import _nvcc

    nvcc = _nvcc()
    if not nvcc:
        pytest.skip("nvcc not installed (pip install nvidia-cuda-nvcc)")
    spec = make_spec(**PAIR)
    d, _ = build(spec, tmp_path)
    cubin = tmp_path / "pair.cubin"
    proc = subprocess.run([nvcc, "-gencode=arch=compute_100a,code=sm_100a", "-cubin", "-o", str(cubin), str(d / "kernel.cu")],
                          capture_output=True, text=True, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    rep = check_sass(spec, cubin.read_bytes())
    assert rep.ok and rep.mma_in_loop == 4 and rep.local_bytes == 0, rep.problems


# ---- L1: the pair's barrier protocol in the pipeline simulator --------------------------------------------
@pytest.mark.parametrize("kw", [PAIR, dict(PAIR128, schedule="persistent", stages=2), dict(PAIR, stages=1)],
                         ids=["M256", "M128-persistent", "one-stage"])
def test_pair_pipeline_neither_deadlocks_nor_races(kw):
    from ptxgen.model.bridges.check_pipeline import check_spec

    assert check_spec(make_spec(**kw)) == []


@pytest.mark.parametrize(
    "wrong,expect",
    [
        (dict(commit_mask=0b01), "deadlock"),  # the commit releases only the leader's stage
        (dict(peer_copies_to_leader=False), "deadlock"),  # the peer's bytes never reach the leader's full barrier
        # acc_empty counting one CTA's epilogue warps: with one accumulator (one tile per CTA, issue 19 fix 4) the MMAs
        # of the next tile start before the peer's epilogue has read the accumulator out
        (dict(acc_empty_arrivals=4), "early accumulator overwrite"),
        (dict(epilogue_to_leader=False), "deadlock"),  # the peer's epilogue arrives on its own acc_empty
        ("half_tx_peer_own", "CTA 1: torn read"),  # one CTA's bytes expected, the peer signalling itself
    ],
    ids=["mask", "peer-full", "acc-empty-count", "epilogue-own", "tx-one-cta"],
)
def test_a_wrong_pair_protocol_fails_the_simulator(wrong, expect):
    import dataclasses

    from ptxgen.model.sim import pipesim
    from ptxgen.model.bridges.check_pipeline import config_of, tma_copy_bytes

    spec = make_spec(**PAIR128)
    cfg = config_of(plan_kernel(spec).pipeline, 5, tma_copy_bytes(spec), 3)
    assert (cfg.ctas, cfg.epilogue_warps, cfg.acc_empty_arrivals) == (2, 4, 8)
    assert pipesim.explore(cfg, range(6)).ok
    if wrong == "half_tx_peer_own":
        wrong = dict(peer_copies_to_leader=False, expect_tx_bytes=cfg.expect_tx_bytes // 2)
    r = pipesim.explore(dataclasses.replace(cfg, **wrong), range(6))
    assert not r.ok and any(expect in p for p in r.problems), r.problems[:2]


# ---- L1 over the whole legal pair space (hypothesis) --------------------------------------------------------
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from strategies import legal_pair_specs  # noqa: E402


@pytest.mark.slow
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(spec=legal_pair_specs(), seed=st.integers(0, 2**32 - 1))
def test_pair_model_agrees_over_the_legal_space_hypothesis(spec, seed):
    """The pair read model and epilogue placement (verify_pair), and the pair's barrier protocol (pipesim)."""
    from ptxgen.model.bridges.check_pipeline import check_spec

    assert spec.pair
    assert check_tile(derive(spec), seed) == []
    assert check_spec(spec, k_tiles_list=(1, spec.stages + 1), seeds=range(2), tiles_per_cta=(3,)) == []


def test_pair_waits_acquire_at_cluster_scope_and_single_cta_kernels_do_not():
    from ptxgen.emit.render import render_kernel

    pair_cu = render_kernel(derive(make_spec(**PAIR)))
    single_cu = render_kernel(derive(make_spec(**dict(PAIR128, cta_group=1))))
    assert "try_wait.parity.acquire.cluster" in pair_cu and "try_wait.parity.acquire.cluster" not in single_cu


# CuTe host run (NVIDIA/cutlass include/ at 7107b0553, nvcc /usr/local/cuda-13.0, smem base 0): a TiledMMA of the
# SM100_MMA_F16BF16_2x1SM_SS atom; per-CTA smem layouts UMMA::tile_to_mma_shape(atom, partition_shape_A/B(mma, tile))
# (column-major tiling: atoms adjacent along MN, i.e. ptxgen's atom order "mn"); thr_mma.make_fragment_A/B(sA/sB)
# descriptors for each K-block. partition_shape gave BM/2 rows of A and BN/2 rows of B per CTA.
CUTE_2SM_SMEM_DESC = [
    (dict(bm=256, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128"),
     [(0x4000404000010000, 0x4000404000010000), (0x4000404000010002, 0x4000404000010002),
      (0x4000404000010004, 0x4000404000010004), (0x4000404000010006, 0x4000404000010006)]),
    (dict(bm=128, bn=128, bk=64, a="kmajor-sw128", b="mnmajor-sw128"),
     [(0x4000404000010000, 0x4000404000000000), (0x4000404000010002, 0x4000404000000080),
      (0x4000404000010004, 0x4000404000000100), (0x4000404000010006, 0x4000404000000180)]),
    (dict(bm=256, bn=128, bk=32, a="mnmajor-sw64", b="kmajor-sw32", a_order="mn", b_order="mn"),
     [(0x8000408000200000, 0xC000401000010000), (0x8000408000200100, 0xC000401000010080)]),
]


@pytest.mark.parametrize("kw,cute", CUTE_2SM_SMEM_DESC, ids=["k128-k128", "k128-mn128", "mn64-k32"])
def test_per_cta_descriptors_are_cutes_2sm_fragments(kw, cute):
    t = derive(make_spec(**kw, cta_group=2, stages=2))
    assert [(a.descriptor.encode(), b.descriptor.encode()) for a, b in zip(t.a.k_steps, t.b.k_steps)] == cute
