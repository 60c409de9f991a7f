"""Stream-K in ``ptxgen.gemm``'s and ``CompiledKernel``'s launch path (api.launch.launchplan: ``streamk_workspace``, the W slot).

CPU tier: the flag protocol the kernel renders leaves every flag zero after a launch, under any interleaving (L1: the
wait, reset and count are read out of the rendered C and replayed against the plan; controls with a wrong reset or
wait target must fail); the launch plan on a simulated device: the workspace per (device, stream), its bytes, the flags
zeroed once in stream order before the first launch, the W slot patched per stream (the bytes cuLaunchKernel reads
equal the slow path's, built from scratch), a CUDA-graph capture's own workspace; the selection runs the chooser's
stream-K pick (the old fallback gone) and the fused and batched paths leave stream-K out.

GPU tier (``gpu`` marker; each shape in its own process with a timeout, so that a wait that never ends fails the test
instead of hanging the run): ``ptxgen.gemm`` on shapes where the chooser picks stream-K, against float64, three calls
bit-identical, on two streams at once, in a CUDA graph replayed twice with refilled inputs, the flags zero afterwards
(tests/streamk_api_gpu_case.py)."""

from __future__ import annotations

import ctypes
import dataclasses
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ptxgen
from ptxgen.api.launch import launchplan
from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.store.streamk import FLAG_REGION_BYTES, StreamKPlan
from ptxgen.emit.views.streamk_view import streamk_view
from ptxgen.isa.types import SpecError
from ptxgen.runtime.choose import rules as choose_mod
from ptxgen.runtime.launch import fastlaunch
from ptxgen.runtime.launch.arrays import ArgumentError
from ptxgen.runtime.choose import choose
from ptxgen.runtime.launch.launch import Problem, gemm_launches, workspace_bytes
from test_api import FakeArray, SimulatedGPU, _fake_encode, _fresh, kmajor

# shapes where the chooser picks a stream-K kernel (bf16, tight K-major rows): 1x1 and 2x1 clusters, TMA-store and
# direct epilogues, K tails, partial tiles, and one partial round split over every SM (838 x 1309 x 8000: 42 tiles;
# 1009 x 129 x 3968: 16); the GPU tier runs ptxgen.gemm on each
GPU_SHAPES = [(838, 1309, 8000), (1009, 129, 3968), (2520, 1702, 1672), (4230, 1110, 6392), (1500, 9000, 3000),
              (2500, 10000, 4000), (5000, 5000, 5000)]


def sk_pick(m=2500, n=10000, k=4000):
    return choose("bf16", "sm_90a", m, n, k, lda=k, ldb=k)


# -- L1: the flag protocol, read out of the rendered C ----------------------------------------------------------------
def protocol(view) -> dict:
    """The flag protocol as the kernel renders it: the flag expression of the owner's wait and of a split's count (they
    must be one expression), the value the owner waits for, the value it resets to, and the count a split adds."""
    wait = re.fullmatch(r"\{ int\* const sk_flag = (.+?); while \(flag_acquire_load\(sk_flag\) != (.+?)\) \{ \} "
                        r"flag_relaxed_store\(sk_flag, (.+?)\); \}", view.wait_owner)
    signal = re.fullmatch(r"flag_release_add\((.+), (\w+)\);", view.signal)
    assert wait and signal, (view.wait_owner, view.signal)
    return dict(wait_flag=wait.group(1), target=wait.group(2), reset=wait.group(3), signal_flag=signal.group(1),
                add=signal.group(2))


def c_int(expr: str, env: dict) -> int:
    """Evaluate one of the integer C expressions above (casts dropped, W the flag array's base 0)."""
    py = re.sub(r"reinterpret_cast<int\*>\(W\)", "0", expr)
    py = re.sub(r"static_cast<int>\((\w+)\)", r"\1", py).replace("/", "//")
    return eval(py, {}, dict(env))  # noqa: S307 - our own rendered integer expressions


