"""Grouped GEMM with an N-major ``b`` (a G x N x K view whose stride along N is 1: stored G x K x N, as
torch._grouped_mm's own G x K x N weights transposed): one 3-D tensor map over (N, K, G), the group the outer
dimension, so a K tail reads zeros instead of the next group's K rows and no per-group map exists.

Tiers: the spec and the derivation, the L1 TMA model of the rank-3 map (each group read back through the descriptors,
with a control), binding and marshalling (CPU), NVRTC + SASS, and ``gpu`` tests against per-group torch matmuls.
"""

from __future__ import annotations

import numpy as np
import pytest

from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.tile.layout import derive
from ptxgen.derive.tile.spec import make_spec
from ptxgen.api.arrays.groupedbind import b_is_n_major, bind_grouped
from ptxgen.grouped import grouped_spec
from ptxgen.model.bridges.verify import batched_memory, check_operand_tma_3d
from ptxgen.runtime.launch.arrays import ArgumentError, ArrayInfo
from ptxgen.runtime.launch.grouped import GroupedProblem, build_grouped_params, grouped_args, grouped_problem_errors
from test_grouped import read_block

BASE = dict(bm=128, bn=256, bk=64, a="kmajor-sw128", b="mnmajor-sw128", dtype="bf16", out_dtype="bf16", arch="sm_90a",
            stages=4, schedule="persistent", grouped="offs")


def _info(name, shape, strides, dtype="bf16", ptr=0x1000000, itemsize=2):
    return ArrayInfo(name, ptr, tuple(shape), tuple(strides), dtype, itemsize, (2, 0), "torch", "torch")


def _encode_all(args):
    words = [args.rank, args.global_address, *args.global_dims, *args.global_strides, *args.box]
    return b"".join(int(w).to_bytes(8, "little") for w in words).ljust(128, b"\0")


def _words(x):
    return [int.from_bytes(x[i:i + 8], "little") for i in range(0, 128, 8)]


def test_n_major_b_is_one_3d_map_over_n_k_g():
    t = derive(make_spec(**BASE))
    tma = t.b.tma
    assert tma.rank == 3 and tma.global_dims == ("N", "K", "G") and tma.stride_names == ("ldb", "ldb_group")
    assert tma.layout is t.b.store and tma.box[2] == 1
    assert t.a.tma.rank == 2  # A stays one M_total x K map
    dense = derive(make_spec(**{**BASE, "grouped": "none"}))
    assert tma.copies == dense.b.tma.copies  # the same copies as the dense kernel's N-major B
    plan = plan_kernel(make_spec(**BASE))
    (bmap,) = [d for d in plan.grouped.derivation() if d.name == "grouped_b_map"]
    assert "3-D" in bmap.value and "tensormap.replace" in bmap.reason
    k_major = plan_kernel(make_spec(**{**BASE, "b": "kmajor-sw128"}))
    assert [d.value for d in k_major.grouped.derivation() if d.name == "grouped_b_map"] == ["one 2-D map over (G x N) x K"]


def test_the_kernel_loads_b_at_the_group_coordinate():
    from ptxgen.emit.render import render_kernel

    src = render_kernel(plan_kernel(make_spec(**BASE)))
    loads = [line for line in src.splitlines() if "tma_load_3d(b_stage" in line]
    assert loads and all("gc.group" in line and "n0 +" in line for line in loads)
    assert "nb0 +" not in "".join(loads)  # not the (G N) x K view's row


def test_l1_each_group_reads_its_own_weight_and_zeros_past_k():
    tj = derive(make_spec(**BASE)).to_json()
    assert check_operand_tma_3d(tj, "b", 4, np.random.default_rng(2)) == []


def test_l1_control_a_2d_view_would_read_the_next_groups_k_rows():
    """What the issue's 2-D (G K) x N view would do: the group stride folded into the rows (ld_batch = K x ldb, with
    K the whole G K rows) pulls the next group's first K rows into a tile's K tail; the check sees it."""
    tj = derive(make_spec(**BASE)).to_json()
    rng = np.random.default_rng(2)
    flat, (inner, outer, groups), (ld, ld_batch), _ = batched_memory(tj, "b", 4, np.random.default_rng(2), pad_rows=0)
    assert ld_batch == outer * ld  # groups back to back: a 2-D view of G K rows exists
    from ptxgen.model.layouts import tmamodel

    real = tmamodel.gather_3d

    def as_2d_view(memory, dims, strides, z, rows, cols):  # rows bounded by G K, not K
        return real(memory, (dims[0], dims[1] * dims[2] - z * dims[1], dims[2]), strides, z, rows, cols)

    mp = pytest.MonkeyPatch()
    mp.setattr(tmamodel, "gather_3d", as_2d_view)
    try:
        bad = check_operand_tma_3d(tj, "b", 4, rng)
    finally:
        mp.undo()
    assert bad and not any("batch 3 " in p for p in bad)  # the last group has no next group to leak from


