"""The tile DSL: what a user writes, checked against every PTX rule that applies when it is built.

This module holds the spec types (:class:`OperandSpec`, :class:`TileSpec` and the facts every layer asks of
them) and their parser, :func:`make_spec`. The fields are declared once in :mod:`ptxgen.derive.tile.fields`
(``FIELDS``: flag, JSON key, default, parser, help); the legality rules live in :mod:`ptxgen.derive.tile.rules`
(``validate``, which building a TileSpec calls).

>>> t = TileSpec(bm=128, bn=128, bk=32, a=OperandSpec.parse("kmajor-sw64"))
>>> t.b.token, t.b.order.value, t.arch.value, t.acc.value, t.loader.value
('mnmajor-sw128', 'mn', 'sm_100a', 'f32', 'tma')
>>> TileSpec(bm=128, bn=100, bk=32, a=OperandSpec.parse("kmajor-sw64"))
Traceback (most recent call last):
...
ptxgen.isa.types.SpecError: --bn=100 is illegal: tcgen05 kind::f16 N is 8..256 in steps of 8 (PTX ISA 9.7.16.2.1 'Matrix shape (tcgen05 .kind and shapes)' (#tcgen05-kind-shapes)). Legal: 8, 16, 24, ..., 248, 256
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...isa.blockscale import ScaledKind, kind_for, smem_container_bits, unpacked_in_smem
from ...isa.shapes import TCGEN05_EPILOGUE_WARPS, TMEM_WARP_LANES, WGMMA_D_ROWS, wgmma_accumulator_registers
from ...isa.types import (
    Arch,
    AtomOrder,
    Batch,
    Cluster,
    Consumers,
    DMajor,
    DType,
    Epilogue,
    EpilogueOrder,
    Grouping,
    Loader,
    Major,
    Scale,
    Schedule,
    SpecError,
    Swizzle,
    parse_enum,
)
from ...isa.epiops import Fp8Blocks, Fp8Overlap, Fp8ScaleLoad, Fp8Stagger
from .fields import FIELD_BY_NAME, FIELDS
from ..store.chainspec import ChainSpec, parse_chain
from .rules import STORE_BUFFERS, m_major_chunk_cols, validate
from ..scaled.blockfp8 import B_SCALE, SF_BYTES, sfb_stage_bytes
from ..scaled.sf_atoms import sf_stage_bytes, sf_tmem_columns_per_stage
from ..operands.smem import SmemPlan, plan_smem


@dataclass(frozen=True)
class OperandSpec:
    """How one operand sits in shared memory: majorness, swizzle, and the order of its atoms.

    ``order`` says along which logical dimension consecutive swizzle atoms (core matrices for
    ``none``) are adjacent; it defaults to the operand's own major dimension, which is the seed
    post's packing (its B: N atoms adjacent; its A at BK=64, SW64: two K atoms per 8-row band).

    >>> OperandSpec.parse("mnmajor-sw128").order
    <AtomOrder.MN: 'mn'>
    """

    major: Major
    swizzle: Swizzle
    order: AtomOrder | None = None

    def __post_init__(self):
        if self.order is None:
            object.__setattr__(self, "order", AtomOrder(self.major.value))

    @classmethod
    def parse(cls, token: str, order: str | None = None, field: str = "--a") -> "OperandSpec":
        """``<major>-<swizzle>``, e.g. ``kmajor-sw64``, ``mnmajor-sw128``, ``kmajor-none``."""
        majors = {"kmajor": Major.K, "mnmajor": Major.MN}
        legal = "<kmajor|mnmajor>-<none|sw32|sw64|sw128|sw128b32>"
        parts = token.split("-")
        if len(parts) != 2 or parts[0] not in majors:
            raise SpecError(field, token, "an operand token is <major>-<swizzle>", legal)
        try:
            swz = parse_enum(Swizzle, parts[1], field)
        except SpecError:
            raise SpecError(field, token, f"unknown swizzle {parts[1]!r}", legal) from None
        ordr = parse_enum(AtomOrder, order, field + "-order") if order is not None else None
        return cls(majors[parts[0]], swz, ordr)

    @property
    def token(self) -> str:
        return f"{self.major.token}-{self.swizzle.value}"


@dataclass(frozen=True)
class TileSpec:
    """One CTA tile of D[BM, BN] = A[BM, K] * B[BN, K]^T, and how its operands are staged and loaded.

    A is logically M x K and B is N x K; majorness says which of the two dimensions is contiguous in
    shared and global memory. Building a TileSpec validates it: an illegal one raises
    :class:`~ptxgen.isa.types.SpecError` naming the field, the value, the rule and the legal values.
    """

    bm: int
    bn: int
    bk: int
    a: OperandSpec
    b: OperandSpec = OperandSpec(Major.MN, Swizzle.SW128)
    dtype: DType = DType.F16
    acc: DType = DType.F32
    arch: Arch = Arch.SM100A
    stages: int = 2
    out_dtype: DType | None = None
    # Bytes from the aligned base of the dynamic shared-memory window to the first operand stage. 0 puts
    # every swizzle pattern on its repeat boundary (what CUTLASS and DeepGEMM do). A multiple of 128
    # starts the patterns off the boundary; the descriptors' base offset then follows the loader's rule.
    smem_offset: int = 0
    loader: Loader = Loader.TMA
    schedule: Schedule = Schedule.TILE
    raster_group: int = 8  # output tiles are visited in groups of this many tile rows (L2 reuse)
    consumers: Consumers = Consumers.COOPERATIVE
    # B's element type; None means "the same as dtype" (A's). It may differ from A's only inside one 8-bit
    # family: e4m3 x e5m2 (tcgen05 kind::f8f6f4, wgmma .e4m3/.e5m2) or u8 x s8 (kind::i8, wgmma .u8/.s8).
    b_dtype: DType | None = None
    epilogue: Epilogue = Epilogue.DIRECT
    # Block scaling: none (a dense kind) or the scale-factor type (ue8m0: MX, one per 32; ue4m3: NVFP4, one per 16),
    # which with --dtype picks kind::mxf8f6f4, ::mxf4 or ::mxf4nvf4 (ptxgen.isa.blockscale).
    scale: Scale = Scale.NONE
    # tcgen05: 1 (one CTA issues the MMA on its own tile) or 2 (a CTA pair: BM is the pair's MMA M, each CTA holds
    # BM/2 rows of A and BN/2 rows of B; ptxgen.derive.roles.ctapair says who holds and signals what).
    cta_group: int = 1
    cluster: Cluster = Cluster.C1X1  # 2x1: two CTAs along M multicast B; 1x2: two CTAs along N multicast A
    grouped: Grouping = Grouping.NONE  # offs: a grouped GEMM over G groups (ptxgen.derive.roles.grouped)
    batch: Batch = Batch.NONE  # a, ab: a batched GEMM, the batch the outer dimension of 3-D tensor maps
    fuse: ChainSpec | None = None  # the fused epilogue chain (ptxgen.derive.store.fusion); None: D = acc, converted
    fp8_blocks: Fp8Blocks = Fp8Blocks.NONE  # wgmma block-scaled FP8 (ptxgen.derive.scaled.blockfp8)
    fp8_stagger: Fp8Stagger = Fp8Stagger.NONE  # block-scaled FP8: the order of the two consumer warpgroups' K blocks
    fp8_overlap: Fp8Overlap = Fp8Overlap.NONE  # block-scaled FP8: promotion overlapped with the other column half's MMAs
    fp8_scale_load: Fp8ScaleLoad = Fp8ScaleLoad.AUTO  # block-scaled FP8: how the scales reach the consumers (scale_load)
    # Split-K: S CTAs per output tile (grid z), split z multiplying its own run of whole K-tiles into an f32 partial tile
    # of a workspace; the last split to arrive sums the S partials in the fixed order 0..S-1 and runs the epilogue, in the
    # same launch (ptxgen.derive.store.splitk).
    split_k: int = 1
    d_major: DMajor = DMajor.N  # D row-major (n) or M-major (m: column-major, swap-AB's D^T; ptxgen.derive.store.output)
    # Stream-K for the last wave of a persistent kernel: at most S splits of each last-round tile (ptxgen.derive.store.streamk).
    stream_k: int = 1
    # The order of the consumer warpgroups' epilogues (ptxgen.derive.roles.epiorder): none, or alternate (round-robin).
    epilogue_order: EpilogueOrder = EpilogueOrder.NONE
    # 64-row slabs per cooperative wgmma consumer warpgroup, sharing one partial (block FP8; ptxgen.derive.scaled.bfp8slabs)
    consumer_slabs: int = 1
    # cp.async loader: bytes per copy instruction (16: cp.async.cg; 8 or 4: cp.async.ca, each 16-byte cell in 16 /
    # copy_bytes pieces). The operands' global rows need only start copy_bytes-aligned (TMA needs 16).
    copy_bytes: int = 16
    promote: int = 0  # K-tiles per promotion of a fresh partial into the f32 accumulator (0: none; derive.tile.rules_promote)

    def __post_init__(self):
        # Accept the CLI's strings from Python too: TileSpec(128, 128, 32, a="kmajor-sw64", dtype="bf16").
        for f in FIELDS:
            if f.enum is not None and isinstance(getattr(self, f.name), str):
                object.__setattr__(self, f.name, parse_enum(f.enum, getattr(self, f.name), f.flag))
        for name in ("a", "b"):
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, OperandSpec.parse(value, field="--" + name))
        if self.out_dtype is None:
            object.__setattr__(self, "out_dtype", self.acc)
        if self.b_dtype is None:
            object.__setattr__(self, "b_dtype", self.dtype)
        object.__setattr__(self, "fuse", parse_chain(self.fuse))
        validate(self)

    # -- facts every layer asks for ------------------------------------------------------------
    @property
    def operand_row_align_bytes(self) -> int:
        """How aligned A's and B's global rows (and base pointers) must be: TMA's 16 B, or the cp.async copy size."""
        return 16 if self.loader is Loader.TMA else self.copy_bytes

    def operand(self, name: str) -> OperandSpec:
        return {"a": self.a, "b": self.b}[name]

    def operand_dtype(self, name: str) -> DType:
        """Element type of operand ``name``: ``dtype`` for A, ``b_dtype`` for B (the same unless mixed)."""
        return self.dtype if name == "a" else self.b_dtype

    @property
    def mixed(self) -> bool:
        """A and B have different element types (e4m3 x e5m2 or u8 x s8, either way)."""
        return self.b_dtype is not self.dtype

    def mn_extent(self, name: str) -> int:
        """Extent along MN of operand ``name`` in ONE CTA's shared memory: BM for A, BN for B, halved for a
        CTA pair (cta_group 2: each CTA holds BM/2 rows of A and BN/2 rows of B)."""
        return (self.bm if name == "a" else self.bn) // self.cta_group

    def mma_mn(self, name: str) -> int:
        """MN that one MMA reads from ONE CTA's descriptor: wgmma is always M=64; tcgen05 covers the CTA's whole
        share of the tile (all of BM and BN with cta_group::1, half of each with cta_group::2)."""
        if name == "a" and self.arch is Arch.SM90A:
            return 64
        return self.mn_extent(name)

    @property
    def pair(self) -> bool:
        """tcgen05.mma.cta_group::2: a CTA pair computes each BM x BN tile."""
        return self.cta_group == 2

    @property
    def cta_rows(self) -> int:
        """Rows of D (and of A) each CTA holds: BM, or BM/2 for a pair."""
        return self.bm // self.cta_group

    @property
    def acc_columns(self) -> int:
        """TMEM columns one accumulator occupies in each CTA: BN, except the pair's M=128 (data-path Layout B,
        '2x2'): each CTA's 64 rows sit in lanes 0-63 (columns 0..BN/2-1) and 64-127 (columns BN/2..BN-1),
        so BN/2 columns (CUTLASS tmem_frg<.., 2> M_MMA=64 atom (64,(N/2,2)):(1,(128,64)))."""
        return self.bn // 2 if self.pair and self.bm == 128 else self.bn

    @property
    def split(self) -> bool:
        """Split-K: each split stores an f32 partial tile; the last to arrive sums them and writes D (one launch)."""
        return self.split_k > 1

    @property
    def block_scaled(self) -> bool:
        return self.scale is not Scale.NONE

    @property
    def scaled_kind(self) -> ScaledKind | None:
        """The block-scaled kind that A's and B's types and the scale type pick (ptxgen.isa.blockscale.kind_for);
        None for dense kinds."""
        return kind_for(self.dtype, self.b_dtype, self.scale.dtype) if self.block_scaled else None

    @property
    def mma_kind(self) -> str:
        """The tcgen05 .kind: the dense one of the input type, or the block-scaled one picked with --scale."""
        if self.block_scaled:
            return self.scaled_kind.kind
        return self.dtype.kind

    @property
    def k_per_mma(self) -> int:
        return self.scaled_kind.k_per_mma if self.block_scaled else self.dtype.k_per_mma

    def container_bits(self, name: str) -> int:
        """Bits of shared memory one element of operand ``name`` takes: its type's container, except kind::mxf8f6f4's
        6- and 4-bit types, padded 16 to a 16-byte cell (one byte an element; ptxgen.isa.blockscale)."""
        dt = self.operand_dtype(name)
        return smem_container_bits(self.mma_kind, dt) if self.block_scaled else dt.container_bits

    def unpacked(self, name: str) -> bool:
        """Operand ``name`` is a 6-/4-bit kind::mxf8f6f4 type in its padded shared-memory form (16 a 16-byte cell)."""
        return self.block_scaled and unpacked_in_smem(self.mma_kind, self.operand_dtype(name))

    @property
    def sf_tmem_columns(self) -> int:
        """TMEM columns of the scale factors of every stage (0 for dense kinds)."""
        if not self.block_scaled:
            return 0
        return self.stages * sf_tmem_columns_per_stage(self.sf_rows("a"), self.sf_rows("b"), self.bk,
                                                       self.scaled_kind.vec_elements)

    def sf_rows(self, name: str) -> int:
        """Rows of operand ``name``'s scale factors each CTA holds: A's are the CTA's rows of A (BM, or BM/2 of a
        pair), B's the whole tile's BN in every CTA (a pair's CTAs each compute all BN columns of their rows; CUTLASS
        loads the full SFB tile into both, sm100_blockscaled_mma_warpspecialized.hpp TileShape_SF)."""
        return self.cta_rows if name == "a" else self.bn

    def sf_stage_bytes(self, name: str) -> int:
        if not self.block_scaled:
            return 0
        return sf_stage_bytes(self.sf_rows(name), self.bk, self.scaled_kind.vec_elements)

    @property
    def mmas_per_k_tile(self) -> int:
        return self.bk // self.k_per_mma

    def stage_bytes(self, name: str) -> int:
        return self.mn_extent(name) * self.bk * self.container_bits(name) // 8

    @property
    def scale_load(self) -> Fp8ScaleLoad:
        """--fp8-scale-load as built: auto is smem for a dense or K-grouped kernel with cooperative consumers (the scale
        warp walks the producer's tiles; measured 4-9% faster than block on the H200, docs/block-fp8.md) and block for
        M-grouped or ping-pong ones; block (unused) without --fp8-blocks."""
        if self.fp8_blocks is Fp8Blocks.NONE:
            return Fp8ScaleLoad.BLOCK
        if self.fp8_scale_load is not Fp8ScaleLoad.AUTO:
            return self.fp8_scale_load
        dense = not self.grouped.along_m and self.consumers is Consumers.COOPERATIVE
        return Fp8ScaleLoad.SMEM if dense else Fp8ScaleLoad.BLOCK

    def smem_plan(self) -> SmemPlan:
        return plan_smem(
            self.stages,
            self.stage_bytes("a"),
            self.a.swizzle.repeat_bytes,
            self.stage_bytes("b"),
            self.b.swizzle.repeat_bytes,
            tmem=self.arch is Arch.SM100A,
            ring_offset=self.smem_offset,
            order_barriers=2 if self.consumers is Consumers.PINGPONG else 0,
            acc_stages=self.accumulator_stages if self.arch is Arch.SM100A else 0,
            store_bytes=self.store_staging_bytes,
            sf_stage_bytes=((self.bm * SF_BYTES, sfb_stage_bytes(B_SCALE[self.fp8_blocks.value], self.bn))
                            if self.scale_load.staged else
                            (self.sf_stage_bytes("a"), self.sf_stage_bytes("b"))),
            c_barriers=self.store_staging_rows_and_storers[1] if self.fuse is not None and self.fuse.c_tma else 0,
        )

    @property
    def store_staging_rows_and_storers(self) -> tuple[int, int]:
        """TMA-store epilogue: (rows each storer stages, storers): a consumer warpgroup's 64-row slab on wgmma, an
        epilogue warp's 32 TMEM lanes on tcgen05 (derive.store.epilogue)."""
        if self.arch is Arch.SM90A and self.d_major is DMajor.M:  # a row per kernel column of the chunk (a row of D)
            return m_major_chunk_cols(self.bn), self.consumer_warpgroups
        if self.arch is Arch.SM90A:
            return WGMMA_D_ROWS, self.consumer_warpgroups
        return TMEM_WARP_LANES, TCGEN05_EPILOGUE_WARPS

    @property
    def store_buffers(self) -> int:
        """TMA-store epilogue: staging buffers per storer. STORE_BUFFERS (one is written while the store of the other
        reads it), except for an M-major D whose tile is one chunk per warpgroup with one tile per CTA: nothing follows
        that chunk's store to overlap with, so one buffer (half the shared memory) serves."""
        one_chunk = (self.d_major is DMajor.M and m_major_chunk_cols(self.bn) == self.bn
                     and self.bm == WGMMA_D_ROWS * self.consumer_warpgroups and self.schedule is Schedule.TILE)
        return 1 if one_chunk else STORE_BUFFERS

    @property
    def store_staging_bytes(self) -> int:
        """TMA-store epilogue: ``store_buffers`` staging buffers of 128-byte rows per storer (0 without it)."""
        if self.epilogue is not Epilogue.TMA:
            return 0
        rows, storers = self.store_staging_rows_and_storers
        return self.store_buffers * rows * Swizzle.SW128.row_bytes * storers

    @property
    def tmem_columns(self) -> int:
        """TMEM columns of one accumulator: one 32-bit column per element of a row (16-bit accumulators
        too, in the low half: CUTLASS tmem_frg), rounded up to a power of two >= 32."""
        cols = 32
        while cols < self.acc_columns:
            cols *= 2
        return cols

    @property
    def accumulator_stages(self) -> int:
        """tcgen05: accumulators kept in TMEM at once. A persistent CTA keeps 2 when they fit in the 512 columns (the
        epilogue reads one tile out while the MMAs of the next accumulate into the other), else 1. With one tile per
        CTA (schedule 'tile') the second would never be used and would only halve the CTAs whose TMEM fits on an SM
        (the rest spin in tcgen05.alloc; issue 19, fix 4)."""
        if self.schedule is not Schedule.PERSISTENT:
            return 1
        return 2 if 2 * self.tmem_columns + self.sf_tmem_columns <= 512 else 1

    @property
    def tmem_alloc_columns(self) -> int:
        """Accumulators, then (block-scaled) the scale factors, rounded up to a power of two (tcgen05.alloc)."""
        cols = self.accumulator_stages * self.tmem_columns + self.sf_tmem_columns
        alloc = 32
        while alloc < cols:
            alloc *= 2
        return alloc

    @property
    def accumulator_registers(self) -> int:
        """wgmma: 32-bit registers per consumer thread that hold the accumulator (64 x BN over 128 threads)."""
        return wgmma_accumulator_registers(self.bn, self.acc)

    @property
    def consumer_warpgroups(self) -> int:
        """wgmma: one consumer warpgroup per --consumer-slabs 64-row slabs of the tile (cooperative), or two (pingpong)."""
        return 2 if self.consumers is Consumers.PINGPONG else self.bm // (64 * self.consumer_slabs)

    @property
    def slabs_per_consumer(self) -> int:
        """64-row slabs of the tile each consumer warpgroup multiplies: --consumer-slabs cooperative, BM / 64 pingpong."""
        return self.bm // 64 if self.consumers is Consumers.PINGPONG else self.consumer_slabs

    @property
    def consumer_accumulator_registers(self) -> int:
        return self.slabs_per_consumer * self.accumulator_registers

    # -- serialisation: all from FIELDS ------------------------------------------------------------
    def to_json(self) -> dict:
        return {f.name: f.dump(self) for f in FIELDS if not (f.json_omit_when_default and f.dump(self) == f.default_value(self))}

    @classmethod
    def from_json(cls, d: dict) -> "TileSpec":
        if not isinstance(d, dict):
            raise SpecError("spec", type(d).__name__, "a spec is a JSON object", "{" + ", ".join(f'"{f.name}": ...' for f in FIELDS) + "}")
        unknown = sorted(set(d) - {f.name for f in FIELDS})
        if unknown:
            raise SpecError("spec", ", ".join(unknown), "unknown spec key(s)", ", ".join(f.name for f in FIELDS))
        return make_spec(**d)

    def cli_args(self) -> str:
        """The ``ptxgen`` flags that rebuild this spec."""
        parts = []
        for f in FIELDS:
            value = f.dump(self)
            if f.omit_when_default and value == f.default_value(self):
                continue
            parts.append(f"{f.flag} {value}")
        return " ".join(parts)

    @property
    def kernel_name(self) -> str:
        """Deterministic C identifier, e.g. ``ptxgen_sm100a_f16_f32_128x128x32_s2_a_k_sw64_ok_b_mn_sw128_omn``."""

        def op(o: OperandSpec) -> str:
            return f"{o.major.value}_{o.swizzle.value}_o{o.order.value}"

        out = "" if self.out_dtype is self.acc else f"_o{self.out_dtype.value}"
        btype = f"_b{self.b_dtype.value}" if self.mixed else ""
        shift = f"_off{self.smem_offset}" if self.smem_offset else ""
        loader = "" if self.loader is Loader.TMA else "_cpasync" + ("" if self.copy_bytes == 16 else str(self.copy_bytes))
        sched = "_persistent" if self.schedule is Schedule.PERSISTENT else ""
        group = "" if self.raster_group == FIELD_BY_NAME["raster_group"].default else f"_g{self.raster_group}"
        group += "_pingpong" if self.consumers is Consumers.PINGPONG else ""
        group += "_tmastore" if self.epilogue is Epilogue.TMA else ""
        group += "_cta2" if self.pair else ""
        group += "" if self.cluster is Cluster.C1X1 else f"_c{self.cluster.value}"
        group += "" if self.grouped is Grouping.NONE else f"_grouped{self.grouped.value}"
        group += "" if self.batch is Batch.NONE else f"_batch{self.batch.value}"
        group += {Fp8Blocks.DEEPSEEK: "_bs128", Fp8Blocks.COLUMNS: "_bs1d1d"}.get(self.fp8_blocks, "")
        group += "" if self.fp8_stagger is Fp8Stagger.NONE else f"_st{self.fp8_stagger.value}"
        group += "" if self.fp8_overlap is Fp8Overlap.NONE else f"_ov{self.fp8_overlap.value}"
        group += "" if self.fp8_scale_load is Fp8ScaleLoad.AUTO else f"_sl{self.fp8_scale_load.value}"
        group += "" if self.fuse is None else self.fuse.name_suffix
        group += f"_sk{self.split_k}" if self.split else ""
        group += "_dm" if self.d_major is DMajor.M else ""
        group += f"_streamk{self.stream_k}" if self.stream_k > 1 else ""
        group += "" if self.epilogue_order is EpilogueOrder.NONE else f"_eo{self.epilogue_order.value.replace('-', '')}"
        group += f"_cs{self.consumer_slabs}" if self.consumer_slabs > 1 else ""
        group += f"_promote{self.promote}" if self.promote else ""
        scale = f"_sf{self.scale.value}" if self.block_scaled else ""
        return (
            f"ptxgen_{self.arch.value.replace('_', '')}_{self.dtype.value}{btype}{scale}_{self.acc.value}{out}_"
            f"{self.bm}x{self.bn}x{self.bk}_s{self.stages}_a_{op(self.a)}_b_{op(self.b)}{shift}{loader}{sched}{group}"
        )


