"""ptxgen.api.fp8blocks.gemm's prepared launches (ptxgen.api.launch.fp8launch), on a simulated H200 (no GPU): a repeated call
with one dispatch key launches exactly what the slow path would (every argument, tensor maps included), without
building a spec; a changed pointer is re-pointed; a pointer that breaks a rule, and a changed key, go the slow way.
On the H200: tests/test_epilogue_ops.py's block-FP8 tests call gemm repeatedly; tools/bench_blockfp8_api.py times it."""

from __future__ import annotations

import pytest

import ptxgen.api.fp8blocks as fb
from test_blockfp8 import CaiArray, simulated_bfp8_launches

# K blocks 4, N blocks 80: 2 x 80 tiles of 192 x 128 (2 x 54 of 128 x 192), more than half of 132 SMs: no stream-K
M, N, K = 200, 10240, 400


def arrays(base=0x10000000, sa_base=0x40000000, m=M, n=N, k=K):
    nb, kb = -(-n // 128), -(-k // 128)
    return dict(a=CaiArray((m, k), "float8_e4m3fn", (k, 1), base),
                b=CaiArray((n, k), "float8_e4m3fn", (k, 1), base + 0x1000000),
                out=CaiArray((m, n), "bfloat16", (-(-n // 8) * 8, 1), base + 0x2000000),
                sa=CaiArray((m, kb), "float32", (1, 208), sa_base),
                sb=CaiArray((kb, nb), "float32", (1, -(-kb // 4) * 4), base + 0x4000000))


def call(x, **kw):
    return fb.gemm(x["a"], x["b"], x["sa"], x["sb"], x["out"], **kw)


@pytest.fixture
def launches(monkeypatch):
    got = simulated_bfp8_launches(monkeypatch)
    # a map's bytes name its address, so a map left at the last call's pointer is seen
    monkeypatch.setattr("ptxgen.runtime.launch.tensormap.encode", lambda args: args.global_address.to_bytes(8, "little") + bytes(120))
    yield got  # (the helper emptied the prepared tables and unloaded earlier tests' simulated kernels)
    fb._BY_INFO.clear()


def slow_args(x, **kw):
    """What the slow path launches for ``x`` (the tables emptied first)."""
    fb._BY_INFO.clear()
    return call(x, **kw)


def test_a_repeated_call_launches_what_the_slow_path_does_without_a_spec(launches, monkeypatch):
    x = arrays()
    call(x)
    first = launches[-1]
    monkeypatch.setattr(fb, "chosen_spec", lambda *a: pytest.fail("the prepared call built a spec"))
    monkeypatch.setattr(fb, "default_spec", lambda *a, **k: pytest.fail("the prepared call built a spec"))
    call(x)
    assert launches[-1] == first and len(fb._BY_INFO) == 1
    assert first[1][-1][:8] == (0x40000000).to_bytes(8, "little")  # tma_scales_spec: scale_a's map last


@pytest.mark.parametrize("moved", ["a", "b", "out", "sa", "sb"])
def test_a_moved_array_is_re_pointed(launches, monkeypatch, moved):
    x = arrays()
    call(x)
    y = arrays()
    shift = 0x100 if moved != "sa" else 0x1000  # scale_a stays 16-byte aligned (the tma kernel)
    old = y[moved]
    ptr = old.__cuda_array_interface__["data"][0] + shift
    y[moved] = CaiArray(tuple(old.__cuda_array_interface__["shape"]), old.dtype,
                        tuple(s // {"float8_e4m3fn": 1, "bfloat16": 2, "float32": 4}[old.dtype]
                              for s in old.__cuda_array_interface__["strides"]), ptr)
    with monkeypatch.context() as mp:  # the prepared launch, not the slow path
        mp.setattr(fb, "chosen_spec", lambda *a: pytest.fail("the prepared call built a spec"))
        call(y)
    hot = launches[-1]
    assert len(fb._BY_INFO) == 1
    slow_args(y)
    assert launches[-1] == hot
    assert hot != launches[0]  # control: the move is visible in the arguments


def test_a_misaligned_scale_a_takes_the_scale_warp_kernel_and_keeps_the_tma_one(launches):
    x = arrays()
    call(x)
    tma = launches[-1]
    call(arrays(sa_base=0x40000004))  # 4-byte aligned only: chosen_spec's default_spec (scale warp, no scale_a map)
    smem = launches[-1]
    assert smem[1][-1] == 4 and tma[1][-1][:8] == (0x40000000).to_bytes(8, "little")  # lds_b last; the map last
    assert len(fb._BY_INFO) == 2
    call(x)
    assert launches[-1] == tma


def test_rules_still_hold_on_a_prepared_key(launches):
    x = arrays()
    call(x)
    y = arrays()
    y["out"] = CaiArray((M, N), "bfloat16", (N, 1), 0x10000000 + 64)  # out over A's bytes
    with pytest.raises(fb.ArgumentError, match="overlaps"):
        call(y)
    z = arrays()
    z["out"] = CaiArray((M, N), "bfloat16", (N, 1), 0x12000008)  # 8-byte aligned: TMA cannot store there
    n = len(launches)
    with pytest.raises(Exception):
        call(z)
    assert len(launches) == n


def test_few_tiles_take_stream_k_and_each_call_its_streams_workspace(launches, monkeypatch):
    """200 x 300 x 4096: gemm picks 64 x 128 tiles (derive.scaled.bfp8tiles), 4 x 3 of them on 132 SMs, so the stream-K form (fp8blocks.chosen_spec); a prepared call asks for the
    calling stream's workspace every time (launchplan.streamk_workspace: a graph capture's differs) and passes it."""
    import ptxgen.api.fp8blocks as fb2

    asked = []
    monkeypatch.setattr(fb2, "streamk_workspace", lambda drv, di, stream, nbytes, like, ens: asked.append(nbytes) or (0x7100000 + 0x1000 * len(asked), None))
    x = arrays(n=300, k=4096)  # 32 K blocks: each of the 12 tiles split 8 ways
    call(x)
    call(x)
    call(x)
    assert [l[1][-1] for l in launches] == [0x7101000, 0x7102000, 0x7103000] and len(set(asked)) == 1
    assert len(fb2._BY_INFO) == 1 and launches[1][1][:-1] == launches[0][1][:-1]
    from ptxgen.derive.store.streamk import FLAG_REGION_BYTES

    assert asked[0] >= FLAG_REGION_BYTES + 12 * 7 * 64 * 128 * 4  # 12 tiles x 7 partials of 64 x 128 floats


def test_the_pick_splits_only_few_tiles():
    """Stream-K where the chosen tile's M x N tiles fill at most half the SMs, whole tiles otherwise."""
    from ptxgen.runtime.launch.arrays import ArrayInfo

    sa = ArrayInfo("scale_a", 0x40000000, (200, 4), (1, 208), "f32", 4, None, "test", "test")
    few = fb.chosen_spec("bf16", sa, 208, 200, 300, k=4096)
    assert (few.bm, few.bn, few.stream_k) == (64, 128, fb.FEW_TILES_STREAM_K)  # 4 x 3 tiles
    big = fb.chosen_spec("bf16", sa, 4096, 4096, 7168, k=16384)
    assert (big.bm, big.bn, big.stream_k) == (192, 128, 1) and big == fb.tma_scales_spec("bf16")  # 22 x 56 tiles
    mid = fb.chosen_spec("bf16", sa, 512, 512, 16 * 128, k=7168)  # 4 x 16 tiles of 128 x 128: half of 132 SMs
    assert (mid.bm, mid.bn, mid.stream_k) == (128, 128, fb.FEW_TILES_STREAM_K)
    assert fb.chosen_spec("bf16", sa, 512, 512, 4096, k=7168).stream_k == 1  # 4 x 32 tiles of 128 x 128
    assert fb.chosen_spec("bf16", sa, 208, 200, 300, sm_count=8, k=4096).stream_k == 1  # 12 or 6 tiles on 8 SMs
    assert fb.chosen_spec("bf16", sa, 208) == fb.tma_scales_spec("bf16")  # no problem given: the whole-tile kernel
    odd = ArrayInfo("scale_a", 0x40000004, (200, 4), (1, 208), "f32", 4, None, "test", "test")
    few = fb.chosen_spec("bf16", odd, 208, 200, 300)  # scale_a not 16-byte aligned: the scale warp's kernel, split too
    assert few.stream_k == fb.FEW_TILES_STREAM_K and few.scale_load.value == "smem" and few.bm == 128


def test_a_new_shape_or_spec_is_a_new_key(launches):
    call(arrays())
    call(arrays(m=96))
    call(arrays(), spec=fb.default_spec())
    assert len(fb._BY_INFO) == 3 and len({tuple(map(repr, l[1])) for l in launches}) == 3


# -- on the H200 (gpu tier) -------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k,give_out", [(256, 384, 512, True), (200, 300, 400, False), (68, 1000, 1296, True)])
def test_prepared_calls_match_the_slow_path_bit_for_bit(gpu, m, n, k, give_out):
    """Three input sets of one shape, each called twice through the prepared launch (torch tensors, ``out`` given or
    not), equal bit for bit to the slow path's output for the same inputs (the tables emptied), and the first within
    2^-7 of the float64 recipe."""
    torch = pytest.importorskip("torch")
    import numpy as np

    from ptxgen.model.numerics import bfp8model

    def inputs(seed):
        g = torch.Generator().manual_seed(seed)
        a = (torch.randn(m, k, generator=g) * 0.5).to(torch.float8_e4m3fn).cuda()
        b = (torch.randn(n, k, generator=g) * 0.5).to(torch.float8_e4m3fn).cuda()
        kb, nb = -(-k // 128), -(-n // 128)
        return a, b, (torch.rand(kb, m, generator=g) + 0.5).cuda().t(), (torch.rand(nb, kb, generator=g) + 0.5).cuda().t()

    def run(x):
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda") if give_out else None
        return fb.gemm(*x, out)

    sets = [inputs(s) for s in range(3)]
    fb._BY_TORCH.clear()
    fb._BY_INFO.clear()
    hot = [run(x) for x in sets + sets]
    assert len(fb._BY_TORCH) == 1  # one key: every call after the first went the prepared way
    torch.cuda.synchronize()
    for i, x in enumerate(sets):
        fb._BY_TORCH.clear()
        fb._BY_INFO.clear()
        slow = run(x)
        torch.cuda.synchronize()
        for h in (hot[i], hot[i + 3]):
            assert torch.equal(h.view(torch.int16), slow.view(torch.int16)), i
    f64 = lambda t: t.float().cpu().numpy().astype(np.float64)  # noqa: E731
    a, b, sa, sb = sets[0]
    assert not bfp8model.outside_bound(f64(hot[0]), f64(a), f64(sa), f64(b), f64(sb), 2.0 ** -7).any()
