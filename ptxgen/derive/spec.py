"""The tile DSL: what a user writes, checked against every PTX rule that applies when it is built.

Every spec field is declared once, in :data:`FIELDS`: its CLI flag, JSON key, default, parser, help
text and kernel-name token. The CLI's flags, ``make_spec``, ``to_json``/``from_json``, ``cli_args``,
the kernel name and the sweep grids' fields are all built from that table.

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
from typing import Any, Callable

from ..isa.ptxref import cite
from ..isa.shapes import (
    TCGEN05_EPILOGUE_WARPS,
    TMEM_WARP_LANES,
    WGMMA_D_ROWS,
    consumer_register_budget,
    legal_bm,
    legal_bn,
    legal_swizzles,
    wgmma_accumulator_registers,
)
from ..isa.types import (
    ACC_DTYPES,
    INPUT_DTYPES,
    LEGAL_ACC,
    Arch,
    AtomOrder,
    DType,
    Cluster,
    Consumers,
    Epilogue,
    Loader,
    Major,
    Scale,
    Schedule,
    SpecError,
    Swizzle,
    parse_enum,
)
from .smem import SMEM_LIMIT_BYTES, SmemPlan, plan_smem

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
        swz = parse_enum(Swizzle, parts[1], field)
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
    # BM/2 rows of A and BN/2 rows of B; ptxgen.derive.ctapair says who holds and signals what).
    cta_group: int = 1
    cluster: Cluster = Cluster.C1X1  # 2x1: two CTAs along M multicast B; 1x2: two CTAs along N multicast A

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
        validate(self)

    # -- facts every layer asks for ------------------------------------------------------------
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
    def block_scaled(self) -> bool:
        return self.scale is not Scale.NONE

    @property
    def mma_kind(self) -> str:
        """The tcgen05 .kind: the dense one of the input type, or the block-scaled one picked with --scale."""
        if self.block_scaled:
            from ..isa.blockscale import kind_of

            return kind_of(self.dtype, self.scale.dtype).kind
        return self.dtype.kind

    @property
    def k_per_mma(self) -> int:
        return self.dtype.k_per_mma

    @property
    def sf_tmem_columns(self) -> int:
        """TMEM columns of the scale factors of every stage (0 for dense kinds)."""
        if not self.block_scaled:
            return 0
        from ..isa.blockscale import kind_of
        from .scales import sf_tmem_columns_per_stage

        return self.stages * sf_tmem_columns_per_stage(self.bm, self.bn, self.bk, kind_of(self.dtype, self.scale.dtype).vec_elements)

    def sf_stage_bytes(self, name: str) -> int:
        if not self.block_scaled:
            return 0
        from ..isa.blockscale import kind_of
        from .scales import sf_stage_bytes

        return sf_stage_bytes(self.mn_extent(name), self.bk, kind_of(self.dtype, self.scale.dtype).vec_elements)

    @property
    def mmas_per_k_tile(self) -> int:
        return self.bk // self.k_per_mma

    def stage_bytes(self, name: str) -> int:
        return self.mn_extent(name) * self.dtype.bytes_of(self.bk)

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
            sf_stage_bytes=(self.sf_stage_bytes("a"), self.sf_stage_bytes("b")),
        )

    @property
    def store_staging_rows_and_storers(self) -> tuple[int, int]:
        """TMA-store epilogue: (rows each storer stages, storers): a consumer warpgroup's 64-row slab on wgmma, an
        epilogue warp's 32 TMEM lanes on tcgen05 (derive.epilogue)."""
        if self.arch is Arch.SM90A:
            return WGMMA_D_ROWS, self.consumer_warpgroups
        return TMEM_WARP_LANES, TCGEN05_EPILOGUE_WARPS

    @property
    def store_staging_bytes(self) -> int:
        """TMA-store epilogue: STORE_BUFFERS staging buffers of 128-byte rows per storer (0 without it)."""
        if self.epilogue is not Epilogue.TMA:
            return 0
        rows, storers = self.store_staging_rows_and_storers
        return STORE_BUFFERS * rows * Swizzle.SW128.row_bytes * storers

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
        """tcgen05: accumulators kept in TMEM at once, 2 when they fit in the 512 columns (the epilogue reads
        one tile out while the MMAs of the next accumulate into the other), else 1."""
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
        """wgmma: one consumer warpgroup per 64-row slab of the tile (cooperative), or two (pingpong)."""
        return 2 if self.consumers is Consumers.PINGPONG else self.bm // 64

    @property
    def slabs_per_consumer(self) -> int:
        """64-row slabs of the tile each consumer warpgroup multiplies: 1 cooperative, BM / 64 pingpong."""
        return self.bm // 64 if self.consumers is Consumers.PINGPONG else 1

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
        loader = "" if self.loader is Loader.TMA else "_cpasync"
        sched = "_persistent" if self.schedule is Schedule.PERSISTENT else ""
        group = "" if self.raster_group == FIELD_BY_NAME["raster_group"].default else f"_g{self.raster_group}"
        group += "_pingpong" if self.consumers is Consumers.PINGPONG else ""
        group += "_tmastore" if self.epilogue is Epilogue.TMA else ""
        group += "_cta2" if self.pair else ""
        group += "" if self.cluster is Cluster.C1X1 else f"_c{self.cluster.value}"
        scale = f"_sf{self.scale.value}" if self.block_scaled else ""
        return (
            f"ptxgen_{self.arch.value.replace('_', '')}_{self.dtype.value}{btype}{scale}_{self.acc.value}{out}_"
            f"{self.bm}x{self.bn}x{self.bk}_s{self.stages}_a_{op(self.a)}_b_{op(self.b)}{shift}{loader}{sched}{group}"
        )


