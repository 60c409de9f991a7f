"""The chooser's shared types (a leaf of the ``runtime.choose`` package): what it is asked (``Problem``, ``Device``), what
a rule returns (``Choice``) and the one-CTA-per-tile kernel family the narrow rules derive from the table's kernel."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ...derive.tile.spec import TileSpec
from ...isa.types import Cluster, Consumers, Epilogue, Schedule

SM_COUNT = 132  # the H200's multiprocessors: the shipped table is the H200's
SMALL_M_MAX = 128


@dataclass(frozen=True)
class Problem:
    """What the chooser is asked: a GEMM of K-major A (M x K) and B (N x K) on ``arch`` (``lda``/``ldb``: row pitch in
    elements, None: tight rows). ``allow_swap`` False: no swap-AB rule (callers that launch ``kernel(a, b, out)``)."""

    dtype: str
    arch: str
    m: int
    n: int
    k: int
    lda: int | None = None
    ldb: int | None = None
    allow_swap: bool = True


@dataclass(frozen=True)
class Device:
    """The key of a calibration: the device's name, SM count, clocks and memory (0: not known). Two boards of one name
    with other SM counts, clocks or memory (an H100 SXM against a PCIe one, a power-capped part) have other keys."""

    name: str
    sm_count: int
    clock_mhz: int = 0  # the SMs' peak clock
    memory_clock_mhz: int = 0
    memory_bus_bits: int = 0
    memory_gib: int = 0

    @property
    def slug(self) -> str:
        """The device's name as a file name: "NVIDIA H200" -> "h200", "NVIDIA H100 80GB HBM3" -> "h100-80gb-hbm3"."""
        words = self.name.lower().replace("nvidia", " ").split()
        return "-".join("".join(ch for ch in w if ch.isalnum()) for w in words if any(ch.isalnum() for ch in w)) or "gpu"

    @property
    def stem(self) -> str:
        """The file name of this key's calibration in the cache folder (no extension)."""
        return (f"{self.slug}-{self.sm_count}sm-{self.clock_mhz}mhz-{self.memory_clock_mhz}mhz-{self.memory_bus_bits}bit-"
                f"{self.memory_gib}gib")

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @staticmethod
    def from_json(d: dict) -> "Device":
        return Device(str(d["name"]), int(d["sm_count"]), *(int(d.get(f, 0)) for f in
                      ("clock_mhz", "memory_clock_mhz", "memory_bus_bits", "memory_gib")))


@dataclass(frozen=True)
class Choice:
    spec: TileSpec
    why: str
    chosen_by: str  # the rule: tuned | swap-ab | small-m | small-n | split-k | cost-model | cost-model+swap-ab | nearest-fit | default (+off-sector, +stream-k)
    # swap-ab: run the spec (D M-major) on the swapped problem: its A is the caller's b (N x K), its B the caller's a
    # (M x K), its M x N result the caller's D transposed (problem N x M x K, ldd = D's row pitch)
    swap_ab: bool = False


def narrow_spec(like: TileSpec, bm: int, bn: int, stages: int) -> TileSpec:
    """The table's kernel family (types, operand layouts, arch) with a ``bm`` x ``bn`` tile, one CTA per tile,
    direct stores (run 25 measured these for small M; the TMA-store variant was no better)."""
    return dataclasses.replace(like, bm=bm, bn=bn, stages=stages, schedule=Schedule.TILE, raster_group=8,
                               consumers=Consumers.COOPERATIVE, epilogue=Epilogue.DIRECT, cluster=Cluster.C1X1)
