"""Batched GEMM (``--batch a|ab``): 3-D tensor maps with the batch as the outer dimension, one launch.

Tiers: the spec's rules and the derivation (pure), the L1 TMA model of a rank-3 map against the descriptors (with
controls: a wrong batch stride, no per-coordinate bounds), NVRTC + SASS for both archs, the API on a simulated device
(problem, grid, parameter bytes, the compiled launcher against the ctypes path), and ``gpu`` tests against torch.bmm.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import ptxgen
from ptxgen import api
from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.tile.layout import derive
from ptxgen.derive.tile.spec import make_spec
from ptxgen.isa.types import SpecError
from ptxgen.model.layouts import tmamodel
from ptxgen.model.bridges.verify import check_operand_tma_3d, check_tile
from ptxgen.runtime.launch.arrays import ArgumentError, read_array
from ptxgen.runtime.launch.errors import ProblemError
from ptxgen.runtime.launch.launch import Problem, gemm_args, map_args
from ptxgen.runtime.launch.tensormap import tensormap_args
from test_api import FakeArray, SimulatedGPU, _fresh

BATCHED = dict(bm=128, bn=128, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", out_dtype="bf16", stages=4,
               schedule="persistent", arch="sm_90a")


def _spec(**kw):
    return make_spec(**{**BATCHED, **kw})


# ------------------------------------------------------------------------------------------------
# the spec and the derivation
# ------------------------------------------------------------------------------------------------
def test_batch_field_round_trips_and_names_the_kernel():
    s = _spec(batch="ab")
    assert s.batch.value == "ab" and s.kernel_name.endswith("_batchab")
    from ptxgen.derive.tile.spec import TileSpec

    assert TileSpec.from_json(s.to_json()) == s and "--batch ab" in s.cli_args()
    assert "batch" not in _spec().to_json()  # the default is left out: existing specs keep their JSON


@pytest.mark.parametrize("bad", [dict(loader="cp.async"), dict(epilogue="tma"), dict(cluster="2x1"),
                                 dict(schedule="tile", split_k=2), dict(grouped="offs")])
def test_batched_refuses_what_is_not_derived(bad):
    with pytest.raises(SpecError, match="--batch"):
        _spec(batch="a", **bad)


@pytest.mark.parametrize("batch", ["a", "ab"])
@pytest.mark.parametrize("ops", [("kmajor-sw128", "kmajor-sw128"), ("mnmajor-sw128", "mnmajor-sw128")])
def test_rank3_maps_share_the_2d_layout(batch, ops):
    """The batched operands' maps are rank 3 (K or MN, rows, batch; box one batch deep), over the SAME smem layout
    value as the descriptors, with the same copies as the 2-D map; a shared B keeps its 2-D map."""
    t2, t3 = derive(_spec(a=ops[0], b=ops[1])), derive(_spec(a=ops[0], b=ops[1], batch=batch))
    for name in ("a", "b"):
        op2, op3 = t2.operand(name), t3.operand(name)
        assert op3.tma.layout is op3.store
        assert op3.tma.copies == op2.tma.copies and op3.tma.box[:2] == op2.tma.box
        batched = name == "a" or batch == "ab"
        assert op3.tma.rank == (3 if batched else 2)
        if batched:
            assert op3.tma.box[2] == 1 and op3.tma.global_dims[2] == "batch"
            assert op3.tma.stride_names == (f"ld{name}", f"ld{name}_batch")
            j = op3.tma.to_json()
            assert j["rank"] == 3 and j["box"][2] == 1
        else:
            assert "rank" not in op3.tma.to_json()


def test_abi_and_grid_walk_batch_times_the_tiles():
    plan = plan_kernel(_spec(batch="ab"))
    names = [p.name for p in plan.abi.params]
    assert names[-2:] == ["batch", "ldd_batch"] and plan.abi.params[-1].kind == "u64"
    assert plan.abi.grid(300, 200, 132, 3) == (min(3 * 3 * 2, 132), 1, 1)
    assert plan.abi.grid(1000, 1000, 132, 5) == (132, 1, 1)
    tile = plan_kernel(_spec(batch="a", schedule="tile"))
    assert tile.abi.grid(300, 200, 132, 7) == (7 * 3 * 2, 1, 1)


# ------------------------------------------------------------------------------------------------
# the encode arguments of a rank-3 map
# ------------------------------------------------------------------------------------------------
def _problem(m=300, n=200, k=264, batch=3, **kw):
    p = dict(m=m, n=n, k=k, lda=k + 8, ldb=k, ldd=208, batch=batch, lda_batch=(m + 2) * (k + 8), ldb_batch=n * k,
             ldd_batch=m * 208)
    p.update(kw)
    return Problem(**p)


def test_map_args_rank3():
    plan = plan_kernel(_spec(batch="a"))
    p = _problem()
    a = map_args(plan, "a", 0x10000, p)
    assert a.rank == 3 and a.global_dims == (264, 300, 3) and a.box == (64, 128, 1) and a.element_strides == (1, 1, 1)
    assert a.global_strides == (272 * 2, 302 * 272 * 2)
    b = map_args(plan, "b", 0x20000, p)
    assert b.rank == 2 and b.global_dims == (264, 200) and b.global_strides == (264 * 2,)


def test_tensormap_args_refuses_bad_batch_strides():
    tma = derive(_spec(batch="a")).a.tma
    ok = tensormap_args(tma, 0x1000, (264, 300, 3), (272, 300 * 272))
    assert ok.global_strides == (544, 300 * 544)
    with pytest.raises(ProblemError, match="overlap"):
        tensormap_args(tma, 0x1000, (264, 300, 3), (272, 299 * 272))
    with pytest.raises(ProblemError, match="globalStrides\\[1\\]"):
        tensormap_args(tma, 0x1000, (264, 300, 3), (272, 300 * 272 + 4))
    with pytest.raises(ProblemError, match="stride"):
        tensormap_args(tma, 0x1000, (264, 300, 3), 272)  # a rank-3 map needs both strides


def test_problem_errors_name_the_batch_stride():
    spec = _spec(batch="ab")
    from ptxgen.runtime.launch.launch import problem_errors

    assert problem_errors(spec, _problem()) == []
    errs = problem_errors(spec, _problem(ldb_batch=200 * 264 - 8))
    assert any("ldb_batch" in e and "overlap" in e for e in errs)
    errs = problem_errors(spec, _problem(ldd_batch=300 * 208 + 4))
    assert any("ldd_batch" in e for e in errs)


# ------------------------------------------------------------------------------------------------
# L1: the independent TMA model of a rank-3 map, read back through the descriptors
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fields", [
    dict(),
    dict(a="mnmajor-sw128", b="mnmajor-sw128"),
    dict(a="kmajor-sw64", bk=32, b="mnmajor-sw128"),
    dict(dtype="e4m3", bk=128, out_dtype="bf16"),
    dict(arch="sm_100a"),
    dict(arch="sm_100a", a="mnmajor-sw128b32", b="mnmajor-sw128b32", dtype="tf32", bk=32, out_dtype="f32", bn=64),
], ids=["k-major", "mn-major", "sw64-mixed", "e4m3", "tcgen05", "tcgen05-mn-tf32"])
def test_l1_rank3_map_writes_each_batch_and_zeros_at_its_bounds(fields):
    try:
        t = derive(_spec(batch="ab", **fields))
    except SpecError as e:  # pragma: no cover - the parametrization is meant to be legal
        pytest.fail(str(e))
    tj = t.to_json()
    rng = np.random.default_rng(11)
    for name in ("a", "b"):
        assert check_operand_tma_3d(tj, name, 3, rng) == []
    assert check_tile(t) == []  # the 2-D checks of the same layouts still hold


def test_l1_control_a_wrong_batch_stride_fails():
    t = derive(_spec(batch="ab"))
    tj = t.to_json()
    rng = np.random.default_rng(5)
    from ptxgen.model.bridges.verify import batched_memory

    _, _, (ld, ld_batch), _ = batched_memory(tj, "a", 3, np.random.default_rng(5))
    problems = check_operand_tma_3d(tj, "a", 3, rng, strides=(ld, ld_batch - ld))  # one row short per batch
    assert problems and all("batch" in p for p in problems)
    assert not any("batch 0 " in p for p in problems)  # batch 0 does not depend on the batch stride


def test_l1_control_without_per_coordinate_bounds_the_next_batch_leaks(monkeypatch):
    """The model checks each coordinate against its own extent; a model that checked only the flat extent would read
    the next batch's rows into a tile's row tail, and the check sees it."""
    real = tmamodel.gather_3d

    def flat_bounds(memory, dims, strides, z, rows, cols):
        n_in, n_out, n_b = dims
        return real(memory, (n_in, n_out + 10 ** 6, n_b), strides, z, rows, cols)

    monkeypatch.setattr(tmamodel, "gather_3d", flat_bounds)
    tj = derive(_spec(batch="a")).to_json()
    assert check_operand_tma_3d(tj, "a", 2, np.random.default_rng(1)) != []


def test_model_gather_3d_by_hand():
    mem = np.arange(2 * 4 * 8, dtype=np.uint16)  # 2 batches of 4 rows, 8 elements a row (ld 8), batch stride 32
    got = tmamodel.gather_3d(mem, (6, 3, 2), (8, 32), 1, np.array([[0], [2], [3]]), np.array([[0, 5, 6]]))
    # batch 1 row 0 starts at 32; row 3 is past the 3 rows (zero); column 6 is past the 6 columns (zero)
    assert got.tolist() == [[32, 37, 0], [48, 53, 0], [0, 0, 0]]


# ------------------------------------------------------------------------------------------------
# L2: NVRTC + SASS
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fields", [
    dict(batch="a"), dict(batch="ab", a="mnmajor-sw128", b="mnmajor-sw128", out_dtype="f32", bn=256),
    dict(batch="ab", arch="sm_100a"), dict(batch="a", arch="sm_100a", schedule="tile"),
], ids=["sm90-a", "sm90-ab-mn", "sm100-ab", "sm100-a-tile"])
def test_batched_kernels_compile_with_3d_copies(fields, tmp_path):
    from ptxgen.runtime.compile.sass import check_sass

    k = ptxgen.compile(_spec(**fields), cache=tmp_path)
    assert "cp.async.bulk.tensor.3d" in k.ptx
    assert ("cp.async.bulk.tensor.2d" in k.ptx) == (fields["batch"] == "a")  # only a shared B keeps a 2-D map
    assert "ldd_batch" in k.source and "tile_in_batch" in k.source
    report = check_sass(k.spec, k.cubin)
    assert report.ok, report.problems
    assert report.local_bytes == 0


# ------------------------------------------------------------------------------------------------
# the API on a simulated device
# ------------------------------------------------------------------------------------------------
def _encode_all(args):
    words = [args.rank, args.global_address, *args.global_dims, *args.global_strides, *args.box]
    return b"".join(int(w).to_bytes(8, "little") for w in words).ljust(128, b"\0")


def _read(address, params):
    arr = (ctypes.c_void_p * len(params)).from_address(address)
    out = []
    for i, p in enumerate(params):
        if p.kind == "tensormap":
            out.append(ctypes.string_at(arr[i], 128))
        elif p.kind in ("ptr", "u64"):
            out.append(ctypes.c_uint64.from_address(arr[i]).value)
        else:
            out.append(ctypes.c_int32.from_address(arr[i]).value)
    return out


def _words(map_bytes):
    return [int.from_bytes(map_bytes[i:i + 8], "little") for i in range(0, 128, 8)]


@pytest.fixture
def sim(monkeypatch):
    s = SimulatedGPU(monkeypatch)

    class Driver:
        def launch(self, func, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
            s.launches.append(dict(grid=(gx, gy, gz), params=params))
            return 0

        def encode(self, args):
            s.encoded.append(args)
            return _encode_all(args)

    monkeypatch.setattr("ptxgen.runtime.launch.fastlaunch._DRIVER", Driver())
    return s


def test_compiled_kernel_batched_call(sim):
    k = ptxgen.compile(_spec(batch="ab"))
    _fresh(k)
    B, m, n, kk = 3, 300, 200, 264
    a = FakeArray((B, m, kk), strides=(m * 272 + 64, 272, 1))  # padded rows and a batch stride past the rows
    b = FakeArray((B, n, kk), strides=(n * kk, kk, 1))
    out = FakeArray((B, m, n), strides=(m * 208, 208, 1))
    assert k(a, b, out) is out
    (launch,) = sim.launches
    assert launch["grid"] == (B * 3 * 2, 1, 1)  # 18 tiles < 132 SMs
    vals = dict(zip([p.name for p in k.params], _read(launch["params"], k.params)))
    assert vals["batch"] == B and vals["ldd_batch"] == m * 208 and vals["M"] == m and vals["ldd"] == 208
    wa = _words(vals["tmap_a"])
    assert wa[:10] == [3, read_array(a, "a").ptr, kk, m, B, 272 * 2, (m * 272 + 64) * 2, 64, 128, 1]
    wb = _words(vals["tmap_b"])
    assert wb[:10] == [3, read_array(b, "b").ptr, kk, n, B, kk * 2, n * kk * 2, 64, 128, 1]
    assert vals["D"] == read_array(out, "out").ptr
    assert k.check(a, b, out).batch == B


def test_shared_b_is_a_2d_map(sim):
    k = ptxgen.compile(_spec(batch="a"))
    _fresh(k)
    a = FakeArray((2, 129, 64), strides=(129 * 64, 64, 1))
    b = FakeArray((70, 64), strides=(64, 1))
    out = FakeArray((2, 129, 70), strides=(129 * 72, 72, 1))
    k(a, b, out)
    vals = dict(zip([p.name for p in k.params], _read(sim.launches[-1]["params"], k.params)))
    assert _words(vals["tmap_b"])[:6] == [2, read_array(b, "b").ptr, 64, 70, 128, 64]
    assert _words(vals["tmap_a"])[0] == 3 and vals["ldd_batch"] == 129 * 72


@pytest.mark.parametrize("case, match", [
    (lambda: (FakeArray((3, 300, 264)), FakeArray((2, 200, 264)), None), "3 batches but b has 2"),
    (lambda: (FakeArray((3, 300, 264)), FakeArray((3, 200, 264)), FakeArray((3, 300, 201))), "out has shape"),
    (lambda: (FakeArray((3, 300, 264), strides=(264 * 100, 264, 1)), FakeArray((3, 200, 264)), FakeArray((3, 300, 200))),
     "overlap"),
    (lambda: (FakeArray((3, 300, 264)), FakeArray((3, 200, 264)), FakeArray((3, 300, 200), strides=(300 * 200 + 4, 200, 1))),
     "ldd_batch"),
])
def test_batched_refusals_before_any_launch(sim, case, match):
    k = ptxgen.compile(_spec(batch="ab"))
    _fresh(k)
    a, b, out = case()
    with pytest.raises((ArgumentError, ProblemError), match=match):
        k(a, b, out)
    assert sim.launches == []


def test_shared_spec_refuses_a_batch_of_b(sim):
    k = ptxgen.compile(_spec(batch="a"))
    _fresh(k)
    with pytest.raises(ArgumentError, match="batch='ab'"):
        k(FakeArray((3, 300, 264)), FakeArray((3, 200, 264)), FakeArray((3, 300, 200)))


def test_gemm_args_match_the_prepared_block(sim):
    """The slow path's arguments from scratch (gemm_args) equal the bytes the prepared block hands the driver."""
    k = ptxgen.compile(_spec(batch="ab", a="mnmajor-sw128", b="mnmajor-sw128", out_dtype="f32"))
    _fresh(k)
    B, m, n, kk = 2, 256, 136, 100
    a = FakeArray((B, m, kk), strides=(kk * m, 1, m))  # each batch the transposed view of a K x M matrix
    b = FakeArray((B, n, kk), strides=(kk * n, 1, n))
    out = FakeArray((B, m, n), "float32", strides=(m * n, n, 1))
    k(a, b, out)
    got = _read(sim.launches[-1]["params"], k.params)
    ai, bi, oi = (read_array(x, nm) for x, nm in ((a, "a"), (b, "b"), (out, "out")))
    p = k.check(a, b, out)
    want = gemm_args(k.plan, ai.ptr, bi.ptr, oi.ptr, p, encode=_encode_all).read_back()
    assert got == [v if isinstance(v, bytes) else int(v) for v in want]
    assert _words(got[0])[:7] == [3, ai.ptr, m, kk, B, m * 2, kk * m * 2]  # M-major: dims (M, K, batch)


