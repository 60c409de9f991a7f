"""The row pitch of the operands: whether rows start off a 32-byte sector or mid-line, and the 2x1-cluster variant a
persistent cooperative kernel takes there (``+off-sector``)."""

from __future__ import annotations

import dataclasses

from ...derive.tile.spec import TileSpec
from ...isa.tensormap import L2_SECTOR_BYTES
from ...isa.types import Cluster, Consumers, Schedule, SpecError
from .choice import Choice


def pitch_note(k: int, element_bytes: int, lda: int | None, ldb: int | None) -> str:
    rows = [("A", (lda or k) * element_bytes), ("B", (ldb or k) * element_bytes)]
    off = [f"{name} rows {b % 128} B past a 128-byte line" for name, b in rows if b % L2_SECTOR_BYTES]
    return f"; {', '.join(off)}: 128-byte L2 promotion" if off else ""


def mid_line(k: int, element_bytes: int, lda: int | None, ldb: int | None) -> bool:
    """Whether A's or B's rows start on a 32-byte sector but not on a 128-byte line (32, 64 or 96 B past one). The e4m3
    cost table was calibrated at phases 0, 16 and 112 only; at 2512 x 10000 x 4000 (4000-byte rows: 32 B past a line) its
    ping-pong pick ran 17-21% over the prediction and took 3% longer than nearest-fit's tile in the same process, in both
    (runs/2026-12-01-fp8-shapes, runs 1 and 2)."""
    return any(b % 128 and not b % L2_SECTOR_BYTES for b in ((lda or k) * element_bytes, (ldb or k) * element_bytes))


def off_sector_variant(spec: TileSpec) -> TileSpec | None:
    """For operand rows off a 32-byte sector: the same persistent cooperative kernel in a 2-CTA cluster along M that
    multicasts B, halving B's L2 reads (ncu, run 25: at the 16-byte phase the kernel is L2-bound, 75% of the L2's
    peak, with 2.4 x the L2 work of phase 0). None where the spec has no such variant."""
    if spec.arch.value != "sm_90a" or spec.schedule is not Schedule.PERSISTENT or spec.consumers is not Consumers.COOPERATIVE:
        return None
    try:
        return dataclasses.replace(spec, cluster=Cluster.C2X1)
    except SpecError:
        return None


def with_pitch(c: Choice, off_sector: bool) -> Choice:
    if not off_sector:
        return c
    v = off_sector_variant(c.spec)
    if v is None:
        return c
    return Choice(v, c.why + "; with a 2x1 cluster multicasting B (rows off a 32-byte sector make the kernel L2-bound)",
                  c.chosen_by + "+off-sector")
