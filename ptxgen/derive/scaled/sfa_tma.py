"""--fp8-scale-load tma: a block-scaled FP8 stage's A scales by TMA (DeepGEMM's sm90 1D2D way), derived.

torch's ``scale_a`` for the recipe (derive.scaled.blockfp8) is f32, logical M x Kb (Kb = ceil(K / 128)), outer-dim-major:
element (m, kb) at ``kb x lds_a + m``. Seen as a 2-D tensor it has dimension 0 (inner, contiguous) M and dimension 1
Kb, rows ``lds_a x 4`` bytes apart. One box of BM x 1 elements at coordinates (m0, kb) is tile rows m0 .. m0 + BM - 1
of K block kb, written densely (no swizzle): row r at byte ``r x 4`` of the box's destination, which is exactly the
stage's sfa slot layout of ``--fp8-scale-load smem`` (BlockFp8Plan.sfa_slot: rows in order, one f32 each), so the
consumers' reads are unchanged. Rows past M are outside dimension 0 and land as zeros (the recipe's zero past M;
the padding between M and lds_a is never read). The copy completes on full[s] through the TMA thread's
``arrive.expect_tx`` (BM x 4 more bytes a stage).

What TMA needs (cuTensorMapEncodeTiled; isa.tensormap): the global address 16-byte aligned and ``lds_a x 4`` a
multiple of 16 B, i.e. lds_a a multiple of 4 (M % 4 == 0 in torch's layout, lds_a = M). The spec cannot know M: the
launcher refuses a scale_a that breaks it (ptxgen.api.fp8blocks), and ``--fp8-scale-load smem`` takes any M.

The scale warp keeps the 1-2 B scales of a stage: its lane 0 waits empty[s], loads and stores them and arrives on
full[s] (SCALE_LANES), so full[s] counts 1 + 1 arrivals instead of 1 + 32.

>>> p = plan_sfa_tma(128)
>>> p.box, p.global_dims, p.ld_name, p.expect_tx_bytes, p.swizzle.json_name
((128, 1), ('M', 'Kb'), 'lds_a', 512, 'none')
>>> sfa_copy_origin(m0=256, kb=3)
(256, 3)
"""

from __future__ import annotations

from ...isa.tensormap import DRIVER_REF, GLOBAL_STRIDE_ALIGN, MAX_BOX_ELEMENTS, TmaDataType, TmaSwizzle
from ...isa.types import Cluster, Consumers, Grouping, SpecError
from .blockfp8 import SF_BYTES
from ..tile.derived import Derived
from ..operands.tma import CopyGrid, TmaCopy, TmaPlan, tile_map

FLAG = "--fp8-scale-load"
SCALE_LANES = 1  # lanes of the scale warp that still stage scales and arrive on full[s]: lane 0, the B scales
SFA_GLOBAL_DIMS = ("M", "Kb")  # dimension 0 (contiguous) M, dimension 1 the K blocks
SFA_LD_NAME = "lds_a"
SFA_LD_ALIGN_ELEMENTS = GLOBAL_STRIDE_ALIGN // SF_BYTES  # lds_a x 4 B a multiple of 16 B: lds_a a multiple of 4


def sfa_copy_origin(m0: int, kb: int) -> tuple[int, int]:
    """(inner, outer) coordinates of the stage's one box: tile row m0 along M, K block kb along Kb."""
    return (m0, kb)


def plan_sfa_tma(bm: int) -> TmaPlan:
    """The A-scale tensor map of a BM-row tile: box (BM, 1), f32, no swizzle, one copy at the slot's start."""
    if not 1 <= bm <= MAX_BOX_ELEMENTS or bm * SF_BYTES % GLOBAL_STRIDE_ALIGN:
        raise SpecError("--bm", bm, f"one TMA box of BM f32 scales: BM <= {MAX_BOX_ELEMENTS}, BM x {SF_BYTES} B a multiple of "
                        f"{GLOBAL_STRIDE_ALIGN} B", "64, 128, 192, 256")
    D = (Derived("sfa_box", f"{bm} x 1", f"(BM, 1) f32 at (m0, kb) of scale_a seen as dims (M, Kb), stride lds_a x {SF_BYTES} B",
                 "a K block's A scales of the tile's rows are contiguous in torch's outer-dim-major scale_a; the box "
                 f"lands them densely, row r at byte r x {SF_BYTES}: the sfa slot's rows-in-order layout; rows past M read zero",
                 DRIVER_REF),
         Derived("sfa_alignment", f"lds_a % {SFA_LD_ALIGN_ELEMENTS} == 0, scale_a 16-byte aligned",
                 f"globalStrides[0] = lds_a x {SF_BYTES} B a multiple of {GLOBAL_STRIDE_ALIGN} B; globalAddress 16-byte aligned",
                 "cuTensorMapEncodeTiled's rules; torch's layout has lds_a = M, so M % 4 == 0 (checked at launch: "
                 "ptxgen.api.fp8blocks refuses others; --fp8-scale-load smem takes any M)", DRIVER_REF))
    return tile_map(operand="sfa", layout=None, data_type=TmaDataType.FLOAT32, element_bytes=SF_BYTES,
                    global_dims=SFA_GLOBAL_DIMS, ld_name=SFA_LD_NAME, box=(bm, 1), swizzle=TmaSwizzle.NONE,
                    copies=(TmaCopy(0, 0, 0),), grid=CopyGrid(1, 1, 0, 0, 0, 0), expect_tx_bytes=bm * SF_BYTES,
                    derivation=D)

def check_sfa_tma(t) -> None:
    """The spec rules of --fp8-scale-load tma (``t``: a TileSpec; raises SpecError). What it is built for: the dense
    cooperative kernel with TMA loads, one CTA a tile, whole-K tiles (the smem mode's kernel without its cluster and
    stream-K variants, which are not built with the TMA copy yet)."""
    if t.fp8_blocks.value == "none":
        return
    if t.grouped is not Grouping.NONE or t.consumers is not Consumers.COOPERATIVE:
        raise SpecError(FLAG, "tma", "the scale warp and the TMA thread walk the dense cooperative kernel's tiles (not built "
                        "for grouped or ping-pong kernels)", "ahead or block")
    if t.cluster is not Cluster.C1X1 or t.split_k > 1:
        raise SpecError(FLAG, "tma", "the A scales' TMA copy is built for one CTA a tile (not with --cluster or "
                        "--split-k yet)", "smem, or --cluster 1x1 --split-k 1")
