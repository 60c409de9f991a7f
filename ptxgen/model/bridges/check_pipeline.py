"""Bridge: runs a derived :class:`~ptxgen.derive.roles.pipeline.PipelinePlan` through the independent simulator
``pipesim`` (which imports nothing from ptxgen) for several K-tile counts and many schedules.

>>> from ptxgen.derive.tile.spec import make_spec
>>> check_spec(make_spec(bm=128, bn=128, bk=32, a="kmajor-sw64", arch="sm_90a", stages=3))
[]
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable, Sequence

from ..sim import pipesim
from ...derive.tile.kernel import plan_kernel
from ...derive.roles.pipeline import PipelinePlan
from ...derive.tile.spec import TileSpec
from ...isa.shapes import WARP_THREADS
from ...isa.types import Arch, Loader

DEFAULT_SEEDS = range(6)


def default_k_tiles(stages: int) -> tuple[int, ...]:
    """1, 2, S-1, S, S+1, 3S+2: the first round, the wrap-around and several full rounds of the ring."""
    return tuple(sorted({k for k in (1, 2, stages - 1, stages, stages + 1, 3 * stages + 2) if k >= 1}))


def default_tiles(plan: PipelinePlan) -> tuple[int, ...]:
    """CTA tile counts: 1 and 3; ping-pong 1, 2, 3, 5, so that each warpgroup gets odd and even tile counts
    (warpgroup 0 takes 1, 1, 2, 3 tiles, warpgroup 1 takes 0, 1, 1, 2)."""
    return (1, 2, 3, 5) if plan.pingpong else (1, 3)


def config_of(plan: PipelinePlan, k_tiles: int, copy_bytes: Sequence[int] = (), tiles_per_cta: int = 1,
              cluster_ctas: int = 1, mc_copy_bytes: Sequence[int] = (), sf_copy_bytes: Sequence[int] = ()) -> pipesim.Config:
    """The plan's numbers, as the simulator's plain config."""
    wgmma = plan.arch is Arch.SM90A
    tma = plan.loader is Loader.TMA
    return pipesim.Config(
        arch=plan.arch.value,
        loader=plan.loader.value,
        stages=plan.stages,
        k_tiles=k_tiles,
        full_arrivals=plan.full_arrivals,
        # a per-thread release runs as the model's per-warp one: each modelled warp's arrive stands for its 32 threads'
        empty_arrivals=plan.empty_arrivals // (WARP_THREADS if plan.release_per_thread else 1),
        producer_threads=1 if tma else plan.role("producer").threads,
        consumer_groups=plan.role("consumer").warps // 4 if wgmma else 1,
        producer_parity_flip=plan.producer_parity.flip,
        consumer_parity_flip=plan.consumer_parity.flip,
        expect_tx_bytes=plan.expect_tx_bytes,
        copy_bytes=tuple(copy_bytes),
        release_lag=plan.release_lag,
        acc_barrier=plan.acc_barrier,
        epilogue_warps=(plan.acc_empty_arrivals or 4) // plan.ctas,  # per CTA
        acc_empty_arrivals=plan.acc_empty_arrivals or None,
        tiles_per_cta=tiles_per_cta,
        pingpong=plan.pingpong,
        acc_stages=max(1, plan.acc_stages),
        ctas=plan.ctas,
        cluster_ctas=cluster_ctas,
        mc_copy_bytes=tuple(mc_copy_bytes),
        producer_tail=plan.producer_tail,
        sf_copy_bytes=tuple(sf_copy_bytes),
        peer_full_arrivals=plan.peer_full_arrivals,
        scale_lanes=plan.scale_warp_lanes,
        # the scale slots are read by each consumer warp: model the warps one by one (WARPS a warpgroup)
        consumer_warps=4 if plan.scale_warp_lanes and wgmma and not plan.pingpong else 1,
        release_per_warp=plan.release_per_thread,
    )


@lru_cache(maxsize=4096)
def _explore(cfg: pipesim.Config, seeds: tuple[int, ...]) -> pipesim.Result:
    return pipesim.explore(cfg, seeds)


def check_plan(plan: PipelinePlan, k_tiles_list: Iterable[int] | None = None, seeds: Iterable[int] = DEFAULT_SEEDS,
               copy_bytes: Sequence[int] = (), tiles_per_cta: Iterable[int] | None = None, cluster_ctas: int = 1,
               mc_copy_bytes: Sequence[int] = (), sf_copy_bytes: Sequence[int] = ()) -> list[str]:
    """Problems (and ``warning:`` lines) the simulator finds, each prefixed with its K-tile count; [] is clean.

    ``copy_bytes``: the bytes each TMA copy of one stage delivers (default: one copy of expect_tx_bytes).
    ``tiles_per_cta``: CTA tile counts to run (default :func:`default_tiles`).
    ``cluster_ctas`` > 1: a cluster of that many CTAs, each issuing ``copy_bytes`` to itself and
    ``mc_copy_bytes`` multicast to all (the simulator runs every CTA's ring).
    """
    ks = default_k_tiles(plan.stages) if k_tiles_list is None else tuple(k for k in k_tiles_list if k >= 1)
    out = []
    for tiles in default_tiles(plan) if tiles_per_cta is None else tiles_per_cta:  # every kernel loops over tiles (persistent CTAs take several)
        for k in ks:
            r = _explore(config_of(plan, k, copy_bytes, tiles, cluster_ctas, mc_copy_bytes, sf_copy_bytes), tuple(seeds))
            where = f"k_tiles={k}" + (f", tiles={tiles}" if tiles > 1 else "")
            out += [f"{where}: {p}" for p in r.problems]
            out += [f"{where}: warning: {w}" for w in r.warnings]
    return out


def tma_copy_bytes(spec: TileSpec) -> tuple[int, ...]:
    """What the TMA copies of one stage deliver, copy by copy (A's boxes, then B's); for a CTA pair, one CTA's;
    with a wgmma cluster, only the copies a CTA issues to itself (the operand it does not share)."""
    kp = plan_kernel(spec)
    t = kp.layout
    sfa = (kp.sfa_tma.box_bytes,) if kp.sfa_tma is not None else ()  # --fp8-scale-load tma: scale_a's box, on full[s] too
    return tuple(_delivered(op.tma) for op in (t.a, t.b) if op.tma.multicast is None for _ in op.tma.copies) + sfa


UNPACKED_BITS = {"16U4_ALIGN16B": 4, "16U6_ALIGN16B": 6}


def _delivered(tma) -> int:
    """The transaction bytes one copy of the map completes: its box's bytes, except for TMA's unpacking types
    (kind::mxf8f6f4's 6-/4-bit operands), whose copies count the packed global bytes (box elements x bits / 8;
    CUTLASS ABTmaTransactionBytes, sm100_blockscaled_mma_warpspecialized.hpp), not the padded cells they write."""
    dt = getattr(tma, "data_type", None)
    bits = UNPACKED_BITS.get(dt.cuda_name) if dt is not None else None
    return tma.box[0] * tma.box[1] * bits // 8 if bits else tma.box_bytes


def multicast_copy_bytes(spec: TileSpec) -> tuple[int, ...]:
    """A cluster: what each of a CTA's multicast copies of one stage delivers to every CTA."""
    t = plan_kernel(spec).layout
    return tuple(op.tma.box_bytes for op in (t.a, t.b) if op.tma.multicast is not None for _ in op.tma.multicast.copies)


def sf_copy_bytes(spec: TileSpec) -> tuple[int, ...]:
    """Block scaling: what each scale-factor cp.async.bulk of one stage delivers into a CTA's own stage (whole stages;
    a pair: one CTA's copies, the same in both)."""
    sc = plan_kernel(spec).layout.scales
    return () if sc is None else tuple(c.nbytes for op in (sc.a, sc.b) for c in op.copies)


def check_spec(spec: TileSpec, **kw) -> list[str]:
    """check_plan on the kernel's plan, with the bytes its TMA copies really deliver (and, with a cluster,
    every CTA of the cluster and the multicast copies; with block scaling, the scale-factor copies)."""
    plan = plan_kernel(spec).pipeline
    copies = tma_copy_bytes(spec) if spec.loader is Loader.TMA else ()
    if spec.block_scaled:
        kw = dict(kw, sf_copy_bytes=sf_copy_bytes(spec))
    if spec.cluster.size > 1:
        kw = dict(kw, cluster_ctas=spec.cluster.size, mc_copy_bytes=multicast_copy_bytes(spec))
    return check_plan(plan, copy_bytes=copies, **kw)
