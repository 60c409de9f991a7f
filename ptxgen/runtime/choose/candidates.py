"""The kernel families the cost model ranks (a leaf of the ``runtime.choose`` package): their tiles, schedules and
clusters, and the input family whose constants each input type uses."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ...derive.tile.spec import TileSpec, make_spec
from ...isa.types import DType, Epilogue, SpecError

COST_FAMILY = {"bf16": "16bit", "f16": "16bit", "e4m3": "e4m3"}  # input type -> the family whose constants it uses
STAGE_K_BYTES = 128  # bytes of K per pipeline stage (one 128-byte swizzle row): BK = STAGE_K_BYTES / element bytes


def stage_k(element_bytes: int) -> int:
    """BK in elements for inputs of ``element_bytes`` bytes: 64 for 16-bit inputs, 128 for 8-bit ones."""
    return STAGE_K_BYTES // element_bytes


def k_tiles(k: int, element_bytes: int = 2) -> int:
    """K-tiles of a K loop: ceil(K / BK); the tail costs a whole K-tile."""
    return -(-k // stage_k(element_bytes))


@dataclass(frozen=True)
class Candidate:
    """A kernel family the cost model chooses from (K-major A and B, 128-byte swizzle, 128 bytes of K per stage: BK = 64
    for 16-bit inputs, 128 for e4m3)."""

    name: str
    bm: int
    bn: int
    stages: int
    schedule: str = "persistent"  # persistent | tile
    consumers: str = "cooperative"  # cooperative | pingpong
    raster_group: int = 8
    epilogue: str = "tma"  # tma | direct
    cluster: str = "1x1"  # 1x1 | 2x1 (multicasts B to the two CTAs of a pair along M)
    narrow: bool = False  # a BM or BN = 64 tile, one CTA per tile, direct stores (the small-m / small-n kernels)

    def spec(self, dtype: str = "bf16", arch: str = "sm_90a") -> TileSpec:
        out = "f16" if dtype == "f16" else "bf16"  # e4m3: bf16 out, as the tuning table's FP8 kernels
        s = make_spec(bm=self.bm, bn=self.bn, bk=stage_k(DType(dtype).bytes), a="kmajor-sw128", b="kmajor-sw128", dtype=dtype, acc="f32",
                      out_dtype=out, arch=arch, stages=self.stages, schedule=self.schedule, raster_group=self.raster_group,
                      consumers=self.consumers, cluster=self.cluster)
        if self.epilogue == "tma":
            for stages in range(self.stages, 1, -1):  # the TMA-store staging takes room: one stage fewer if needed
                try:
                    return dataclasses.replace(s, epilogue=Epilogue.TMA, stages=stages)
                except SpecError:
                    continue
            raise SpecError("--epilogue", "tma", f"{self.name}: no stage count leaves room for the store staging", "direct")
        return s

    @property
    def cluster_m(self) -> int:
        return 2 if self.cluster == "2x1" else 1


# The shipped families: the tuning table's winners (ptxgen/tuning/h200.json), their 2x1 multicast variants, tiles
# whose BN is not a multiple of 64, and the narrow tiles of the small-m / small-n rules.
CANDIDATES = (
    Candidate("p128x256", 128, 256, 4),
    Candidate("p128x192", 128, 192, 4, raster_group=16),
    Candidate("p256x128", 256, 128, 4),
    Candidate("pp128x128", 128, 128, 5, consumers="pingpong", raster_group=16),
    Candidate("pp64x256", 64, 256, 4, consumers="pingpong", raster_group=16),
    Candidate("t128x256", 128, 256, 4, schedule="tile"),
    Candidate("t128x192", 128, 192, 4, schedule="tile"),
    Candidate("p128x256c2", 128, 256, 4, cluster="2x1"),
    Candidate("p128x192c2", 128, 192, 4, raster_group=16, cluster="2x1"),
    Candidate("p256x128c2", 256, 128, 4, cluster="2x1"),
    # BN not a multiple of 64 (direct stores: the TMA-store epilogue stages 64-column chunks), for wave counts the
    # 64-multiples miss: e.g. 2500 x 10000 takes 9 rounds of 128 x 192 tiles for 8.03 rounds of work, 7 of 128 x 224
    Candidate("p128x224", 128, 224, 4, raster_group=16, epilogue="direct"),
    Candidate("p128x160", 128, 160, 5, raster_group=16, epilogue="direct"),
    Candidate("pp64x224", 64, 224, 5, consumers="pingpong", raster_group=16, epilogue="direct"),
    Candidate("p128x224c2", 128, 224, 4, raster_group=16, epilogue="direct", cluster="2x1"),
    Candidate("p128x160c2", 128, 160, 5, raster_group=16, epilogue="direct", cluster="2x1"),
    Candidate("n64x128", 64, 128, 8, schedule="tile", epilogue="direct", narrow=True),
    Candidate("n128x64", 128, 64, 8, schedule="tile", epilogue="direct", narrow=True),
    Candidate("n64x64", 64, 64, 8, schedule="tile", epilogue="direct", narrow=True),
)
BY_NAME = {c.name: c for c in CANDIDATES}