# ----------------------------------------------------------------------------------------------
# The spec fields, declared once
# ----------------------------------------------------------------------------------------------
def _int(flag: str) -> Callable[[Any], int]:
    def parse(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise SpecError(flag, v, "must be an integer", "an integer")
        try:
            return int(v)
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
        v = getattr(spec, self.name)
        return v.value if hasattr(v, "value") else v

    def default_value(self, spec: "TileSpec") -> Any:
        if self.name == "out_dtype":
            return spec.acc.value
        if self.name == "b_dtype":
            return spec.dtype.value
        return self.default


FIELDS: tuple[SpecField, ...] = (
    SpecField("bm", "--bm", "tile M (rows of A and D)", required=True, is_int=True),
    SpecField("bn", "--bn", "tile N (rows of B, columns of D)", required=True, is_int=True),
    SpecField("bk", "--bk", "tile K per pipeline stage", required=True, is_int=True),
    SpecField("a", "--a", "A operand: <kmajor|mnmajor>-<none|sw32|sw64|sw128|sw128b32>", required=True),
    SpecField("b", "--b", "B operand token (default mnmajor-sw128)", default="mnmajor-sw128"),
    SpecField("a_order", "--a-order", "A atom order (default: A's major dimension)", choices=("mn", "k")),
    SpecField("b_order", "--b-order", "B atom order (default: B's major dimension)", choices=("mn", "k")),
    SpecField("dtype", "--dtype", "input type: f16 bf16 tf32 e4m3 e5m2 s8 u8, or e2m1 with --scale (default f16)", default="f16", enum=DType),
    SpecField(
        "b_dtype",
        "--b-dtype",
        "B's input type (default: --dtype); may differ only within e4m3/e5m2 or within s8/u8",
        enum=DType,
        omit_when_default=True,
        json_omit_when_default=True,
    ),
    SpecField(
        "scale",
        "--scale",
        "block scaling (tcgen05 only): ue8m0 (MX: one power-of-two scale per 32 elements; --dtype e4m3/e5m2 -> "
        "kind::mxf8f6f4, e2m1 -> kind::mxf4) or ue4m3 (NVFP4: one per 16; --dtype e2m1 -> kind::mxf4nvf4) (default none)",
        default="none",
        enum=Scale,
        choices=("none", "ue8m0", "ue4m3"),
        omit_when_default=True,
        json_omit_when_default=True,
    ),
    SpecField("acc", "--acc", "accumulator: f32 f16 s32 (default f32)", default="f32", enum=DType),
    SpecField("arch", "--arch", "sm_100a (tcgen05) or sm_90a (wgmma)", default="sm_100a", enum=Arch),
    SpecField("stages", "--stages", "shared-memory pipeline stages (default 2)", default=2, is_int=True),
    SpecField("out_dtype", "--out-dtype", "output type (default: the accumulator's)", enum=DType, omit_when_default=True),
    SpecField(
        "smem_offset",
        "--smem-offset",
        "start the operand rings BYTES (a multiple of 128) past the aligned base: swizzle patterns off their boundary",
        default=0,
        is_int=True,
        omit_when_default=True,
    ),
    SpecField(
        "loader",
        "--loader",
        "how K-tiles reach shared memory: tma (one elected thread, cp.async.bulk.tensor) or cp.async (a producer "
        "warpgroup, 16 B a thread) (default tma)",
        default="tma",
        enum=Loader,
        choices=("tma", "cp.async"),
        omit_when_default=True,
    ),
    SpecField(
        "schedule",
        "--schedule",
        "tile: one CTA per output tile; persistent: one CTA per SM looping over tiles, loads of the next tile "
        "overlapping the epilogue (default tile)",
        default="tile",
        enum=Schedule,
        choices=("tile", "persistent"),
        omit_when_default=True,
    ),
    SpecField(
        "consumers",
        "--consumers",
        "wgmma: cooperative (the consumer warpgroups split each tile's rows) or pingpong (two consumer warpgroups "
        "take alternate tiles, so one's epilogue overlaps the other's MMAs; needs --schedule persistent) (default cooperative)",
        default="cooperative",
        enum=Consumers,
        choices=("cooperative", "pingpong"),
        omit_when_default=True,
    ),
    SpecField(
        "cta_group",
        "--cta-group",
        "tcgen05 (sm_100a): 1, one CTA per MMA; 2, a CTA pair (cluster of 2) issues tcgen05.mma.cta_group::2 with "
        "M = BM = 128 or 256 over the pair, each CTA holding BM/2 rows of A and BN/2 rows of B (default 1)",
        default=1,
        is_int=True,
        omit_when_default=True,
        json_omit_when_default=True,
    ),
    SpecField(
        "raster_group",
        "--raster-group",
        "visit output tiles in groups of this many tile rows, column by column inside a group, so that the A and B "
        "tiles in flight stay in L2 (default 8)",
        default=8,
        is_int=True,
        omit_when_default=True,
    ),
    SpecField(
        "epilogue",
        "--epilogue",
        "direct: each thread stores its accumulator fragment to global memory; tma (sm_90a, 16-bit output): "
        "registers -> swizzled shared memory (stmatrix) -> TMA bulk tensor store, overlapped with the next tile "
        "(default direct)",
        default="direct",
        enum=Epilogue,
        choices=("direct", "tma"),
        omit_when_default=True,
        json_omit_when_default=True,
    ),
    SpecField(
        "cluster",
        "--cluster",
        "thread-block cluster (CTAs along M x along N): 1x1 none; 2x1 two CTAs on neighbouring tile rows share B, "
        "each loads half of B's stage and multicasts it to both; 1x2 likewise share A (sm_90a, TMA) (default 1x1)",
        default="1x1",
        enum=Cluster,
        choices=("1x1", "2x1", "1x2"),
        omit_when_default=True,
        json_omit_when_default=True,
    ),
)
FIELD_BY_NAME = {f.name: f for f in FIELDS}


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
        if raw is None:
            v[f.name] = None
        elif f.is_int:
            v[f.name] = _int(f.flag)(raw)
        elif f.enum is not None:
            v[f.name] = parse_enum(f.enum, _text(f.flag, raw), f.flag)
        else:
            v[f.name] = _text(f.flag, raw)
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
        schedule=v["schedule"],
        raster_group=v["raster_group"],
        consumers=v["consumers"],
        b_dtype=v["b_dtype"],
        epilogue=v["epilogue"],
        scale=v["scale"],
        cta_group=v["cta_group"],
        cluster=v["cluster"],
    )


