"""Stream-K with the M-major D of swap-AB (D^T = B A^T, 128 x BN' tiles over N x M; ptxgen issue 35): the spec rule that
lets them meet, the L1 check that the fix-up composes with the M-major store (model.bridges.check_streamk over whole
launches, both epilogues, with controls that must fail), the workspace the launch sizes for the swapped problem, the CLI;
(gpu tier) the kernels called swapped against float64, bit for bit twice. NVRTC + SASS: tests/test_streamk.py."""

import dataclasses
import subprocess
import sys

import pytest

from ptxgen.derive.store.streamk import FLAG_REGION_BYTES, StreamKPlan
from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.tile.spec import make_spec
from ptxgen.emit.render import render_kernel
from ptxgen.emit.views.epilogue_view import wgmma_epilogue_view
from ptxgen.emit.views.streamk_view import streamk_view
from ptxgen.isa.types import SpecError
from ptxgen.model.bridges import check_dstore, check_mstore
from ptxgen.model.bridges.check_streamk import FixupC, check_launch
from ptxgen.runtime.launch.launch import Problem, gemm_launches, streamk_items, workspace_bytes
from test_streamk import run_c


def swapped_sk(bn=200, s=3, epilogue="tma", dtype="bf16"):
    """The chooser's swapped kernel (runtime.choose.swap._swapped: 128 x BN', M-major D) in its stream-K form: persistent,
    ``s`` splits at most, the stages that fit shared memory."""
    from ptxgen.runtime.choose.rules import SWAP_FIT_STAGES
    from ptxgen.runtime.choose.swap import _swapped
    from ptxgen.runtime.choose.tune import default_spec

    base = _swapped(default_spec(dtype, "sm_90a"), 128, bn, SWAP_FIT_STAGES)
    for stages in range(base.stages, 1, -1):
        try:
            return make_spec(**{**base.to_json(), "schedule": "persistent", "stream_k": s, "epilogue": epilogue,
                                "stages": stages})
        except SpecError:
            continue
    raise AssertionError(f"no stages fit 128 x {bn} stream-K")


# -- the rule --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("epilogue", ["tma", "direct"])
def test_m_major_d_with_stream_k_is_legal_where_each_alone_is(epilogue):
    s = swapped_sk(epilogue=epilogue)
    assert s.d_major.value == "m" and s.stream_k == 3 and s.kernel_name.endswith("_dm_streamk3")
    assert plan_kernel(s).stream_k.tile_floats == 128 * 200 and make_spec(**s.to_json()) == s


@pytest.mark.parametrize("changes,field", [
    ({"out_dtype": "f32"}, "--d-major"),  # the TMA store of an M-major D transposes 16-bit outputs only (check_d_major)
    ({"schedule": "tile"}, "--stream-k"),  # stream-K splits the last round of a persistent kernel
    ({"split_k": 2}, "--split-k"),  # split-K and stream-K are two ways to split K
    ({"acc": "f16", "dtype": "f16", "out_dtype": "f16", "epilogue": "direct"}, "--stream-k"),
])
def test_what_stays_illegal_names_its_rule(changes, field):
    with pytest.raises(SpecError) as e:
        make_spec(**{**swapped_sk().to_json(), **changes})
    assert e.value.field == field


def test_f32_out_with_the_direct_store_is_legal():
    assert swapped_sk(epilogue="direct").out_dtype.value == "bf16"
    s = make_spec(**{**swapped_sk(epilogue="direct").to_json(), "out_dtype": "f32"})
    assert s.out_dtype.value == "f32" and s.stream_k == 3


CLI = ["build", "--bm", "128", "--bn", "200", "--bk", "64", "--a", "kmajor-sw128", "--b", "kmajor-sw128", "--dtype", "bf16",
       "--arch", "sm_90a", "--stages", "4", "--out-dtype", "bf16", "--d-major", "m", "--schedule", "persistent",
       "--epilogue", "tma", "--stream-k", "3"]


def test_cli_builds_the_swapped_stream_k_kernel_and_refuses_what_stays_illegal(tmp_path):
    ok = subprocess.run([sys.executable, "-m", "ptxgen", *CLI, "--out", str(tmp_path)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    built, = [p for p in tmp_path.iterdir() if p.name.endswith("_persistent_tmastore_dm_streamk3")]
    assert (built / "kernel.cu").exists() and "4 x HGMMA per main-loop iteration (expected 4)" in ok.stdout
    assert "local 0 B" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "ptxgen", *CLI[:-6], "--schedule", "tile", "--epilogue", "tma", "--stream-k",
                          "3", "--out", str(tmp_path)], capture_output=True, text=True)
    assert bad.returncode == 2 and "persistent cooperative" in bad.stderr and "Traceback" not in bad.stderr


