"""The whole frozen plan of one kernel: layouts and descriptors, tensor maps, pipeline, ABI.

This is what the emit layer renders; it holds no C and does no rendering itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..isa.types import Loader
from .abi import KernelABI, kernel_abi
from .layout import TileLayout, derive
from .pipeline import PipelinePlan, plan_pipeline
from .schedule import SchedulePlan, plan_schedule
from .spec import TileSpec


@dataclass(frozen=True)
class KernelPlan:
    spec: TileSpec
    layout: TileLayout
    pipeline: PipelinePlan
    schedule: SchedulePlan
    abi: KernelABI


def plan_kernel(spec: TileSpec, layout: TileLayout | None = None) -> KernelPlan:
    t = layout or derive(spec)
    expect = t.a.tma.expect_tx_bytes + t.b.tma.expect_tx_bytes if spec.loader is Loader.TMA else 0
    if t.pair is not None:
        assert t.pair.cta_stage_bytes == expect, (t.pair.cta_stage_bytes, expect)
        expect = t.pair.expect_tx_bytes  # the leader's full barrier counts both CTAs' copies
    pipe = plan_pipeline(spec, expect)
    abi = kernel_abi(spec, pipe.threads, t.smem.dynamic_bytes)
    return KernelPlan(spec, t, pipe, plan_schedule(spec), abi)