def test_binding_takes_any_group_stride():
    spec = make_spec(**BASE)
    g, n, k = 5, 300, 136
    # stored G x K x N with N padded to 304 and a gap of 2 K rows between groups; viewed G x N x K
    b = _info("b", (g, n, k), ((k + 2) * 304, 1, 304))
    assert b_is_n_major(b)
    bd = bind_grouped(spec, _info("a", (700, k), (k, 1)), b, _info("offs", (g,), (1,), "s32", itemsize=4),
                      _info("out", (700, n), (304, 1)))
    assert bd.problem == GroupedProblem(700, n, k, g, k, 304, 304, (k + 2) * 304)
    plan = plan_kernel(spec)
    assert grouped_problem_errors(plan, bd.problem) == []
    assert any("overlap" in e for e in grouped_problem_errors(plan, GroupedProblem(700, n, k, g, k, 304, 304, k * 304 - 8)))
    with pytest.raises(ArgumentError, match="N-major"):
        bind_grouped(spec, _info("a", (700, k), (k, 1)), _info("b", (g, n, k), (n * k, k, 1)),
                     _info("offs", (g,), (1,), "s32", itemsize=4), None)
    with pytest.raises(ArgumentError, match="16-byte"):
        bind_grouped(spec, _info("a", (700, k), (k, 1)), _info("b", (g, n, k), (k * 302, 1, 302)),
                     _info("offs", (g,), (1,), "s32", itemsize=4), None)


def test_arguments_and_prepacked_block_carry_the_3d_map():
    plan = plan_kernel(make_spec(**BASE))
    p = GroupedProblem(700, 300, 136, 5, 136, 304, 304, 138 * 304)
    args = grouped_args(plan, 0x100000, 0x200000, 0x300000, 0x400000, p, encode=_encode_all).read_back()
    wb = _words(args[1])
    assert wb[:10] == [3, 0x200000, 300, 136, 5, 304 * 2, 138 * 304 * 2, 64, 8, 1]
    block, slots = build_grouped_params(plan, p, _encode_all)
    for name, ptr in (("a", 0x100000), ("b", 0x200000), ("d", 0x400000), ("offs", 0x300000)):
        slots[name].point(ptr)
    kinds = [q.kind for q in plan.abi.params]
    assert read_block(block.address, kinds) == [v if isinstance(v, bytes) else int(v) for v in args]


def test_fp8_n_major_is_refused_with_the_fix():
    from ptxgen.isa.types import SpecError

    with pytest.raises(SpecError):
        grouped_spec("e4m3", b_major="mn")


@pytest.mark.parametrize("small", [False, True])
def test_n_major_grouped_kernels_compile_with_the_intended_sass(small, tmp_path):
    import ptxgen
    from ptxgen.runtime.compile.sass import check_sass

    k = ptxgen.compile(grouped_spec("bf16", small=small, b_major="mn"), cache=tmp_path)
    assert "cp.async.bulk.tensor.3d" in k.ptx
    rep = check_sass(k.spec, k.cubin)
    assert rep.ok, rep.problems
    assert rep.local_bytes == 0


# ---- GPU: against per-group torch matmuls ----------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("sizes", [[0, 1, 130, 7, 0, 257, 128, 0, 3], [900, 0, 1100, 0]])
def test_gpu_n_major_b_with_empty_groups(gpu, sizes):
    import ptxgen

    torch = pytest.importorskip("torch")
    gen = torch.Generator(device="cuda").manual_seed(len(sizes))
    n, k = 200, 136  # K with a partial K-tile: the tail must read zeros, not the next group's K rows
    g = len(sizes)
    m = sum(sizes) + 5
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=gen)
    stored = torch.randn(g, k + 3, n, device="cuda", dtype=torch.bfloat16, generator=gen)  # G x K x N, a gap between groups
    b = stored[:, :k, :].transpose(1, 2)  # G x N x K, stride 1 along N
    assert b.stride(1) == 1 and b.stride(0) == (k + 3) * n
    offs_list = [int(x) for x in np.cumsum(sizes)]
    offs = torch.tensor(offs_list, device="cuda", dtype=torch.int32)
    out = torch.full((m, n), 7.0, device="cuda", dtype=torch.bfloat16)
    assert ptxgen.grouped_gemm(a, b, offs, out) is out
    torch.cuda.synchronize()
    start = 0
    for gi, end in enumerate(offs_list):
        if end > start:
            ref = a[start:end].float() @ b[gi].float().t()
            torch.testing.assert_close(out[start:end].float(), ref, rtol=1e-2, atol=1e-2)
        start = end
    assert bool((out[start:].float() == 7.0).all())
    # the N-major kernel ran (not a packed K-major copy)
    from ptxgen import grouped

    # the spec cache's keys: (a's dtype, b's dtype, out dtype, small groups, b's majorness, arch)
    assert any(key[0] == "bf16" and key[4] == "mn" for key in grouped._SPECS if len(key) == 6)
