"""Issue 37, F1: every CTA-pair kernel arrives at a cluster barrier, and waits on it, before the pair's
``tcgen05.alloc.cta_group::2``, checked on the PTX NVRTC gives (L2, on the CPU).

Sources: PTX ISA 'tcgen05.alloc' (with .cta_group::2 one warp of each CTA of the pair allocates together);
CUTLASS include/cutlass/gemm/kernel/sm100_gemm_tma_warpspecialized.hpp (``pipeline_init_arrive_relaxed`` ...
``pipeline_init_wait`` before the MMA warp's ``tmem_allocator.allocate``); DeepGEMM
deep_gemm/include/deep_gemm/impls/sm100_bf16_gemm.cuh at 54e2261 ("Synchronize the cluster before 2-CTA TMEM
allocation": ``comm::cluster_sync_with_relaxed_arrive()``, a ``barrier.cluster.arrive.relaxed`` and a wait).
"""

from __future__ import annotations

import pytest

from ptxgen.derive.tile.layout import derive
from ptxgen.derive.tile.spec import make_spec
from ptxgen.runtime.compile.ptxorder import pair_alloc_order_problems
from ptxgen.sweep import load_grid


def _kind(t) -> tuple:
    return (t.scale.value if t.block_scaled else t.dtype.kind, t.bm, t.schedule.value, t.epilogue.value)


def _pair_kinds() -> dict:
    """One ci-grid configuration per pair kernel kind: the MMA kind (block-scaled kinds by their scale type), the
    pair's M (data-path Layout A or B), the schedule and the epilogue."""
    kinds: dict = {}
    for t in list(load_grid("ci").specs):
        if t.pair:
            kinds.setdefault(_kind(t), t)
    return kinds


KINDS = _pair_kinds()
QUICK = {("f16", 256, "tile", "direct"), ("f16", 128, "persistent", "direct"), ("ue4m3", 256, "tile", "tma")}


def test_the_kinds_span_the_pair_space():
    ks = set(KINDS)
    assert {k[0] for k in ks} >= {"f16", "f8f6f4", "tf32", "ue8m0", "ue4m3"}  # dense kinds and both scale types
    assert {k[1] for k in ks} == {128, 256} and {k[2] for k in ks} == {"tile", "persistent"}
    assert {k[3] for k in ks} == {"direct", "tma"} and QUICK <= ks


# three kinds in the default tier, every kind in the slow one (NVRTC compiles)
@pytest.mark.parametrize("key", [pytest.param(k, marks=() if k in QUICK else pytest.mark.slow) for k in sorted(KINDS)],
                         ids=lambda k: "-".join(map(str, k)))
def test_every_pair_kind_syncs_the_cluster_before_it_allocates(key):
    from ptxgen.runtime.compile.artifacts import generate

    art = generate(KINDS[key])
    ptx = art.files["kernel.ptx"]
    assert pair_alloc_order_problems(ptx) == []
    assert art.sass.ok, art.sass.problems  # generate() runs the same order check after the SASS check
    assert ptx.count("tcgen05.alloc.cta_group::2") == 1
    # the first arrive is the relaxed one, then the release/acquire one after the barriers are initialised
    lines = [ln.strip() for ln in ptx.splitlines() if ln.strip().startswith("barrier.cluster.")]
    assert lines[:2] == ["barrier.cluster.arrive.relaxed.aligned;", "barrier.cluster.wait.aligned;"], lines


def _old_order_ptx(spec) -> str:
    """The kernel as ptxgen rendered it before issue 37: the same source without the relaxed cluster barrier."""
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.cache import compile_cached

    cu = render_kernel(derive(spec))
    call = [ln for ln in cu.splitlines() if ln.strip().startswith("cluster_sync_relaxed();")]
    assert len(call) == 1, call
    old = cu.replace(call[0] + "\n", "")
    ptx = compile_cached(old, spec.kernel_name, spec.arch.value).compiled.ptx
    return ptx if isinstance(ptx, str) else ptx.decode()


@pytest.mark.parametrize("key", [("f16", 256, "tile", "direct"), ("ue4m3", 256, "tile", "tma")], ids=["dense", "nvfp4"])
def test_control_the_old_order_fails_the_check(key):
    problems = pair_alloc_order_problems(_old_order_ptx(KINDS[key]))
    assert len(problems) == 1 and "before any barrier.cluster.arrive" in problems[0], problems


ALLOC = "\ttcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%r1], 256;"


@pytest.mark.parametrize("text,words", [
    ("\tbarrier.cluster.arrive.relaxed.aligned;\n" + ALLOC + "\n\tbarrier.cluster.wait.aligned;", "no barrier.cluster.wait"),
    (ALLOC + "\n\tbarrier.cluster.arrive.aligned;\n\tbarrier.cluster.wait.aligned;", "the first is at line 2"),
    ("\tbarrier.cluster.arrive.aligned;\n\tbarrier.cluster.wait.aligned;", "no tcgen05.alloc.cta_group::2"),
    (ALLOC, "none in the kernel"),
])
def test_control_the_checker_names_what_is_out_of_order(text, words):
    problems = pair_alloc_order_problems(text)
    assert len(problems) == 1 and words in problems[0], problems
    assert pair_alloc_order_problems("\tbarrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;\n" + ALLOC) == []


def test_single_cta_kernels_are_unchanged():
    from ptxgen.emit.render import render_kernel

    for kw in (dict(bm=128, bn=128, bk=32, a="kmajor-sw64"),
               dict(bm=128, bn=256, bk=256, a="kmajor-sw128", b="kmajor-sw128", dtype="e2m1", scale="ue4m3", stages=3)):
        cu = render_kernel(derive(make_spec(**kw)))
        assert "cluster_sync_relaxed" not in cu and "barrier.cluster" not in cu