def test_c_launcher_and_ctypes_pack_the_same_bytes_for_3d_maps(sim, monkeypatch):
    _launcher = pytest.importorskip("ptxgen.runtime.launch._launcher", reason="the compiled launcher was not built")
    from test_launcher import LAUNCH

    k = ptxgen.compile(_spec(batch="ab"))
    B, m, n, kk = 3, 300, 200, 264
    arrays = [FakeArray((B, m, kk)) for _ in range(2)], FakeArray((B, n, kk)), [FakeArray((B, m, n)) for _ in range(2)]
    calls = [(arrays[0][i % 2], arrays[1], arrays[2][(i // 2) % 2]) for i in range(5)]
    _fresh(k)
    py = []
    for x, y, o in calls:
        k(x, y, o)
        py.append(_read(sim.launches[-1]["params"], k.params))

    class CDriver:
        def __init__(self):
            self._cb = LAUNCH(self._launch)
            self.c_launch = ctypes.cast(self._cb, ctypes.c_void_p).value

        def _launch(self, func, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
            sim.launches.append(dict(grid=(gx, gy, gz), params=params, bytes=_read(params, k.params)))
            return 0

        def launch(self, *a):
            raise AssertionError("the ctypes launch ran although the compiled launcher was built")

        def encode(self, args):
            return _encode_all(args)

    monkeypatch.setattr("ptxgen.runtime.launch.fastlaunch._DRIVER", CDriver())
    _fresh(k)
    sim.launches.clear()
    for x, y, o in calls:
        k(x, y, o)
    (entry,) = k._entries.values()
    assert isinstance(entry._c, _launcher.Launcher)
    assert [x["bytes"] for x in sim.launches] == py


# ------------------------------------------------------------------------------------------------
# GPU: against torch
# ------------------------------------------------------------------------------------------------
def _torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    return torch


def _ref(torch, a, b):
    bt = b.transpose(-1, -2)
    return torch.matmul(a.double(), bt.double())


@pytest.mark.gpu
@pytest.mark.parametrize("B", [1, 3])
@pytest.mark.parametrize("shape", [(300, 200, 264), (129, 136, 72), (7, 9, 24), (1000, 520, 1000)])
@pytest.mark.parametrize("shared", [False, True])
def test_gpu_batched_gemm_matches_torch(B, shape, shared):
    torch = _torch_cuda()
    m, n, k = shape
    g = torch.Generator(device="cuda").manual_seed(m * 7 + n + k + B)
    a = torch.randn(B, m, k, device="cuda", generator=g).bfloat16()
    b = torch.randn(n, k, device="cuda", generator=g).bfloat16() if shared else torch.randn(B, n, k, device="cuda", generator=g).bfloat16()
    out = ptxgen.gemm(a, b)
    assert out.shape == (B, m, n)
    torch.cuda.synchronize()
    want = _ref(torch, a, b if not shared else b.expand(B, n, k))
    torch.testing.assert_close(out.double(), want, rtol=2e-2, atol=2e-2 * k ** 0.5)
    # the kernel that ran is the batched one (one launch), not a flattened 2-D call
    (entry,) = {id(e): e for key, e in api.dispatch._TORCH_ENTRIES.items()
                if key[1][0] == a.shape and key[1][1] == a.stride() and key[1][4] == b.shape}.values()
    assert entry.batched and entry.batch == B


@pytest.mark.gpu
def test_gpu_batched_strided_views_and_out():
    """A batch stride past the rows (every other batch of a larger tensor), padded rows, M-major views, out given with
    padded rows; the K tail and row tail of each batch must not read the next batch."""
    torch = _torch_cuda()
    g = torch.Generator(device="cuda").manual_seed(3)
    B, m, n, k = 3, 257, 131, 200
    big = torch.randn(2 * B, m, k + 8, device="cuda", generator=g).bfloat16()
    a = big[::2, :, :k]  # batch stride 2 x m x (k + 8), rows k + 8 apart
    b = torch.randn(B, n, k, device="cuda", generator=g).bfloat16()
    out_full = torch.full((B, m, n + 5), float("nan"), device="cuda", dtype=torch.bfloat16)  # rows 272 B apart
    out = out_full[:, :, :n]
    r = ptxgen.gemm(a, b, out)
    assert r is out
    torch.cuda.synchronize()
    torch.testing.assert_close(r.double(), _ref(torch, a, b), rtol=2e-2, atol=2e-2 * k ** 0.5)
    # M-major / N-major views per batch: stored B x K x M, B x K x N
    at = torch.randn(B, k, 264, device="cuda", generator=g).bfloat16().transpose(1, 2)
    bt = torch.randn(B, k, 136, device="cuda", generator=g).bfloat16().transpose(1, 2)
    r2 = ptxgen.gemm(at, bt)
    torch.cuda.synchronize()
    torch.testing.assert_close(r2.double(), _ref(torch, at, bt), rtol=2e-2, atol=2e-2 * k ** 0.5)
    (entry,) = {id(e): e for key, e in api.dispatch._TORCH_ENTRIES.items()
                if key[1][0] == at.shape and key[1][1] == at.stride()}.values()
    assert entry.batched and entry.problem.lda_batch == k * 264


@pytest.mark.gpu
def test_gpu_batched_hot_path_and_repeated_calls():
    torch = _torch_cuda()
    B, m, n, k = 3, 300, 200, 264
    a = torch.randn(B, m, k, device="cuda").bfloat16()
    b = torch.randn(B, n, k, device="cuda").bfloat16()
    outs = [ptxgen.gemm(a, b) for _ in range(3)]
    a2 = torch.randn(B, m, k, device="cuda").bfloat16()
    o2 = ptxgen.gemm(a2, b)
    torch.cuda.synchronize()
    for o in outs:
        torch.testing.assert_close(o.double(), _ref(torch, a, b), rtol=2e-2, atol=2e-2 * k ** 0.5)
    torch.testing.assert_close(o2.double(), _ref(torch, a2, b), rtol=2e-2, atol=2e-2 * k ** 0.5)


def test_gemm_runs_batched_arrays_as_one_launch(sim):
    """ptxgen.gemm picks the kernel a 2-D call with one batch's planes gets, made batched: one launch, 3-D maps."""
    from ptxgen.api.select import batched_spec_for_arrays

    B, m, n, kk = 4, 300, 200, 264
    a, b, out = FakeArray((B, m, kk)), FakeArray((B, n, kk)), FakeArray((B, m, n))
    spec, why = batched_spec_for_arrays(read_array(a, "a"), read_array(b, "b"), read_array(out, "out"), None)
    assert spec.batch.value == "ab" and "batched over 4 batches" in why
    sim.launches.clear()
    assert ptxgen.gemm(a, b, out) is out
    assert len(sim.launches) == 1
    shared = FakeArray((n, kk))
    assert ptxgen.gemm(a, shared, out) is out
    assert len(sim.launches) == 2
    s2, _ = batched_spec_for_arrays(read_array(a, "a"), read_array(shared, "b"), read_array(out, "out"), None)
    assert s2.batch.value == "a"
    # a 3-D b broadcast along the batch (stride 0) is the shared case too
    bcast = FakeArray((B, n, kk), strides=(0, kk, 1), ptr=read_array(shared, "b").ptr)
    assert ptxgen.gemm(a, bcast, out) is out and len(sim.launches) == 3


def test_gemm_refuses_bad_batched_arrays_before_launching(sim):
    sim.launches.clear()
    with pytest.raises(ArgumentError, match="batch"):
        ptxgen.gemm(FakeArray((300, 264)), FakeArray((3, 200, 264)), FakeArray((300, 200)))
    with pytest.raises(ArgumentError, match="out has shape"):
        ptxgen.gemm(FakeArray((3, 300, 264)), FakeArray((3, 200, 264)), FakeArray((300, 200)))
    # interleaved batches (a (M, B, K) tensor viewed as B x M x K): not a torch/CuPy array, so nothing to pack
    with pytest.raises((ArgumentError, ProblemError), match="overlap"):
        ptxgen.gemm(FakeArray((3, 300, 264), strides=(264, 3 * 264, 1)), FakeArray((3, 200, 264)), FakeArray((3, 300, 200)))
    assert sim.launches == []