def make_spec(bm: Any = None, bn: Any = None, bk: Any = None, a: Any = None, b: Any = None, **values: Any) -> TileSpec:
    """Build a TileSpec from the CLI's strings and ints (every parse error is a SpecError naming its flag).

    Keywords are the names in :data:`FIELDS`; None means "the default".
    """
    values.update({k: v for k, v in (("bm", bm), ("bn", bn), ("bk", bk), ("a", a), ("b", b)) if v is not None})
    unknown = sorted(set(values) - set(FIELD_BY_NAME))
    if unknown:
        raise SpecError("spec", ", ".join(unknown), "unknown spec field(s)", ", ".join(FIELD_BY_NAME))
    v = {}
    for f in FIELDS:
        raw = values.get(f.name)
        if raw is None:
            if f.required:
                raise SpecError(f.flag, "(missing)", "this field is required", "see ptxgen explain --help")
            raw = f.default
        v[f.name] = f.parse(raw)
    return TileSpec(
        bm=v["bm"],
        bn=v["bn"],
        bk=v["bk"],
        a=OperandSpec.parse(v["a"], v["a_order"], "--a"),
        b=OperandSpec.parse(v["b"], v["b_order"], "--b"),
        dtype=v["dtype"],
        acc=v["acc"],
        arch=v["arch"],
        stages=v["stages"],
        out_dtype=v["out_dtype"],
        smem_offset=v["smem_offset"],
        loader=v["loader"],
        copy_bytes=v["copy_bytes"],
        schedule=v["schedule"],
        raster_group=v["raster_group"],
        consumers=v["consumers"],
        b_dtype=v["b_dtype"],
        epilogue=v["epilogue"],
        scale=v["scale"],
        cta_group=v["cta_group"],
        cluster=v["cluster"],
        grouped=v["grouped"],
        batch=v["batch"],
        fuse=parse_chain(v["fuse"]),
        fp8_blocks=v["fp8_blocks"],
        fp8_stagger=v["fp8_stagger"],
        fp8_overlap=v["fp8_overlap"],
        fp8_scale_load=v["fp8_scale_load"],
        split_k=v["split_k"],
        d_major=v["d_major"],
        stream_k=v["stream_k"],
        epilogue_order=v["epilogue_order"],
        consumer_slabs=v["consumer_slabs"],
        promote=v["promote"],
    )