def run_launch(flags: dict, proto: dict, sk: StreamKPlan, lay, rng: random.Random) -> list[str]:
    """One launch's flag traffic in a random interleaving: every split z > 0 of a last-round item adds its count to its
    (item, rank, group) flag; each owner polls until it reads the target, then resets. Problems: an owner released
    before every split counted, an owner that would wait forever, flags two owners share, flags not zero at the end."""
    problems = []
    owners = {}
    events = []
    for item in range(lay.dp_items, lay.items):
        for r in range(sk.cluster_size):
            for g in range(sk.groups):
                env = dict(tile=item, sk_dp=lay.dp_items, cta_rank=r, wg=g, sk_parts=lay.splits)
                f, fs = c_int(proto["wait_flag"], env), c_int(proto["signal_flag"], env)
                if f != fs:
                    problems.append(f"item {item} rank {r} group {g}: the owner waits on flag {f}, the splits count on {fs}")
                if f != sk.flag_index(item, r, g, lay):
                    problems.append(f"flag {f} is not the plan's {sk.flag_index(item, r, g, lay)}")
                if f in owners:
                    problems.append(f"flag {f} has two owners")
                owners[f] = dict(target=c_int(proto["target"], env), reset=c_int(proto["reset"], env), counted=0,
                                 done=False)
                events += [("add", f, c_int(proto["add"], env))] * (lay.splits - 1)
    rng.shuffle(events)
    pending = list(owners)
    while events or pending:
        if pending and (not events or rng.random() < 0.3):  # an owner polls once
            f = rng.choice(pending)
            o = owners[f]
            if flags.get(f, 0) == o["target"]:
                if o["counted"] != lay.splits - 1:
                    problems.append(f"flag {f}: the owner went on after {o['counted']} of {lay.splits - 1} partials")
                flags[f] = o["reset"]
                o["done"] = True
                pending.remove(f)
            elif not events and all(flags.get(x, 0) != owners[x]["target"] for x in pending):
                problems.append(f"{len(pending)} owners would wait forever (flag {f} reads {flags.get(f, 0)})")
                break
        else:
            _, f, v = events.pop()
            flags[f] = flags.get(f, 0) + v
            owners[f]["counted"] += 1
    left = {f: v for f, v in flags.items() if v}
    if left:
        problems.append(f"{len(left)} flags not zero after the launch, e.g. {next(iter(left.items()))}")
    return problems


def pick_plans():
    import ptxgen.api.fp8blocks

    # the chooser's bf16 picks (1x1 and 2x1 clusters), then block-scaled FP8 (128 x 192 x 128: its own BK and slot size)
    return ([plan_kernel(sk_pick(*s).spec) for s in ((2500, 10000, 4000), (5000, 5000, 5000))]
            + [plan_kernel(ptxgen.api.fp8blocks.default_spec(stream_k=8)),
               plan_kernel(ptxgen.api.fp8blocks.default_spec(stream_k=4, cluster="2x1"))])


