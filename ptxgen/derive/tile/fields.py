"""The spec's field table: every tile-spec field declared once.

Each :class:`SpecField` carries its CLI flag, JSON key, default, parser, help text and whether the CLI and
``to_json`` leave it out at its default. The CLI's flags, ``make_spec``, ``TileSpec.to_json``/``from_json``,
``cli_args``, the kernel name and the sweep grids' fields are all built from :data:`FIELDS`.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Callable

from ...isa.epiops import Fp8Blocks, Fp8Overlap, Fp8ScaleLoad, Fp8Stagger
from ...isa.types import Arch, Batch, Cluster, Consumers, DMajor, DType, Epilogue, EpilogueOrder, Grouping, Loader, Scale, Schedule, SpecError, parse_enum


# What an unknown value's message lists as legal where the enum holds more than the field takes.
_INPUTS = "f16, bf16, tf32, e4m3, e5m2, s8, u8, e2m3, e3m2, e2m1 (the last three with --scale)"
LEGAL_WORDS = {"dtype": _INPUTS, "b_dtype": _INPUTS, "acc": "f32, f16, s32", "out_dtype": "f32, f16, bf16, s32"}


def _int(flag: str) -> Callable[[Any], int]:
    def parse(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, (int, str)) and not hasattr(v, "__index__"):
            raise SpecError(flag, v, "must be an integer", "an integer")
        try:
            return int(v) if isinstance(v, str) else operator.index(v)  # numpy integers too
        except ValueError:
            raise SpecError(flag, v, "must be an integer", "an integer") from None

    return parse


@dataclass(frozen=True)
class SpecField:
    """One field of a tile spec: everything every layer needs to know about it, in one place."""

    name: str  # TileSpec attribute, make_spec keyword, layout.json / grid key
    flag: str  # CLI flag
    help: str
    default: Any = None  # the CLI/make_spec default as the user writes it; None with required=True
    required: bool = False
    is_int: bool = False
    enum: type | None = None  # parsed with parse_enum into this Enum
    choices: tuple[str, ...] | None = None  # CLI choices (shown in --help)
    omit_when_default: bool = False  # cli_args leaves the flag out when the value is the default
    json_omit_when_default: bool = False  # to_json leaves the key out too (specs and layout.json from before the field)

    def dump(self, spec: "TileSpec") -> Any:
        """The JSON / CLI form of the value."""
        if self.name in ("a", "b"):
            return spec.operand(self.name).token
        if self.name in ("a_order", "b_order"):
            return spec.operand(self.name[0]).order.value
        if self.name == "fuse":
            return None if spec.fuse is None else spec.fuse.token
        v = getattr(spec, self.name)
        return v.value if hasattr(v, "value") else v

    def parse(self, raw: Any) -> Any:
        """The user's value (a CLI string, a JSON value or a Python int) as this field's type; None stays None."""
        if raw is None:
            return None
        if self.is_int:
            return _int(self.flag)(raw)
        if self.enum is not None:
            return parse_enum(self.enum, _text(self.flag, raw), self.flag, LEGAL_WORDS.get(self.name))
        return _text(self.flag, raw)

    def default_value(self, spec: "TileSpec") -> Any:
        if self.name == "out_dtype":
            return spec.acc.value
        if self.name == "b_dtype":
            return spec.dtype.value
        return self.default


def _choice(name: str, flag: str, help: str, enum: type, *, default: str, json_omit: bool = True) -> SpecField:
    """A field added after the first specs whose value is one of ``enum``'s (its CLI choices, in the enum's order): left
    out of cli_args at its default, and out of to_json too unless ``json_omit`` is False."""
    return SpecField(name, flag, help, default=default, enum=enum, choices=tuple(e.value for e in enum),
                     omit_when_default=True, json_omit_when_default=json_omit)


def _count(name: str, flag: str, help: str, *, default: int, json_omit: bool = True) -> SpecField:
    """An integer field added after the first specs, left out of cli_args at its default (and of to_json, unless
    ``json_omit`` is False)."""
    return SpecField(name, flag, help, default=default, is_int=True, omit_when_default=True,
                     json_omit_when_default=json_omit)


FIELDS: tuple[SpecField, ...] = (
    SpecField("bm", "--bm", "tile M (rows of A and D)", required=True, is_int=True),
    SpecField("bn", "--bn", "tile N (rows of B, columns of D)", required=True, is_int=True),
    SpecField("bk", "--bk", "tile K per pipeline stage", required=True, is_int=True),
    SpecField("a", "--a", "A operand: <kmajor|mnmajor>-<none|sw32|sw64|sw128|sw128b32>", required=True),
    SpecField("b", "--b", "B operand token (default mnmajor-sw128)", default="mnmajor-sw128"),
    SpecField("a_order", "--a-order", "A atom order (default: A's major dimension)", choices=("mn", "k")),
    SpecField("b_order", "--b-order", "B atom order (default: B's major dimension)", choices=("mn", "k")),
    SpecField("dtype", "--dtype", "input type: f16 bf16 tf32 e4m3 e5m2 s8 u8, or e2m3 e3m2 e2m1 with --scale (default f16)", default="f16", enum=DType),
    SpecField(
        "b_dtype",
        "--b-dtype",
        "B's input type (default: --dtype); may differ only within e4m3/e5m2 or within s8/u8, or with --scale ue8m0 "
        "among e4m3 e5m2 e2m3 e3m2 e2m1 (kind::mxf8f6f4)",
        enum=DType,
        omit_when_default=True,
        json_omit_when_default=True,
    ),
    _choice(
        "scale",
        "--scale",
        "block scaling (tcgen05 only): ue8m0 (MX: one power-of-two scale per 32 elements; --dtype e4m3/e5m2/e2m3/e3m2, "
        "or mixed A/B types -> kind::mxf8f6f4, e2m1 -> kind::mxf4) or ue4m3 (NVFP4: one per 16; --dtype e2m1 -> "
        "kind::mxf4nvf4) (default none)",
        Scale,
        default="none",
    ),
    SpecField("acc", "--acc", "accumulator: f32 f16 s32 (default f32)", default="f32", enum=DType),
    SpecField("arch", "--arch", "sm_100a (tcgen05) or sm_90a (wgmma)", default="sm_100a", enum=Arch),
    SpecField("stages", "--stages", "shared-memory pipeline stages (default 2)", default=2, is_int=True),
    SpecField("out_dtype", "--out-dtype", "output type (default: the accumulator's)", enum=DType, omit_when_default=True),
    _count(
        "smem_offset",
        "--smem-offset",
        "start the operand rings BYTES (a multiple of 128) past the aligned base: swizzle patterns off their boundary",
        default=0, json_omit=False,
    ),
    _choice(
        "loader",
        "--loader",
        "how K-tiles reach shared memory: tma (one elected thread, cp.async.bulk.tensor) or cp.async (a producer "
        "warpgroup, 16 B a thread) (default tma)",
        Loader,
        default="tma", json_omit=False,
    ),
    _count(
        "copy_bytes",
        "--copy-bytes",
        "cp.async loader: bytes per copy, 16 (cp.async.cg), 8 or 4 (cp.async.ca, each 16-byte cell in pieces): the "
        "operands' global rows need only start that many bytes aligned (default 16)",
        default=16,
    ),
    _choice(
        "schedule",
        "--schedule",
        "tile: one CTA per output tile; persistent: one CTA per SM looping over tiles, loads of the next tile "
        "overlapping the epilogue (default tile)",
        Schedule,
        default="tile", json_omit=False,
    ),
    _choice(
        "consumers",
        "--consumers",
        "wgmma: cooperative (the consumer warpgroups split each tile's rows) or pingpong (two consumer warpgroups "
        "take alternate tiles, so one's epilogue overlaps the other's MMAs; needs --schedule persistent) (default cooperative)",
        Consumers,
        default="cooperative", json_omit=False,
    ),
    _count(
        "cta_group",
        "--cta-group",
        "tcgen05 (sm_100a): 1, one CTA per MMA; 2, a CTA pair (cluster of 2) issues tcgen05.mma.cta_group::2 with "
        "M = BM = 128 or 256 over the pair, each CTA holding BM/2 rows of A and BN/2 rows of B (default 1)",
        default=1,
    ),
    _count(
        "raster_group",
        "--raster-group",
        "visit output tiles in groups of this many tile rows, column by column inside a group, so that the A and B "
        "tiles in flight stay in L2 (default 8)",
        default=8, json_omit=False,
    ),
    _choice(
        "epilogue",
        "--epilogue",
        "direct: each thread stores its accumulator fragment to global memory; tma (16-bit output; sm_90a, or sm_100a "
        "with BM 128): "
        "registers -> swizzled shared memory (stmatrix) -> TMA bulk tensor store, overlapped with the next tile "
        "(default direct)",
        Epilogue,
        default="direct",
    ),
    _choice(
        "cluster",
        "--cluster",
        "thread-block cluster (CTAs along M x along N): 1x1 none; 2x1 two CTAs on neighbouring tile rows share B, "
        "each loads half of B's stage and multicasts it to both; 1x2 likewise share A (sm_90a, TMA) (default 1x1)",
        Cluster,
        default="1x1",
    ),
    _choice(
        "grouped",
        "--grouped",
        "none: one GEMM; offs: a grouped GEMM in torch._grouped_mm's layout (A stacked along M, int32 cumulative row ends "
        "read on the GPU, B of G x N x K), one persistent launch over every group's tiles (sm_90a, TMA, K-major A and B); "
        "offs_rowwise: the same for FP8 with torch._scaled_grouped_mm's f32 scales, one per row of A and one per group "
        "and column of D; offs with --fp8-blocks 1x128x128: DeepSeek block scales, scale_b one block array per group; "
        "offs_k: groups along K (torch._grouped_mm's 2-D x 2-D form, a M x K_total, b N x K_total, out G x M x N; K-major "
        "or MN-major operands, 16-bit inputs, direct stores; derive.roles.kgrouped); offs_k_rowwise: the same for FP8 "
        "(K-major a and b) with torch._scaled_grouped_mm's 2-D x 2-D f32 scales, scale_a[g M + row] and scale_b[g N + "
        "column] on the f32 accumulator (default none)",
        Grouping,
        default="none",
    ),
    _choice(
        "batch",
        "--batch",
        "none: one GEMM; a: A is B x M x K (a 3-D tensor map over K, M, batch) and B one N x K matrix shared by every "
        "batch; ab: B is B x N x K too. One launch walks every batch's tiles; D is B x M x N (TMA loader, direct "
        "epilogue, no cluster, CTA pair, split-K, grouping or fused chain) (default none)",
        Batch,
        default="none",
    ),
    _choice(
        "fp8_blocks",
        "--fp8-blocks",
        "block-scaled FP8 on wgmma: none, 1x128x128 (DeepSeek: an f32 scale per row per 128 of K for A, per 128 x 128 "
        "block for B, partial sums promoted to f32 every 128 of K), or 1x128x1x128 (DeepGEMM's 1D1D, the weight-gradient "
        "recipe: an f32 scale per row per 128 of K for A and for B; with --fuse c and an f32 output D = C + A.B) "
        "(default none)",
        Fp8Blocks,
        default="none",
    ),
    _choice(
        "fp8_stagger",
        "--fp8-stagger",
        "block-scaled FP8 with two consumer warpgroups: none (each issues a K block's MMAs as soon as it lands), issue "
        "(warpgroup 1 issues block kt after warpgroup 0 has, warpgroup 0 issues kt + 1 after warpgroup 1 has issued kt), "
        "complete (warpgroup 1 issues block kt once warpgroup 0's MMAs of kt are complete) or half (each warpgroup commits "
        "a block's MMAs as two halves; warpgroup 1 issues kt once warpgroup 0's first half of kt is complete, warpgroup 0 "
        "issues kt + 1 once warpgroup 1's first half of kt is), so that one warpgroup promotes while the other's MMAs run "
        "(default none)",
        Fp8Stagger,
        default="none",
    ),
    _choice(
        "fp8_overlap",
        "--fp8-overlap",
        "block-scaled FP8: none (a K block's MMAs into one partial, wait_group 0, promote) or halves (each column half "
        "of the tile into its own partial and commit group; one half is promoted while the other's MMAs run, wait_group "
        "1) or interleave (the two column halves' MMAs alternated per K-step into two partials, one commit group, wait_group "
        "0, promote both; combines with --fp8-stagger) (default none)",
        Fp8Overlap,
        default="none",
    ),
    _choice(
        "fp8_scale_load",
        "--fp8-scale-load",
        "block-scaled FP8: how a K block's scales reach the consumers: block (each thread loads them from global memory "
        "in that K block, before its MMAs), ahead (one K block ahead, into registers carried across the loop) or smem "
        "(a producer warp stages them in shared memory with the K block's stage; ld.shared after it lands), tma (as smem, "
        "the A scales by one TMA box per stage; needs M a multiple of 4), cpasync (as smem, the producer warp's lanes copy "
        "with cp.async and never wait for a load) or auto (smem "
        "for dense cooperative kernels, else block; measured fastest, docs/block-fp8.md) (default auto)",
        Fp8ScaleLoad,
        default="auto",
    ),
    SpecField(
        "fuse",
        "--fuse",
        "fused epilogue steps, comma-separated, run in this order: alpha, c (+ beta x C), bias=col|row[:f32|bf16|f16], "
        "aux (writes the pre-activation to AUX), act=relu|gelu_tanh|gelu_erf|silu or dact=... (y x act'(AUX), the backward "
        "step), residual, scale=tensor|row (FP8 e4m3 output, writes amax) (default none)",
        omit_when_default=True,
        json_omit_when_default=True,
    ),
    _choice(
        "d_major",
        "--d-major",
        "where D's elements go: n, row-major (element (i, j) of the kernel's M x N result at i x ldd + j); m, "
        "M-major/column-major (at j x ldd + i, each element its own store), so that a kernel computing D^T = B A^T "
        "(swap-AB) writes a row-major D. m: sm_90a, the direct epilogue or (16-bit outputs) the TMA store through "
        "stmatrix.trans, plain output (no --fuse, split-K, batch, grouping or block FP8) (default n)",
        DMajor,
        default="n",
    ),
    _count(
        "split_k",
        "--split-k",
        "split-K (sm_90a, --schedule tile): S CTAs per output tile, each multiplying its own run of whole K-tiles "
        "into an f32 partial tile of a workspace; a second generated kernel sums the S partials in a fixed order "
        "(deterministic) and writes D (default 1: no split)",
        default=1,
    ),
    _choice(
        "epilogue_order",
        "--epilogue-order",
        "none: each consumer warpgroup runs its epilogue as soon as its MMAs of a tile are complete; alternate: round-robin "
        "(warpgroup w starts its epilogue of a tile after warpgroup w - 1 finished its own, warpgroup 0 its next one after "
        "the last warpgroup finished this one), so one warpgroup's epilogue runs while another's MMAs keep the tensor cores "
        "busy; alternate-uniform: the same order with no branch on the warpgroup in the tile loop (the last warpgroup "
        "arrives once before its first tile, every warpgroup then waits on its own barrier before each epilogue) (sm_90a persistent cooperative kernels of 2 to 4 consumer warpgroups; not with --cluster, --stream-k, "
        "--grouped, --batch or --fp8-blocks; ptxgen.derive.roles.epiorder) (default none)",
        EpilogueOrder,
        default="none",
    ),
    _count(
        "stream_k",
        "--stream-k",
        "stream-K for the last wave (sm_90a, --schedule persistent, cooperative): the tiles of the last, partial round "
        "are split along K into at most S parts on the otherwise idle CTAs; split 0 sums the f32 partials of the others "
        "from a workspace in a fixed order (deterministic) and stores D (default 1: no split)",
        default=1,
    ),
    _count(
        "consumer_slabs",
        "--consumer-slabs",
        "64-row slabs per cooperative wgmma consumer warpgroup (BM = 64 x warpgroups x N): N > 1 gives each warpgroup "
        "N accumulators and one partial fragment its slabs share (block-scaled FP8 with --fp8-scale-load smem, cpasync or tma, "
        "at least two consumer warpgroups: --bm 256 --consumer-slabs 2; ptxgen.derive.scaled.bfp8slabs) (default 1)",
        default=1,
    ),
    _count(
        "promote",
        "--promote",
        "promoted accumulation (sm_90a, tf32 inputs, f32 accumulator; ptxgen.derive.tile.rules_promote): G = 1, 2 or 4, "
        "the MMAs of each G K-tiles into a fresh partial fragment (scale-d 0 at the first K-step) added to the f32 "
        "accumulator with an ordinary f32 add (round to nearest), as block-FP8 kernels promote; 3xTF32 calls run 4 "
        "(default 0: none)",
        default=0,
    ),
)
FIELD_BY_NAME = {f.name: f for f in FIELDS}


def _text(flag: str, raw: Any) -> str:
    if not isinstance(raw, str):
        raise SpecError(flag, raw, "must be a string", "see --help")
    return raw