# -- L1: the fix-up composed with the M-major store, over whole launches ---------------------------------------------------
def fixup_c(plan) -> FixupC:
    v = streamk_view(plan, "num_tiles")
    return FixupC(v.store_partial, v.add_partial, v.wait_owner, v.signal)


def work_lists(plan, m, n, k, sm_count):
    """Each CTA's (tile, split, parts, first K-tile, K-tiles), in order, as the rendered C computes them (the persistent
    loop: entries c, c + grid, ...)."""
    from ptxgen.emit.views.streamk_view import layout_c, unit_c

    items = streamk_items(plan, Problem(m, n, k, k, k, m))
    grid = plan.abi.grid(m, n, sm_count)[0]
    env = run_c(layout_c(plan.stream_k, "num_items"),
                {"num_items": items, "gridDim_x": grid, "k_tiles_total": -(-k // plan.spec.bk)})
    out = []
    for c in range(grid):
        entries = []
        for w in range(c, env["sk_work"], grid):
            u = run_c(unit_c(), {**env, "work": w})
            entries.append((u["tile"], u["sk_split"], u["sk_parts"], u["kt_first"], u["num_k_tiles"]))
        out.append(entries)
    return out, env


_STORES: dict = {}


def d_stores(spec, m, n, ldd):
    """What the epilogue stores for the kernel's M x N D (M-major, columns ``ldd`` apart): the direct stores through the
    view's fragment expressions, or the TMA store (its edge tiles direct). Kept per store plan (the splits do not change it)."""
    k = plan_kernel(spec)
    view = wgmma_epilogue_view(k)
    key = (repr(k.store) if spec.epilogue.value == "tma" else "direct", repr(k.direct), view.frag_row_expr, view.frag_col_expr,
           spec.bm, spec.bn, m, n, ldd)
    if key not in _STORES:
        if spec.epilogue.value == "tma":
            _STORES[key] = check_mstore.simulate(k.store, k.direct, spec.bm, spec.bn, m, n, ldd)
        else:
            _STORES[key] = check_dstore.simulate(k.direct, spec.bm, spec.bn, m, n, ldd, view.frag_row_expr, view.frag_col_expr)
    return _STORES[key]


def launch_problems(spec, m, n, k, sm_count, fix=None, work=None, ws=None, **controls):
    """check_launch on the kernel's M x N x K (the swapped problem: M = the caller's N, N = the caller's M) on
    ``sm_count`` SMs, with the workspace bytes the launch allocates (runtime.launch.workspace_bytes)."""
    plan = plan_kernel(spec)
    ldd = -(-m // 8) * 8
    wl, env = work_lists(plan, m, n, k, sm_count)
    nbytes = workspace_bytes(plan, Problem(m, n, k, k, k, ldd), sm_count) if ws is None else ws
    return check_launch(spec.bm, spec.bn, m, n, env["k_tiles_total"], work or wl, fix or fixup_c(plan), nbytes,
                        d_stores(spec, m, n, ldd), "m", ldd, **controls), env


# (BN', kernel M = caller's N, kernel N = caller's M, K, SMs): each with a partial last round the stream-K splits, partial
# tiles along both dimensions
SMALL = {200: (520, 400, 2000, 8), 168: (300, 333, 1100, 5), 136: (777, 270, 1300, 11)}
DEFAULT = {(200, s, e) for s in (2, 3, 4) for e in ("tma", "direct")} | {(168, 3, "tma"), (136, 2, "direct")}


@pytest.mark.parametrize("bn,s,epilogue", [pytest.param(bn, s, e, marks=() if (bn, s, e) in DEFAULT else pytest.mark.slow)
                                           for bn in SMALL for s in (2, 3, 4) for e in ("tma", "direct")])
def test_every_element_of_the_m_major_d_is_stored_once_by_its_owner_with_every_split(bn, s, epilogue):
    m, n, k, sms = SMALL[bn]
    problems, env = launch_problems(swapped_sk(bn, s, epilogue), m, n, k, sms)
    assert problems == []
    assert env["sk_splits"] > 1 and env["sk_dp"] < env["sk_work"]  # the last round was split


@pytest.mark.slow
@pytest.mark.parametrize("epilogue,s", [("tma", 5), ("direct", 3)])  # the H100 pick's 5 splits; the other store
def test_the_issue_shape_400x10000x6000_on_132_sms(epilogue, s):
    # swapped: N' = 10000 rows of 128, M' = 400 columns of 200: 79 x 2 = 158 tiles, 26 in the last round, 94 K-tiles
    problems, env = launch_problems(swapped_sk(200, s, epilogue), 10000, 400, 6000, 132)
    assert problems == [] and (env["sk_dp"], env["sk_splits"]) == (132, s)


def test_the_issue_shape_splits_its_26_last_tiles():
    plan = plan_kernel(swapped_sk(200, 4))
    assert streamk_items(plan, Problem(10000, 400, 6000, 6000, 6000, 10000)) == 158
    lay = plan.stream_k.layout(158, plan.abi.grid(10000, 400, 132)[0], 6000)
    assert (lay.dp_items, lay.last_items, lay.splits, lay.work_entries) == (132, 26, 4, 236)


SPEC_C = dict(bn=200, m=520, n=400, k=2000, sms=8)


def _c(epilogue="tma", s=3, **controls):
    spec = swapped_sk(SPEC_C["bn"], s, epilogue)
    return launch_problems(spec, SPEC_C["m"], SPEC_C["n"], SPEC_C["k"], SPEC_C["sms"], **controls)[0]


def test_control_a_wrong_owner_is_caught():
    assert _c() == []
    assert _c(owner=lambda parts: parts - 1)  # the last split waits and stores D; split 0 stores a partial


def test_control_a_missing_split_is_caught():
    assert _c(adds=lambda parts: range(1, parts - 1))  # the owner leaves out the last split's partial
    assert _c(adds=lambda parts: range(parts - 1, 0, -1))  # every split, in another order: not the fixed order


def test_control_a_wrong_slot_or_flag_is_caught():
    plan = plan_kernel(swapped_sk(200, 3))
    good = fixup_c(plan)
    shifted = dataclasses.replace(good, add_partial=tuple(x.replace("j - 1", "j") for x in good.add_partial))
    assert _c(fix=shifted)  # the owner reads the slot after the right one
    no_group = dataclasses.replace(good, store_partial=tuple(x.replace("static_cast<int>(wg) *", "0 *")
                                                             for x in good.store_partial))
    assert _c(fix=no_group)  # both warpgroups' partials in one place
    flag = dataclasses.replace(good, signal=good.signal.replace("+ wg", "+ 0"))
    assert any("deadlock" in p for p in _c(fix=flag))  # warpgroup 1's owner never sees its count
    kept = dataclasses.replace(good, wait_owner=good.wait_owner.replace("flag_relaxed_store(sk_flag, 0); ", ""))
    assert any("not back to zero" in p for p in _c(fix=kept))  # the next launch would find the counts


def test_control_a_dropped_unit_and_a_short_workspace_are_caught():
    spec = swapped_sk(200, 3)
    plan = plan_kernel(spec)
    wl, env = work_lists(plan, 520, 400, 2000, 8)
    last = next(c for c, e in enumerate(wl) if e and e[-1][1] == 2)
    dropped = [e[:-1] if c == last else e for c, e in enumerate(wl)]
    assert any("deadlock" in p for p in _c(work=dropped))
    exact = FLAG_REGION_BYTES + 2 * 2 * plan.stream_k.slot_bytes  # 2 last-round tiles x 2 partials each
    assert _c(ws=exact) == [] and _c(ws=exact - plan.stream_k.slot_bytes)


# -- the launch of the swapped problem -------------------------------------------------------------------------------------
def test_the_launch_sizes_the_workspace_for_the_swapped_problem():
    """The caller's 400 x 10000 x 6000 runs as the kernel's 10000 x 400 x 6000 (bench._Case, api.launch.swapab): the
    workspace holds 26 last-round tiles x (S - 1) partials of 128 x 200 floats for 132 CTAs, and enough for any grid."""
    plan = plan_kernel(swapped_sk(200, 4, "direct"))
    p = Problem(10000, 400, 6000, 6000, 6000, 10000)
    wb = workspace_bytes(plan, p, 132)
    exact = FLAG_REGION_BYTES + 26 * 3 * 128 * 200 * 4
    assert wb >= exact and wb == plan.stream_k.workspace_bound(158, 132, 6000)
    assert StreamKPlan(4, 64, 1, 2, 128 * 200).workspace_bytes(plan.stream_k.layout(158, 132, 6000)) == exact
    (kern, grid, block, args), = gemm_launches(plan, "mma", 0x10000, 0x20000, 0x30000, 0x40000, p, 132,
                                               encode=lambda a: bytes(128))
    assert grid == (132, 1, 1) and args.values[-1].value == 0x40000


def test_the_swapped_call_launches_once_with_a_workspace_for_the_swapped_problem(monkeypatch):
    """CompiledKernel called as kernel(b, a, out.T) (what api.launch.swapab does) on a simulated H100/H200 (132 SMs): one
    launch through the compiled launcher, its bytes those gemm_launches builds from scratch for the kernel's
    10000 x 400 x 6000 with the calling stream's workspace, which has the bytes workspace_bytes gives that problem."""
    pytest.importorskip("ptxgen.runtime.launch._launcher", reason="the compiled launcher was not built")
    import ptxgen
    from ptxgen.api.launch import launchplan
    from test_api import FakeArray, SimulatedGPU, _fake_encode, _fresh, kmajor
    from test_workspace_launch import CDriver, Stream

    SimulatedGPU(monkeypatch)
    kern = ptxgen.compile(swapped_sk(200, 3))
    _fresh(kern)
    drv = CDriver(monkeypatch, [kern])
    m, n, k = 400, 10000, 6000
    a, b = kmajor(m, k, ptr=1 << 44), kmajor(n, k, ptr=(1 << 44) + (1 << 30))
    out_t = FakeArray((n, m), "bfloat16", strides=(1, n), ptr=(1 << 44) + (2 << 30))  # out.T of a row-major 400 x 10000
    assert kern(b, a, out_t, stream=Stream(0x71)) is out_t
    w = launchplan._STREAMK_WORKSPACES[(0, 0x71)][0]
    plan, p = kern.plan, Problem(n, m, k, k, k, n)  # the kernel's M x N: columns of D n elements apart
    need = workspace_bytes(plan, p, 132)
    assert need >= FLAG_REGION_BYTES + 26 * 2 * 128 * 200 * 4  # 26 last-round tiles x 2 partials on 132 CTAs
    # the stream's workspace: the bytes the swapped problem needs, rounded up to a power of two (launchplan.streamk_workspace)
    assert [x[2] for x in drv.of("alloc")] == [max(launchplan.STREAMK_MIN_WORKSPACE_BYTES, 1 << (need - 1).bit_length())]
    (launch,) = drv.of("launch")
    (_, grid, _, args), = gemm_launches(plan, "mma", (1 << 44) + (1 << 30), 1 << 44, (1 << 44) + (2 << 30), w, p, 132,
                                        encode=_fake_encode)
    assert launch[3] == grid == (132, 1, 1)
    assert launch[4] == [v if isinstance(v, bytes) else int(v) for v in args.read_back()] and launch[4][-1] == w
    (_, _, _, unswapped), = gemm_launches(plan, "mma", 1 << 44, (1 << 44) + (1 << 30), (1 << 44) + (2 << 30), w,
                                          Problem(m, n, k, k, k, m), 132, encode=_fake_encode)
    assert launch[4] != [v if isinstance(v, bytes) else int(v) for v in unswapped.read_back()]  # control: not swapped
    _fresh(kern)


def test_the_rendered_kernel_runs_the_epilogue_in_the_owners_branch_only():
    """check_launch's template facts (owner = split 0; slots 1..S-1 in order) as the rendered kernel has them."""
    src = render_kernel(plan_kernel(swapped_sk(200, 3)))
    i_split, i_else, i_loop = src.index("if (sk_split > 0) {"), src.index("} else {", src.index("if (sk_split > 0) {")), \
        src.index("for (int j = 1; j < sk_parts; ++j)")
    i_store = src.index("stmatrix_x4_trans(", i_loop)  # the M-major TMA store's stmatrix.trans, after the sum
    assert i_split < i_else < i_loop < i_store and "stmatrix_x4_trans(" not in src[i_split:i_loop]
    direct = plan_kernel(swapped_sk(200, 3, "direct"))
    src = render_kernel(direct)
    i_split = src.index("if (sk_split > 0) {")
    i_loop = src.index("for (int j = 1; j < sk_parts; ++j)")
    assert i_split < i_loop < src.index(f"d_out + {direct.direct.offset_expr};", i_loop)
    assert f"d_out + {direct.direct.offset_expr};" not in src[i_split:i_loop]


# -- on the H100/H200 (gpu tier) --------------------------------------------------------------------------------------------
def _torch():
    return pytest.importorskip("torch")


def _called_swapped_twice(torch, kern, m, n, k, seed):
    """``kern(b, a, out.T)`` (api.launch.swapab's call) twice: out = a @ b.T row-major against float64, the second call
    bit-identical, nothing written past column N (a NaN pad)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g)
    ldd = -(-n // 8) * 8
    padded = torch.full((m, ldd + 8), float("nan"), device="cuda", dtype=torch.bfloat16)
    out = padded[:, :n]
    kern(b, a, out.t())
    first = out.clone()
    kern(b, a, out.t())
    torch.cuda.synchronize()
    ref = a.double() @ b.double().t()
    assert float(torch.linalg.norm(first.double() - ref) / torch.linalg.norm(ref)) < 1e-2
    assert torch.equal(first.view(torch.int16), out.view(torch.int16))
    assert torch.isnan(padded[:, n:]).all()


# (BN', epilogue, splits, caller's M, N, K): swapped tiles over N x M beyond one round of 132 SMs by a few
GPU_CASES = [
    (200, "tma", 2, 400, 9000, 2000),     # 71 x 2 = 142 tiles: 10 in the last round
    (200, "direct", 3, 400, 9000, 2000),
    (200, "tma", 3, 400, 10000, 6000),    # the issue's shape: 158 tiles, 26 split 3 ways
    (168, "tma", 2, 333, 9001, 1096),     # a partial N' tile, a K tail (1096 = 17 x 64 + 8; rows of 2192 B, 16-byte aligned)
    (136, "direct", 3, 270, 8500, 1000),  # 67 x 2 = 134 tiles: 2 in the last round
]


@pytest.mark.gpu
@pytest.mark.parametrize("bn,epilogue,s,m,n,k", GPU_CASES)
def test_swapped_stream_k_kernels_called_swapped_match_float64_twice(gpu, bn, epilogue, s, m, n, k):
    """CompiledKernel called as kernel(b, a, out.T) (api.launch.swapab's call): out = a @ b.T row-major, against float64;
    a second call bit-identical (the owner adds the partials in split order); nothing written past column N."""
    import ptxgen

    torch = _torch()
    spec = swapped_sk(bn, s, epilogue)
    kern = ptxgen.compile(spec)
    _called_swapped_twice(torch, kern, m, n, k, n + s)


@pytest.mark.gpu
@pytest.mark.parametrize("bn,epilogue,s,m,n,k", GPU_CASES[:2])
def test_swapped_stream_k_kernels_pass_validate(gpu, bn, epilogue, s, m, n, k):
    """ptxgen validate's runner on the kernel's own problem (N x M x K, D M-major, poison around it, float64)."""
    from ptxgen.runtime.check.validate import validate_spec

    r = validate_spec(swapped_sk(bn, s, epilogue), n, m, k, seed=11)
    assert r.passed, r.verdict


@pytest.mark.gpu
@pytest.mark.parametrize("bn,epilogue,s,m,n,k", [GPU_CASES[0], GPU_CASES[2]])
def test_gemm_launches_a_swapped_stream_k_pick_through_the_swap_path(gpu, monkeypatch, bn, epilogue, s, m, n, k):
    """ptxgen.gemm with the selection forced to the swapped stream-K kernel (the chooser does not pick it yet): the
    swap path (api.launch.swapab, its stream's workspace), slow path then the swapped hot path, into a given out and an
    allocated one, against float64; the hot path's output bit-identical to the slow path's."""
    import ptxgen
    from ptxgen.api import dispatch

    torch = _torch()
    spec = swapped_sk(bn, s, epilogue)
    monkeypatch.setattr(dispatch, "choose_for_arrays", lambda ai, bi, oi, out_dtype, arch=None: (spec, "forced", True))
    monkeypatch.setattr(dispatch, "_BY_KEY", {})
    monkeypatch.setattr(dispatch, "_SWAPPED", {})
    g = torch.Generator(device="cuda").manual_seed(m + s)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g)
    ldd = -(-n // 8) * 8
    out = torch.full((m, ldd), float("nan"), device="cuda", dtype=torch.bfloat16)[:, :n]
    assert ptxgen.gemm(a, b, out) is out
    slow = out.clone()
    assert ptxgen.gemm(a, b, out) is out  # the swapped hot path
    fresh = ptxgen.gemm(a, b)
    torch.cuda.synchronize()
    assert len(dispatch._SWAPPED) >= 1
    ref = a.double() @ b.double().t()
    assert float(torch.linalg.norm(slow.double() - ref) / torch.linalg.norm(ref)) < 1e-2
    assert torch.equal(slow.view(torch.int16), out.view(torch.int16))
    assert fresh.shape == (m, n) and torch.equal(fresh.view(torch.int16), slow.view(torch.int16))


# the swapped pairs as 1x2 clusters (rules.SWAP_PAIR_CLUSTER): the stream-K form and the one-round tile form; M in
# exactly two tiles of BN' (the pair), partial N' tiles and a K tail among them
PAIR_CASES = [
    (200, "tma", 3, 400, 10000, 6000),   # the issue's shape as the chooser now takes it (5 splits there; 3 here)
    (168, "tma", 2, 333, 9001, 1096),    # a partial N' tile and a K tail
    (136, "direct", 3, 270, 8500, 1000),
    (168, "tma", None, 333, 8192, 8192),  # the tile form (one round), the 333 x 8192 x 8192 pick
]


@pytest.mark.gpu
@pytest.mark.parametrize("bn,epilogue,s,m,n,k", PAIR_CASES)
def test_swapped_pairs_in_a_1x2_cluster_match_float64_twice(gpu, bn, epilogue, s, m, n, k):
    """The pair of tiles over M as one 1x2 cluster (A, the weight rows, multicast to both): called swapped as
    api.launch.swapab calls it, against float64, a second call bit-identical, nothing written past column N."""
    import dataclasses

    import ptxgen
    from ptxgen.isa.types import Cluster, Schedule

    torch = _torch()
    spec = swapped_sk(bn, s or 1, epilogue)
    if s is None:
        spec = dataclasses.replace(spec, schedule=Schedule.TILE, stream_k=1)
    spec = dataclasses.replace(spec, cluster=Cluster.C1X2)
    assert -(-m // spec.bn) == 2
    kern = ptxgen.compile(spec)
    _called_swapped_twice(torch, kern, m, n, k, n + (s or 0))


@pytest.mark.gpu
def test_gemm_takes_the_clustered_pair_the_chooser_picks(gpu):
    """ptxgen.gemm(a, b) (a @ b.T) at 400 x 10000 x 6000 on an H100/H200 (both calibrations pick the pair): the plan
    names the 1x2 cluster, and the call (slow path, then the hot path) matches float64."""
    import ptxgen
    import ptxgen.api as api

    torch = _torch()
    g = torch.Generator(device="cuda").manual_seed(5)
    a = torch.randn(400, 6000, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(10000, 6000, device="cuda", dtype=torch.bfloat16, generator=g)
    plan = api.plan("gemm", a, b)
    assert "_c1x2_" in plan.kernel, plan.kernel
    ref = a.double() @ b.double().t()
    for _ in range(2):
        out = ptxgen.gemm(a, b)
        assert float(torch.linalg.norm(out.double() - ref) / torch.linalg.norm(ref)) < 1e-2


@pytest.mark.gpu
def test_gemm_takes_the_wide_pair_the_chooser_picks_on_an_h100(gpu):
    """ptxgen.gemm(a, b) at 300 x 12288 x 6000 on an H100 SXM (rules.SWAP_WIDE_PAIR_DEVICES; elsewhere the test skips):
    the plan names the 192 x 152 swapped pair, and the call (slow path, then the hot path) matches float64."""
    import ptxgen
    import ptxgen.api as api

    torch = _torch()
    if torch.cuda.get_device_name() != "NVIDIA H100 80GB HBM3":
        pytest.skip("the wide-pair rule is measured on the H100 only")
    g = torch.Generator(device="cuda").manual_seed(6)
    a = torch.randn(300, 6000, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(12288, 6000, device="cuda", dtype=torch.bfloat16, generator=g)
    plan = api.plan("gemm", a, b)
    assert "_192x152x64_" in plan.kernel and "_c1x2_" in plan.kernel, plan.kernel
    ref = a.double() @ b.double().t()
    for _ in range(2):
        out = ptxgen.gemm(a, b)
        assert float(torch.linalg.norm(out.double() - ref) / torch.linalg.norm(ref)) < 1e-2