def _text(flag: str, raw: Any) -> str:
    if not isinstance(raw, str):
        raise SpecError(flag, raw, "must be a string", "see --help")
    return raw


# ----------------------------------------------------------------------------------------------
# Validation
# ----------------------------------------------------------------------------------------------
def _fmt(values) -> str:
    v = list(values)
    if len(v) > 8:
        return ", ".join(map(str, v[:3])) + ", ..., " + ", ".join(map(str, v[-2:]))
    return ", ".join(map(str, v))


# Registers a wgmma consumer needs beside its accumulator. Measured with NVRTC 13.5 on the warp-specialized
# kernels (SASS check, no local memory): at 640 threads (96 registers) BN=128 (64 accumulator registers)
# compiles and BN=160 (80) does not; at 512 threads (128) BN=192 (96) compiles and BN=224 (112) does not.
REGISTER_RESERVE = 32
# Columns of one TMA-store epilogue chunk: a 128-byte swizzle row of 16-bit outputs (derive.epilogue).
STORE_CHUNK_COLS = 64
STORE_BUFFERS = 2  # staging buffers per storer: one is written while the TMA store of the other reads it


def validate(t: TileSpec) -> None:
    """Raise SpecError for the first rule ``t`` breaks."""
    shapes = cite("shapes") if t.arch is Arch.SM100A else cite("wgmma_shapes")
    if t.block_scaled:
        _validate_block_scaled(t)
    elif t.dtype not in INPUT_DTYPES:
        extra = " (e2m1 is a block-scaled type: add --scale ue8m0 or --scale ue4m3)" if t.dtype is DType.E2M1 else ""
        raise SpecError("--dtype", t.dtype.value, "not an MMA input type" + extra, _fmt(d.value for d in INPUT_DTYPES))
    if not t.block_scaled and (t.acc not in ACC_DTYPES or t.acc not in LEGAL_ACC[t.dtype]):
        raise SpecError(
            "--acc",
            t.acc.value,
            f"{t.dtype.value} inputs accumulate only in {'/'.join(d.value for d in LEGAL_ACC[t.dtype])}",
            _fmt(d.value for d in LEGAL_ACC[t.dtype]),
            shapes,
        )
    if not t.block_scaled:
        _validate_b_dtype(t)
    outs = (DType.S32,) if t.acc is DType.S32 else (DType.F32, DType.F16, DType.BF16)
    if t.out_dtype not in outs:
        raise SpecError("--out-dtype", t.out_dtype.value, f"a {t.acc.value} accumulator converts to", _fmt(d.value for d in outs))

    _validate_cta_group(t)
    bms = legal_bm(t.arch, t.cta_group)
    if t.bm not in bms:
        rule = (
            f"tcgen05.mma.cta_group::{t.cta_group} has M = {' or '.join(map(str, bms))}"
            if t.arch is Arch.SM100A
            else "wgmma has M = 64; ptxgen runs one warpgroup per 64 rows, at most four"
        )
        raise SpecError("--bm", t.bm, rule, _fmt(bms), shapes)
    ns = legal_bn(t.arch, t.dtype, t.b.major, t.cta_group)
    if t.bn not in ns:
        family = f"tcgen05 kind::{t.dtype.kind}" if t.arch is Arch.SM100A else f"wgmma .{t.dtype.value}"
        step = "8, 16, 24, 32, then steps of 16" if t.dtype.kind == "i8" else "8..256 in steps of 8"
        if len(ns) and ns[0] == 16 and t.dtype.kind != "i8":
            step = "16..256 in steps of 16 (8-bit N-major B)"
        if t.pair:
            family += ".cta_group::2"
            step = f"{ns[0]}..256 in steps of {ns[1] - ns[0]}" + (" (8-bit N-major B)" if t.dtype.bits == 8 and t.b.major is Major.MN else "")
        raise SpecError("--bn", t.bn, f"{family} N is {step}", _fmt(ns), shapes)

    k = t.k_per_mma
    if t.bk <= 0 or t.bk % k:
        raise SpecError(
            "--bk",
            t.bk,
            f"one {t.dtype.value} MMA consumes K={k} (256 bits of each row); BK must be a multiple",
            f"{k}, {2 * k}, {3 * k}, ...",
            shapes,
        )
    if t.smem_offset < 0 or t.smem_offset % 128 or t.smem_offset >= 1024:
        raise SpecError(
            "--smem-offset",
            t.smem_offset,
            "the descriptor's base offset counts whole 128-byte lines of the swizzle pattern (3 bits), so a "
            "pattern can start only on a 128-byte line, and 1024 or more is the same phase as 0",
            "0, 128, 256, ..., 896",
            cite("base_offset"),
        )
    if not 1 <= t.raster_group <= 64:
        raise SpecError("--raster-group", t.raster_group, "a raster group is 1 to 64 tile rows", "1..64")
    if not 1 <= t.stages <= 16:
        raise SpecError("--stages", t.stages, "the shared-memory ring holds 1 to 16 stages", "1..16")

    for name in ("a", "b"):
        _validate_operand(t, name)

    if t.consumers is Consumers.PINGPONG and (t.arch is not Arch.SM90A or t.schedule is not Schedule.PERSISTENT or t.bm > 128):
        raise SpecError(
            "--consumers", "pingpong", "ping-pong consumers are wgmma warpgroups taking alternate tiles of a persistent "
            "CTA, each multiplying the whole tile (BM 64 or 128)", "--arch sm_90a --schedule persistent --bm 64|128, or cooperative")
    if t.arch is Arch.SM90A:
        nc = t.consumer_warpgroups
        budget = consumer_register_budget(nc)
        if t.consumer_accumulator_registers + REGISTER_RESERVE > budget:
            fit = [n for n in legal_bn(t.arch, t.dtype, t.b.major)
                   if t.slabs_per_consumer * wgmma_accumulator_registers(n, t.acc) + REGISTER_RESERVE <= budget]
            raise SpecError(
                "--bn",
                t.bn,
                f"with BM={t.bm} ({nc} consumer warpgroup(s) and a producer warpgroup, {128 * (nc + 1)} threads) a consumer "
                f"thread has at most {budget} registers (65536 per SM); the m64n{t.bn} {t.acc.value} "
                f"accumulator ({t.slabs_per_consumer} slab(s)) takes {t.consumer_accumulator_registers}, leaving less than the {REGISTER_RESERVE} that addressing "
                "and the pipeline need (ptxas would spill)",
                f"BN <= {max(fit)} at BM={t.bm}, or a smaller BM" if fit else "a smaller BM",
            )

    _validate_epilogue(t)
    _validate_cluster(t)
    plan = t.smem_plan()
    if plan.dynamic_bytes > SMEM_LIMIT_BYTES:
        per_stage = t.stage_bytes("a") + t.stage_bytes("b")
        fit = max(0, (SMEM_LIMIT_BYTES - (plan.dynamic_bytes - t.stages * per_stage)) // per_stage)
        raise SpecError(
            "--stages",
            t.stages,
            f"{t.stages} stages x ({t.stage_bytes('a')} + {t.stage_bytes('b')}) B plus barriers and alignment slack "
            f"need {plan.dynamic_bytes} B of shared memory per block, more than the {SMEM_LIMIT_BYTES} B limit",
            f"at most {fit} stages for this tile" if fit else "a smaller BM/BN/BK",
            cite("smem_limit"),
        )
    if t.block_scaled and t.tmem_columns + t.sf_tmem_columns > 512:
        per = t.sf_tmem_columns // t.stages
        fit = (512 - t.tmem_columns) // per
        raise SpecError(
            "--stages", t.stages,
            f"the accumulator ({t.tmem_columns} TMEM columns) and {t.stages} stages x {per} scale-factor columns need more than "
            "the 512 TMEM columns", f"at most {fit} stages for this tile" if fit else "a smaller BN or BK", cite("tmem_alloc"))
    if t.arch is Arch.SM100A and t.tmem_columns > 512:
        raise SpecError("--bn", t.bn, "the accumulator needs more than the 512 TMEM columns", "BN <= 512", cite("tmem_alloc"))


def _validate_cluster(t: TileSpec) -> None:
    if t.cluster is Cluster.C1X1:
        return
    c = t.cluster.value
    if t.arch is not Arch.SM90A or t.loader is not Loader.TMA:
        raise SpecError("--cluster", c, "clusters with TMA multicast are generated for wgmma kernels with the TMA loader only "
                        "(the multicast is a cp.async.bulk.tensor form)", "--arch sm_90a --loader tma, or --cluster 1x1", cite("tma_multicast"))
    # The shared operand's stage is split between the two CTAs: each loads an equal share of its TMA boxes.
    shared = t.cluster.shared_operand
    if _multicast_halves(t, shared) is None:
        raise SpecError("--cluster", c, f"each CTA of the pair loads half of {shared.upper()}'s stage, so the stage must split into "
                        "two equal runs of swizzle atoms", f"a {'BN' if shared == 'b' else 'BM'} or BK with an even number of atoms along "
                        "one dimension, or --cluster 1x1", cite("tma_multicast"))


def _multicast_halves(t: TileSpec, name: str):
    """The shared operand's copies split in two (see ptxgen.derive.tma.split_copies), or None when it does not split."""
    from .layout import derive_operand  # layout imports spec: imported here
    from .tma import split_copies

    dt = t.operand_dtype(name)
    return split_copies(derive_operand(t, name).store, dt.per_cell, dt.bytes, t.cluster.size)


def _validate_epilogue(t: TileSpec) -> None:
    if t.epilogue is not Epilogue.TMA:
        return
    if t.arch is Arch.SM100A and t.bm != 128:
        raise SpecError("--epilogue", "tma", "on tcgen05 the TMA-store epilogue stores the M=128 data path (epilogue warp w: TMEM "
                        "lanes and rows 32w..32w+31); M=64 uses half the lanes", "--bm 128, or --epilogue direct", cite("tmem_layout"))
    if t.acc is not DType.F32 or t.out_dtype not in (DType.F16, DType.BF16):
        raise SpecError(
            "--epilogue", "tma", "the TMA-store epilogue packs f32 accumulators into 16-bit outputs with stmatrix (8x8 matrices "
            f"of b16), here {t.acc.value} -> {t.out_dtype.value}", "--acc f32 --out-dtype f16|bf16, or --epilogue direct")
    if t.bn % STORE_CHUNK_COLS:
        raise SpecError(
            "--bn", t.bn, f"the TMA-store epilogue stages {STORE_CHUNK_COLS}-column chunks (one 128-byte swizzle row of 16-bit "
            "outputs), so BN must be a whole number of them", f"BN a multiple of {STORE_CHUNK_COLS}, or --epilogue direct")


# CUTLASS's block-scaled collective takes CTA N of 64, 128, 192 or 256 (static_assert in
# sm100_blockscaled_mma_warpspecialized.hpp); for N=64 it moves the SFB TMEM address by (tile_n % 2) * 2 columns,
# as ptxgen does. ptxgen leaves out 192 (a tile spanning two atoms from mid-atom) and anything narrower than 64.
BLOCK_SCALED_BN = (64, 128, 256)


def _validate_block_scaled(t: TileSpec) -> None:
    """The block-scaled rules (PTX 'Block Scaling for tcgen05.mma' and shapes) and what ptxgen generates of them."""
    from ..isa.blockscale import GENERATED, SCALED_ELEMENT_DTYPES, kind_of, legal_scales

    scale = t.scale.dtype
    if t.arch is not Arch.SM100A:
        raise SpecError("--scale", t.scale.value, "block-scaled MMAs are tcgen05 kinds (mxf8f6f4, mxf4, mxf4nvf4): sm_100a only",
                        "--arch sm_100a, or --scale none", cite("block_scaling"))
    if (t.dtype, scale) not in GENERATED:
        if t.dtype in (DType.E2M3, DType.E3M2):
            rule = (f"{t.dtype.value} is legal for kind::mxf8f6f4 (ue8m0) but only padded to one byte in shared memory, in a "
                    "container PTX gives as a picture; ptxgen does not generate the padded 6-bit formats")
        elif t.dtype in SCALED_ELEMENT_DTYPES:
            rule = f"{t.dtype.value} takes {'/'.join(d.value for d in legal_scales(t.dtype))} scale factors"
        else:
            rule = f"{t.dtype.value} is not a block-scaled element type"
        legal = ", ".join(f"--dtype {d.value} --scale {s_.value} (kind::{k.kind})" for (d, s_), k in GENERATED.items())
        raise SpecError("--dtype", t.dtype.value, rule, legal, cite("scale_vec"))
    k = kind_of(t.dtype, scale)
    legal_b = (t.dtype,) + tuple(d for d in (DType.E4M3, DType.E5M2) if d is not t.dtype) if k.kind == "mxf8f6f4" else (t.dtype,)
    if t.b_dtype not in legal_b:
        raise SpecError("--b-dtype", t.b_dtype.value, f"kind::{k.kind} with A {t.dtype.value}: B must be {' or '.join(d.value for d in legal_b)}",
                        _fmt(d.value for d in legal_b), cite("scale_vec"))
    if t.acc is not DType.F32:
        raise SpecError("--acc", t.acc.value, f"kind::{k.kind} accumulates in f32 only", "f32", cite("shapes"))
    if t.bm != 128:
        raise SpecError("--bm", t.bm, f"tcgen05.mma.cta_group::1.kind::{k.kind} has M = 128", "128", cite("shapes"))
    if t.bn not in BLOCK_SCALED_BN:
        raise SpecError("--bn", t.bn,
                        "a tile's N rows must fill whole halves or whole 128-row scale-factor atoms (each TMEM column of SFB "
                        "holds 32 rows; a BN=64 tile starts 0 or 2 columns into its atom, as in CUTLASS's block-scaled collective)",
                        _fmt(BLOCK_SCALED_BN), f"{cite('sfb_id')}; {cite('tcgen05_cp')}")
    for name in ("a", "b"):
        op = t.operand(name)
        if op.major is not Major.K:
            raise SpecError(f"--{name}", op.token,
                            "ptxgen's block-scaled kernels take K-major A and B (kind::mxf4/mxf4nvf4 cannot transpose at all; the "
                            "scale factors are K-major)", f"kmajor-{{none,sw32,sw64,sw128}}", cite("transpose"))
    group = 4 * k.vec_elements
    if t.bk <= 0 or t.bk % group:
        raise SpecError("--bk", t.bk,
                        f"a stage holds whole scale-factor atoms: 4 scale factors of {k.vec_elements} elements = {group} of K "
                        "(one 32-bit TMEM word per row)", f"{group}, {2 * group}, {3 * group}, ...", CUTLASS_SF_REF)
    if t.loader is not Loader.TMA:
        raise SpecError("--loader", t.loader.value,
                        "block-scaled kernels load the scale factors with cp.async.bulk on the TMA full barrier", "tma")


CUTLASS_SF_REF = "CUTLASS Sm1xxBlockScaledConfig (include/cutlass/detail/sm100_blockscaled_layout.hpp)"


def _validate_cta_group(t: TileSpec) -> None:
    if t.cta_group not in (1, 2):
        raise SpecError("--cta-group", t.cta_group, "tcgen05 .cta_group is ::1 or ::2", "1, 2", cite("cta_pair"))
    if not t.pair:
        return
    if t.arch is not Arch.SM100A:
        raise SpecError("--cta-group", 2, "a CTA pair issuing one MMA is tcgen05 (sm_100a); wgmma has no cta_group",
                        "--cta-group 1 with --arch sm_90a, or --arch sm_100a",
                        cite("cta_pair"))
    if t.loader is not Loader.TMA:
        raise SpecError(
            "--cta-group", 2, "the pair's MMA waits on the leader CTA's full barrier, which the peer CTA's loads must complete "
            "remotely; only TMA can (cp.async.bulk.tensor .cta_group::2 signals an mbarrier in the peer CTA); ptxgen's "
            "cp.async producer has no such path", "--loader tma with --cta-group 2", cite("tma_cta_group"))
    if t.block_scaled:
        raise SpecError("--cta-group", 2, "ptxgen generates the block-scaled kinds for cta_group::1 only (the pair's scale "
                        "factors, split across two CTAs' TMEM, are not derived)", "--cta-group 1 with --scale, or --scale none",
                        cite("cta_pair"))
    if t.epilogue is Epilogue.TMA:
        raise SpecError("--cta-group", 2, "the TMA-store epilogue is derived for one CTA's M=128 data path; a pair's D layout "
                        "in TMEM differs (Layout A/B), and its staging is not derived", "--epilogue direct with --cta-group 2",
                        cite("cta_pair"))


# Input types that may meet in one MMA when they differ: PTX lets A and B differ only inside these families.
# tcgen05 (#tcgen05-kind-shapes, '.kind and shapes' table): kind::f8f6f4 takes any of its types for A and for B
# (instruction descriptor a_format/b_format separately, #tcgen05-instuction-desc-kind-tf32-f16-f8f6f4),
# kind::i8 takes .u8/.s8 for each. wgmma.mma_async (#asynchronous-warpgroup-level-matrix-instructions-wgmma-mma-async):
# ".dtype.atype.btype" with .atype, .btype in {.e4m3, .e5m2} (dtype .f16/.f32) or in {.s8, .u8} (dtype .s32);
# f16, bf16 and tf32 name one type for both (.f16.f16, .bf16.bf16, .tf32.tf32).
MIXABLE = ((DType.E4M3, DType.E5M2), (DType.S8, DType.U8))


def legal_b_dtypes(a: DType) -> tuple[DType, ...]:
    """The B types that may go with an A of type ``a`` (``a`` itself first)."""
    for family in MIXABLE:
        if a in family:
            return (a,) + tuple(d for d in family if d is not a)
    return (a,)


def _validate_b_dtype(t: TileSpec) -> None:
    legal = legal_b_dtypes(t.dtype)
    if t.b_dtype in legal:
        return
    ref = cite("shapes") if t.arch is Arch.SM100A else cite("wgmma")
    raise SpecError(
        "--b-dtype",
        t.b_dtype.value,
        f"A and B may differ only between the 8-bit floats (e4m3 x e5m2, either way: tcgen05 kind::f8f6f4, wgmma "
        f".e4m3/.e5m2) or between the 8-bit integers (u8 x s8, either way: kind::i8, wgmma .u8/.s8); with A "
        f"{t.dtype.value} (--dtype), B must be {' or '.join(d.value for d in legal)}",
        _fmt(d.value for d in legal),
        ref,
    )


def _esize_word(d: DType) -> str:
    return f"{d.bytes} B" if d.container_bits % 8 == 0 else f"1/{8 // d.container_bits} B ({d.value}, packed)"


def _validate_operand(t: TileSpec, name: str) -> None:
    op = t.operand(name)
    flag = f"--{name}"
    legal = legal_swizzles(t.arch, t.dtype, op.major)
    if op.swizzle not in legal:
        if not legal:
            rule = f"wgmma transposes (MN-major operands) only .f16/.bf16, not .{t.dtype.value}"
            ref = cite("wgmma")
            legal_s = f"kmajor-{{none,sw32,sw64,sw128}} for {t.dtype.value}"
        elif op.swizzle is Swizzle.SW128B32 and t.arch is Arch.SM90A:
            rule, ref = "wgmma has no 128-byte swizzle with 32-byte atomicity", cite("wgmma_desc")
            legal_s = _fmt(f"{op.major.token}-{s.value}" for s in legal)
        elif op.swizzle is Swizzle.SW128B32:
            rule = "128B_base32B is only for MN-major tf32 (K-major never; other types not transposed with it)"
            ref, legal_s = cite("majorness"), _fmt(f"{op.major.token}-{s.value}" for s in legal)
        else:
            rule = "MN-major tf32 on tcgen05 needs the 128-byte swizzle with 32-byte atomicity"
            ref, legal_s = cite("majorness"), _fmt(f"{op.major.token}-{s.value}" for s in legal)
        raise SpecError(flag, op.token, rule, legal_s, ref)

    swz = op.swizzle
    if op.major is Major.K:
        row_bytes = t.dtype.bytes_of(t.bk)
        if row_bytes % swz.row_bytes:
            fits = [s.value for s in legal if row_bytes % s.row_bytes == 0]
            raise SpecError(
                flag,
                op.token,
                f"a K-major {swz.value} atom row is {swz.row_bytes} B of K, but BK={t.bk} x {_esize_word(t.dtype)} = {row_bytes} B "
                "does not fill whole atom rows",
                f"kmajor-{{{','.join(fits)}}} at this BK, or BK a multiple of {swz.row_bytes * 8 // t.dtype.container_bits}",
                cite("canonical"),
            )
        return
    esize = t.dtype.bytes
    for what, extent in (("tile", t.mn_extent(name)), ("one MMA's", t.mma_mn(name))):
        if extent * esize % swz.row_bytes:
            dim = "BM" if name == "a" else "BN"
            fits = [s.value for s in legal if extent * esize % s.row_bytes == 0]
            raise SpecError(
                flag,
                op.token,
                f"an MN-major {swz.value} atom row is {swz.row_bytes} B of {dim[1]}, but {what} {dim[1]} extent "
                f"{extent} x {esize} B = {extent * esize} B does not fill whole atom rows",
                f"mnmajor-{{{','.join(fits)}}}" if fits else f"{dim} a multiple of {swz.row_bytes // esize}",
                cite("canonical"),
            )