PLANS = pick_plans()


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 3000), st.integers(1, 132), st.integers(1, 20_000), st.sampled_from(range(len(PLANS))), st.integers(0, 2**31))
def test_the_rendered_flag_protocol_leaves_every_flag_zero(items, clusters, k, which, seed):
    plan = PLANS[which]
    sk = plan.stream_k
    proto = protocol(streamk_view(plan, "num_tiles"))
    lay = sk.layout(items, max(1, clusters // sk.cluster_size), k)
    flags: dict = {}
    rng = random.Random(seed)
    for _ in range(3):  # three launches on one workspace, flags zeroed only before the first
        assert run_launch(flags, proto, sk, lay, rng) == []


@pytest.mark.parametrize("which", [1, 2, 3])
def test_the_rendered_protocol_is_the_kernels(which):
    """The strings the model reads are in the kernel's source, inside the owner's and the splits' branches (the dense
    kernel and block-scaled FP8's, whose consumer loop is templates/mma_blockfp8.cuh.j2)."""
    from ptxgen.emit.render import render_kernel

    plan = PLANS[which]
    view = streamk_view(plan, "num_cluster_tiles" if plan.stream_k.cluster_size > 1 else "num_tiles")
    src = render_kernel(plan)
    assert view.wait_owner in src and view.signal in src
    assert src.index("if (sk_split > 0)") < src.index(view.signal) < src.index(view.wait_owner)
    assert protocol(view)["reset"] == "0" and protocol(view)["add"] == "1"


@pytest.mark.parametrize("mutation,needle", [
    (("flag_relaxed_store(sk_flag, 0)", "flag_relaxed_store(sk_flag, 1)"), "not zero"),
    (("!= sk_parts - 1)", "!= sk_parts)"), "wait forever"),
    (("!= sk_parts - 1)", "!= sk_parts - 2)"), "went on after"),
    (("* 2 + wg;", "* 2 + 0;"), "two owners"),
])
def test_control_a_wrong_protocol_is_caught(mutation, needle):
    plan = PLANS[1]
    view = streamk_view(plan, "num_cluster_tiles")
    bad = dataclasses.replace(view, wait_owner=view.wait_owner.replace(*mutation))
    assert bad.wait_owner != view.wait_owner
    sk = plan.stream_k
    lay = sk.layout(400, 66, 5000)  # 5000^3's 400 cluster tiles on 66 clusters: 4 split 8 ways
    assert lay.splits == 8
    problems = []
    flags: dict = {}
    rng = random.Random(1)
    for _ in range(2):
        problems += run_launch(flags, protocol(bad), sk, lay, rng)
    assert any(needle in p for p in problems), problems


# -- the selection ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("m,n,k", GPU_SHAPES)
def test_the_gpu_shapes_are_stream_k_picks_and_gemm_runs_them(m, n, k):
    from ptxgen.api.select import select_spec

    c = sk_pick(m, n, k)
    spec, why = select_spec("bf16", "sm_90a", m, n, k, lda=k, ldb=k)
    assert c.spec.stream_k > 1 and "stream-k" in c.chosen_by
    assert spec == c.spec and why == c.why and "stream-K" in why and "gemm() runs it without" not in why


def test_control_with_the_stream_k_rule_off_gemm_runs_the_kernel_whole(monkeypatch):
    from ptxgen.api.select import select_spec

    monkeypatch.setattr(choose_mod, "STREAM_K_RULE", False)
    spec, why = select_spec("bf16", "sm_90a", 2500, 10000, 4000)
    assert spec.stream_k == 1 and "stream-K" not in why


def test_control_with_gemm_stream_k_off_gemm_runs_the_pick_whole(monkeypatch):
    from ptxgen.api import select

    monkeypatch.setattr(select, "GEMM_STREAM_K", False)
    c = sk_pick()
    spec, why = select.select_spec("bf16", "sm_90a", 2500, 10000, 4000)
    assert spec.stream_k == 1 and spec.kernel_name == c.spec.kernel_name.replace(f"_streamk{c.spec.stream_k}", "")
    assert why.startswith(c.why) and "GEMM_STREAM_K is off" in why


def test_fused_and_batched_forms_of_a_stream_k_pick_leave_it_out():
    from ptxgen.api.fused import fused_spec
    from ptxgen.derive.store.chainspec import ChainSpec
    from ptxgen.derive.tile.spec import make_spec

    spec = sk_pick().spec
    f = fused_spec(spec, ChainSpec(alpha=True), "bf16")
    assert f.stream_k == 1 and f.fuse is not None
    batched = make_spec(**{**spec.to_json(), "batch": "ab", "epilogue": "direct", "cluster": "1x1", "stream_k": 1})
    assert batched.stream_k == 1
    with pytest.raises(SpecError):  # the control: with stream_k kept the spec is illegal
        make_spec(**{**spec.to_json(), "batch": "ab", "epilogue": "direct", "cluster": "1x1"})


# -- the launch plan on a simulated device ----------------------------------------------------------------------------
class Recorder:
    """The fake driver's stream-K calls, the allocations and the launches in one ordered log."""

    def __init__(self, monkeypatch, sim):
        self.log, self.capturing, self.next_addr = [], set(), 0x7000_0000
        drv = fastlaunch._DRIVER
        inner = drv.launch
        rec = self

        def launch(func, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
            rec.log.append(("launch", stream, params))
            return inner(func, gx, gy, gz, bx, by, bz, smem, stream, params, extra)

        drv.launch = launch
        drv.capture_status = lambda stream: (0, 1 if stream in rec.capturing else 0)
        drv.memset_d32_async = lambda ptr, value, count, stream: rec.log.append(("memset", ptr, value, count, stream)) or 0

        def allocate(nbytes, torch_like=None, device_index=0):
            addr = rec.next_addr
            rec.next_addr += -(-nbytes // 4096) * 4096 + 4096
            rec.log.append(("alloc", addr, nbytes, torch_like))
            return addr, object()

        monkeypatch.setattr(launchplan, "allocate_device_bytes", allocate)
        monkeypatch.setattr(launchplan, "_STREAMK_WORKSPACES", {})
        monkeypatch.setattr(launchplan, "_STREAMK_OUTGROWN", [])
        monkeypatch.setattr(launchplan, "_STREAMK_CAPTURED", [])

    def of(self, kind):
        return [e for e in self.log if e[0] == kind]


@pytest.fixture
def sim(monkeypatch):
    s = SimulatedGPU(monkeypatch)
    s.rec = Recorder(monkeypatch, s)
    return s


@pytest.fixture(scope="module")
def sk_kernel():
    return ptxgen.compile(sk_pick().spec)  # 2500 x 10000 x 4000's pick: 128 x 192, stream-K 7 (NVRTC, cached)


class Stream:
    def __init__(self, handle):
        self.cuda_stream = handle


def read_block(address: int, params) -> list:
    """The parameters as cuLaunchKernel reads them (W, a written pointer, 8 bytes)."""
    arr = (ctypes.c_void_p * len(params)).from_address(address)
    out = []
    for i, q in enumerate(params):
        if q.kind == "tensormap":
            out.append(ctypes.string_at(arr[i], 128))
        elif q.kind in ("ptr", "wptr"):
            out.append(ctypes.c_uint64.from_address(arr[i]).value)
        else:
            out.append(ctypes.c_int32.from_address(arr[i]).value)
    return out


def slow_block(kernel, a, b, out, w: int, m, n, k) -> list:
    """The same parameters built from scratch (runtime.launch.launch.gemm_launches: what ptxgen bench and validate launch)."""
    ptr = [x.__cuda_array_interface__["data"][0] for x in (a, b, out)]
    p = Problem(m, n, k, k, k, out.__cuda_array_interface__["strides"][0] // 2)
    (_, _, _, args), = gemm_launches(kernel.plan, "mma", *ptr, w, p, 132, encode=_fake_encode)
    return [v if isinstance(v, bytes) else int(v) for v in args.read_back()]


_PTR = [1 << 44]


def big_ptr() -> int:
    """Fake addresses 1 GiB apart (test_api's are 16 MiB apart: these operands are larger)."""
    _PTR[0] += 1 << 30
    return _PTR[0]


def arrays(m=2500, n=10000, k=4000):
    return (kmajor(m, k, ptr=big_ptr()), kmajor(n, k, ptr=big_ptr()),
            FakeArray((m, n), "bfloat16", strides=(n, 1), ptr=big_ptr()))


def test_a_workspace_per_stream_zeroed_once_and_patched_into_w(sim, sk_kernel):
    k = sk_kernel
    _fresh(k)
    rec = sim.rec
    m, n, kk = 2500, 10000, 4000
    a, b, out = arrays()
    s1, s2 = Stream(0x51), Stream(0x52)
    for s in (s1, s1, s2, s1, s2):
        assert k(a, b, out, stream=s) is out
    allocs, memsets, launches = rec.of("alloc"), rec.of("memset"), rec.of("launch")
    assert len(launches) == 5 and len(allocs) == 2 and len(memsets) == 2  # one workspace per stream, zeroed once
    need = workspace_bytes(k.plan, Problem(m, n, kk, kk, kk, n), 132)
    assert need >= FLAG_REGION_BYTES + 4 * 6 * 128 * 192 * 4  # 1060 tiles on 132 CTAs: 4 split 7 ways, 6 partials each
    w = {}
    for (_, addr, nbytes, like), (_, maddr, value, count, mstream) in zip(allocs, memsets):
        assert nbytes >= need and nbytes >= launchplan.STREAMK_MIN_WORKSPACE_BYTES and nbytes & (nbytes - 1) == 0
        assert (maddr, value, count) == (addr, 0, FLAG_REGION_BYTES // 4) and like is None  # FakeArray: not torch
        w[mstream] = addr
    assert set(w) == {0x51, 0x52} and w[0x51] != w[0x52]
    # each memset precedes the first launch on its stream, in the log's (the driver's) order
    for s in (0x51, 0x52):
        first_launch = next(i for i, e in enumerate(rec.log) if e[0] == "launch" and e[1] == s)
        zeroed = next(i for i, e in enumerate(rec.log) if e[0] == "memset" and e[4] == s)
        assert zeroed < first_launch
    # the bytes cuLaunchKernel reads: the slow path's with the calling stream's workspace in W
    for s in (s1, s2, s1):
        k(a, b, out, stream=s)
        got = read_block(rec.of("launch")[-1][2], k.params)
        assert got == slow_block(k, a, b, out, w[s.cuda_stream], m, n, kk)
        assert k.params[-1].name == "W" and got[-1] == w[s.cuda_stream]
    _fresh(k)


def test_control_the_other_streams_workspace_is_a_difference(sim, sk_kernel):
    k = sk_kernel
    _fresh(k)
    a, b, out = arrays()
    k(a, b, out, stream=Stream(0x61))
    k(a, b, out, stream=Stream(0x62))
    w61 = launchplan._STREAMK_WORKSPACES[(0, 0x61)][0]
    got = read_block(sim.rec.of("launch")[-1][2], k.params)
    assert got != slow_block(k, a, b, out, w61, 2500, 10000, 4000)  # the block holds stream 0x62's workspace now
    _fresh(k)


def test_a_larger_problem_grows_the_streams_workspace_and_keeps_the_old_one(sim, sk_kernel):
    k = sk_kernel
    _fresh(k)
    s = Stream(0x71)
    # 20 tiles of 8 K-tiles (2 splits of at least 4 over the 132 SMs) and 1060 tiles (the last round's 4 split 7 ways)
    small, big = (128, 3840, 512), (2500, 10000, 4000)
    need_small, need_big = (workspace_bytes(k.plan, Problem(m, n, kk, kk, kk, n), 132) for m, n, kk in (small, big))
    assert need_small < (1 << 21) < need_big  # the bound over every grid the launch may take: 1.98 MB and 9.8 MB
    k(*arrays(*small), stream=s)
    first = launchplan._STREAMK_WORKSPACES[(0, 0x71)]
    assert first[1] == 1 << 21
    k(*arrays(*big), stream=s)
    second = launchplan._STREAMK_WORKSPACES[(0, 0x71)]
    assert second[1] == 1 << 24 and second[0] != first[0] and launchplan._STREAMK_OUTGROWN == [first]
    assert [e[1] for e in sim.rec.of("memset")] == [first[0], second[0]]  # the new one zeroed before its first launch
    k(*arrays(*small), stream=s)
    assert launchplan._STREAMK_WORKSPACES[(0, 0x71)] == second and len(sim.rec.of("memset")) == 2  # reused as it is
    assert read_block(sim.rec.of("launch")[-1][2], k.params)[-1] == second[0]
    _fresh(k)


def test_a_graph_capture_gets_a_fresh_workspace_per_launch_with_the_memset_captured(sim, sk_kernel, monkeypatch):
    k = sk_kernel
    _fresh(k)
    rec = sim.rec
    a, b, out = arrays()
    s = Stream(0x81)
    k(a, b, out, stream=s)  # eager: the stream's workspace
    eager = launchplan._STREAMK_WORKSPACES[(0, 0x81)][0]
    with pytest.raises(ArgumentError, match="torch tensors"):  # capturing with arrays that are not torch's
        rec.capturing.add(0x81)
        k(a, b, out, stream=s)
    # a torch caller (the tensor only lends new_empty, faked by allocate_device_bytes here)
    monkeypatch.setattr(launchplan, "_torch_current_stream", lambda index: 0x81)
    entry = next(iter(k._entries.values()))
    ptrs = [x.__cuda_array_interface__["data"][0] for x in (a, b, out)]
    before = len(rec.log)
    like = object()
    seen = []
    for _ in range(2):
        entry.run(*ptrs, 0x81, like)
        seen.append(read_block(rec.log[-1][2], k.params)[-1])  # the block is patched in place: read it right away
    new = rec.log[before:]
    kinds = [e[0] for e in new]
    assert kinds == ["alloc", "memset", "launch"] * 2  # each captured launch: its own workspace, flags zeroed in the graph
    w1, w2 = new[0][1], new[3][1]
    assert len({w1, w2, eager}) == 3 and new[0][3] is like and (new[1][1], new[4][1]) == (w1, w2)
    assert seen == [w1, w2] and launchplan._STREAMK_WORKSPACES[(0, 0x81)][0] == eager
    rec.capturing.clear()
    entry.run(*ptrs, 0x81, like)  # the capture ended: the stream's own workspace again, not re-zeroed
    assert [e[0] for e in rec.log[before + 6:]] == ["launch"] and read_block(rec.log[-1][2], k.params)[-1] == eager
    _fresh(k)


def test_a_stream_k_launch_refuses_a_grid_that_could_wait_on_non_resident_ctas(sim, sk_kernel):
    from ptxgen.runtime.launch.errors import ProblemError

    plan = sk_kernel.plan
    p = Problem(2500, 10000, 4000, 4000, 4000, 10000)
    with pytest.raises(ProblemError, match="not resident"):
        launchplan.Launch(plan=plan, problem=p, func=1, grid=(200, 1, 1), block_dim=(384, 1, 1), smem=1000,
                          driver=fastlaunch._DRIVER, encode=_fake_encode, ensure_context=lambda: None, device_index=0,
                          spans=(0, 0, 0), sm_count=132)
    ok = launchplan.Launch(plan=plan, problem=p, func=1, grid=(132, 1, 1), block_dim=(384, 1, 1), smem=1000,
                           driver=fastlaunch._DRIVER, encode=_fake_encode, ensure_context=lambda: None, device_index=0,
                           spans=(0, 0, 0), sm_count=132)
    assert ok.streamk and ok._c is None and ok.workspace_bytes == workspace_bytes(plan, p, 132)


# -- on the H200 (gpu tier) -------------------------------------------------------------------------------------------
CASE = Path(__file__).resolve().parent / "streamk_api_gpu_case.py"
CASE_TIMEOUT_S = 300  # a compile (NVRTC, first use) and six gemm checks; a wait that never ends is killed here
_TIMED_OUT: list = []


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k", GPU_SHAPES)
def test_gemm_runs_stream_k_deterministically_on_streams_and_in_graphs(gpu, artifact_dir, m, n, k):
    pytest.importorskip("torch")
    if _TIMED_OUT:  # one shape already hung: fail the rest at once rather than wait CASE_TIMEOUT_S each
        pytest.fail(f"not run: {_TIMED_OUT[0]} timed out")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(CASE.parent.parent), os.environ.get("PYTHONPATH", "")])}
    try:
        proc = subprocess.run([sys.executable, str(CASE), str(m), str(n), str(k)], capture_output=True, text=True,
                              timeout=CASE_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired as e:
        _TIMED_OUT.append(f"{m} x {n} x {k}")
        pytest.fail(f"{m} x {n} x {k}: no result in {CASE_TIMEOUT_S} s (a stream-K wait that never ends?): {e.stdout!r}")
    with open(artifact_dir / "streamk_api.jsonl", "a") as f:
        f.write(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["passed"] and report["stream_k"] > 1, report


def test_the_ctypes_driver_asks_the_capture_status_and_zeroes_in_stream_order():
    """fastlaunch._CtypesDriver's two stream-K calls, against a stand-in libcuda (ctypes callbacks with the driver's
    signatures): the status comes back through the pointer, the memset gets pointer, value, count and stream."""
    vp, u32 = ctypes.c_void_p, ctypes.c_uint32
    calls = []

    def is_capturing(stream, status):
        status[0] = 1 if stream == 0x99 else 0
        calls.append(("capturing", stream))
        return 0

    def memset(ptr, value, count, stream):
        calls.append(("memset", ptr, value, count, stream))
        return 700 if stream == 0xBAD else 0

    cbs = dict(
        cuLaunchKernel=ctypes.CFUNCTYPE(ctypes.c_int, vp, *[u32] * 7, vp, vp, vp)(lambda *a: 0),
        cuTensorMapEncodeTiled=ctypes.CFUNCTYPE(ctypes.c_int, vp, ctypes.c_int, u32, vp, vp, vp, vp, vp, ctypes.c_int,
                                                ctypes.c_int, ctypes.c_int, ctypes.c_int)(lambda *a: 0),
        cuStreamIsCapturing=ctypes.CFUNCTYPE(ctypes.c_int, vp, ctypes.POINTER(ctypes.c_int))(is_capturing),
        cuMemsetD32Async=ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, u32, ctypes.c_size_t, vp)(memset),
    )
    lib = type("FakeLibcuda", (), cbs)()
    drv = fastlaunch._CtypesDriver(lib)
    assert drv.capture_status(0x99) == (0, 1) and drv.capture_status(0x98) == (0, 0)
    assert drv.memset_d32_async(0x7000_0000, 0, FLAG_REGION_BYTES // 4, 0x98) == 0
    assert drv.memset_d32_async(0x7000_0000, 0, 1, 0xBAD) == 700  # the CUresult comes back as it is
    assert calls == [("capturing", 0x99), ("capturing", 0x98), ("memset", 0x7000_0000, 0, 4096, 0x98),
                     ("memset", 0x7000_0000, 0, 1, 0xBAD)]


def test_a_failed_flag_memset_or_capture_query_raises_before_any_launch(sim, sk_kernel):
    from ptxgen.runtime.launch.gpu import CudaError

    k = sk_kernel
    _fresh(k)
    drv = fastlaunch._DRIVER
    a, b, out = arrays()
    drv.memset_d32_async = lambda ptr, value, count, stream: 1  # CUDA_ERROR_INVALID_VALUE
    with pytest.raises(CudaError, match="cuMemsetD32Async"):
        k(a, b, out, stream=Stream(0x91))
    assert sim.rec.of("launch") == [] and (0, 0x91) not in launchplan._STREAMK_WORKSPACES  # not kept: zeroed never
    drv.capture_status = lambda stream: (901, 0)  # CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
    with pytest.raises(CudaError, match="cuStreamIsCapturing"):
        k(a, b, out, stream=Stream(0x92))
    assert sim.rec.of("launch") == []
    _fresh(k)
