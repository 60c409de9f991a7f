"""Everything derived for one TileSpec: the composer.

:func:`derive` composes the operand layouts (ptxgen.derive.operands.operand), their TMA plans (tma), the instruction
descriptor, the scale-factor chain (scales) and the CTA pair (ctapair) into one frozen :class:`TileLayout`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ...version import __version__
from ...isa.idesc import InstrDescriptor, WgmmaInstr
from ...isa.ptxref import cite
from ...isa.types import Arch, Loader
from .derived import Derived
from ..store.epilogue import plan_store
from ..operands.operand import OperandLayout, derive_operand
from ..operands.operand_tma import derive_tma
from ..roles.pipeline import plan_pipeline
from ..roles.schedule import plan_schedule
from ..operands.smem import SmemPlan
from .spec import TileSpec

if TYPE_CHECKING:  # the block-scaled and CTA-pair plans are imported when a spec has them (start-up time)
    from ...isa.idesc import BlockScaledInstrDescriptor
    from ..roles.ctapair import CtaPairPlan
    from ..scaled.scales import ScalePlan


def instr_descriptor(spec: TileSpec) -> InstrDescriptor:
    return InstrDescriptor(
        kind=spec.dtype.kind,
        m=spec.bm,
        n=spec.bn,
        a_dtype=spec.dtype.value,
        b_dtype=spec.b_dtype.value,  # a_format and b_format are separate fields: e4m3 x e5m2, u8 x s8 either way
        d_dtype=spec.acc.value,
        a_major=spec.a.major,
        b_major=spec.b.major,
    )


def wgmma_instr(spec: TileSpec) -> WgmmaInstr:
    return WgmmaInstr(spec.bn, spec.dtype, spec.acc, spec.a.major, spec.b.major, spec.b_dtype if spec.mixed else None)


@dataclass(frozen=True)
class TileLayout:
    """Everything derived for one TileSpec."""

    spec: TileSpec
    a: OperandLayout
    b: OperandLayout
    smem: SmemPlan
    idesc: "InstrDescriptor | BlockScaledInstrDescriptor | None"  # tcgen05 (block-scaled: SF IDs 0; see scales)
    wgmma: WgmmaInstr | None  # wgmma
    scales: ScalePlan | None = None  # block-scaled kinds: the scale-factor chain, global -> smem -> TMEM -> MMA
    pair: CtaPairPlan | None = None  # tcgen05 cta_group::2: who holds, loads and signals what

    def operand(self, name: str) -> OperandLayout:
        return {"a": self.a, "b": self.b}[name]

    def idesc_derivation(self) -> tuple[Derived, ...]:
        s = self.spec
        if self.idesc is None:
            w = self.wgmma
            return (
                Derived(
                    "instruction",
                    w.opcode,
                    f"m64 x n{w.n} x k{w.k}, D {s.acc.value}, "
                    + (f"A {s.dtype.value}, B {s.b_dtype.value}" if s.mixed else f"A/B {s.dtype.value}"),
                    "wgmma encodes shape and types in the opcode, .dtype.atype.btype"
                    + ("; the 8-bit types may differ between A and B (e4m3/e5m2, u8/s8)" if s.mixed else ""),
                    cite("wgmma"),
                ),
                Derived(
                    "imm_trans_a",
                    w.imm_trans_a,
                    f"A is {s.a.major.value}-major -> {w.imm_trans_a}",
                    "1 reads A M-major (transposed); only .f16/.bf16 have it" if w.has_transpose else "no transpose immediates for this type: A must be K-major",
                    cite("wgmma"),
                ),
                Derived(
                    "imm_trans_b",
                    w.imm_trans_b,
                    f"B is {s.b.major.value}-major -> {w.imm_trans_b}",
                    "1 reads B N-major (transposed)" if w.has_transpose else "no transpose immediates for this type: B must be K-major",
                    cite("wgmma"),
                ),
            )
        if self.scales is not None:
            return self._block_scaled_idesc_derivation()
        d = self.idesc
        f = d.fields()
        ref = cite("idesc")
        return (
            Derived("d_format", f["d_format"], f"D {s.acc.value} -> {f['d_format']} (F16 0, F32 1, S32 2)", "accumulator type", ref),
            Derived("a_format", f["a_format"], f"A {s.dtype.value} under kind::{d.kind} -> {f['a_format']}", "A element type; codes depend on .kind", ref),
            Derived(
                "b_format",
                f["b_format"],
                f"B {s.b_dtype.value} under kind::{d.kind} -> {f['b_format']}",
                "B element type" + (f"; its own field, so it may differ from A's within kind::{d.kind}" if s.mixed else ""),
                ref,
            ),
            Derived("a_major", f["a_major"], f"A {s.a.major.value}-major -> {f['a_major']}", "transpose A: 0 K-major, 1 M-major", ref),
            Derived("b_major", f["b_major"], f"B {s.b.major.value}-major -> {f['b_major']}", "transpose B: 0 K-major, 1 N-major", ref),
            Derived("n", s.bn, f"N >> 3 = {s.bn} >> 3 = {s.bn >> 3} at bits 17-22", "MMA N = BN", ref),
            Derived("m", s.bm, f"M >> 4 = {s.bm} >> 4 = {s.bm >> 4} at bits 24-28",
                    "MMA M = BM over the CTA pair (cta_group::2: BM/2 rows in each CTA)" if s.pair else "MMA M = BM (cta_group::1)", ref),
            Derived("hex", d.hex, " | ".join(f"{k}={v}" for k, v in f.items() if v), "the 32-bit value passed as idesc", ref),
        )

    def _block_scaled_idesc_derivation(self) -> tuple[Derived, ...]:
        from ...isa.blockscale import idesc_ref

        s, d, k = self.spec, self.idesc, self.scales.kind
        f = d.fields()
        ref = idesc_ref(d.kind)
        return (
            Derived("kind", d.kind, f"{self.scales.mma_opcode}", "the block-scaled kind and scale vector (D is f32: no D-format field)", cite("scale_vec")),
            Derived("a_format", f["a_format"], f"A {s.dtype.value} under kind::{d.kind} -> {f['a_format']}",
                    "mxf8f6f4: E4M3 0, E5M2 1, E2M3 3, E3M2 4, E2M1 5; mxf4/mxf4nvf4: E2M1 1", ref),
            Derived("b_format", f["b_format"], f"B {s.b_dtype.value} under kind::{d.kind} -> {f['b_format']}",
                    "B element type (mxf4/mxf4nvf4: 2 bits, bit 12 reserved)", ref),
            Derived("scale_type", f["scale_type"], f"{k.scale.value} -> {f['scale_type']} (UE4M3 0, UE8M0 1) at bit 23", "scale-factor type", ref),
            Derived("a_major", f["a_major"], "A K-major -> 0", "transpose A: 0 K-major", ref),
            Derived("b_major", f["b_major"], "B K-major -> 0", "transpose B: 0 K-major", ref),
            Derived("n", s.bn, f"N >> 3 = {s.bn >> 3} at bits 17-22", "MMA N = BN", ref),
            Derived("m", s.bm, f"M >> 7 = {s.bm >> 7} at bits 27-28 (CuTe: M >> 4 at 24-28, the same bits)", "MMA M = 128 (cta_group::1)", ref),
            Derived("sf_ids", "per MMA", "a_sf_id bits 29-30, b_sf_id bits 4-5: see the scale-factor steps below",
                    "each MMA of a stage reads other bytes of the TMEM scale-factor words", f"{cite('sfa_id')}; {cite('sfb_id')}"),
            Derived("hex", d.hex, " | ".join(f"{k_}={v}" for k_, v in f.items() if v), "the value with SF IDs 0", ref),
        )

    def to_json(self) -> dict:
        if self.scales is not None:
            raw = self.idesc.encode()
            fields = {k: v for k, v in self.idesc.table.decode(raw).items() if not k.startswith("reserved")}
            idesc = {"hex": f"{raw:#010x}", "kind": self.idesc.kind, "fields": fields}
        elif self.idesc is not None:
            raw = self.idesc.encode()
            fields = {k: v for k, v in InstrDescriptor.TABLE.decode(raw).items() if not k.startswith("reserved")}
            idesc = {"hex": f"{raw:#010x}", "fields": fields}
        else:
            idesc = self.wgmma.to_json()
        store = plan_store(self.spec)
        out = {
            "ptxgen_version": __version__,
            "kernel_name": self.spec.kernel_name,
            "spec": self.spec.to_json(),
            "idesc": idesc,
            "a": self.a.to_json(),
            "b": self.b.to_json(),
        }
        if self.scales is not None:
            out["scales"] = self.scales.to_json()
        if store is not None:
            out["epilogue"] = store.to_json()
        if self.pair is not None:
            out["cta_pair"] = self.pair.to_json()
        if self.spec.fuse is not None:
            from ..store.fusion import plan_chain  # fusion.py is a leaf beside this module

            s = self.spec
            out["fuse"] = plan_chain(s.fuse, s.arch, s.bm, s.bn, s.out_dtype, s.epilogue).to_json()
            if s.fuse.c_tma and store is not None:
                from ..store.cload import plan_c_load  # cload.py builds on epilogue.py, beside this module

                out["epilogue"]["c_load"] = plan_c_load(s, store).to_json()
        out |= self._cluster_json()
        return out

    def _cluster_json(self) -> dict:
        """The ``"cluster"`` object of ``explain --json`` (only with a cluster, so older layouts keep their keys)."""
        c = self.spec.cluster
        if c.size == 1:
            return {}
        op = self.operand(c.shared_operand)
        mc = op.tma.multicast
        pipe = plan_pipeline(self.spec, self.a.tma.expect_tx_bytes + self.b.tma.expect_tx_bytes)
        sch = plan_schedule(self.spec)
        return {"cluster": {
            "shape": c.value,
            "ctas": c.size,
            "shared_operand": c.shared_operand,
            "cta_mask": mc.cta_mask,
            "copies_per_cta": [x.to_json() for x in mc.copies],
            "rank_shift": {"smem_offset_bytes": mc.smem_delta_bytes, "inner": mc.inner_delta, "outer": mc.outer_delta},
            "multicast_bytes_per_cta": mc.bytes_per_cta,
            "expect_tx_bytes": pipe.expect_tx_bytes,
            "empty_arrivals": pipe.empty_arrivals,
            "raster_group_cluster_rows": sch.pair_group,
        }}


def derive(spec: TileSpec) -> TileLayout:
    """Derive every descriptor field, store offset and instruction descriptor of ``spec``."""
    a, b = derive_operand(spec, "a"), derive_operand(spec, "b")
    if spec.loader is Loader.TMA:
        a, b = replace(a, tma=derive_tma(spec, a)), replace(b, tma=derive_tma(spec, b))
    if spec.block_scaled:
        from ..scaled.scales import base_idesc, derive_scales

        idesc, scales = base_idesc(spec), derive_scales(spec)
    else:
        idesc, scales = (instr_descriptor(spec) if spec.arch is Arch.SM100A else None), None
    pair = None
    if spec.pair:
        from ..roles.ctapair import plan_cta_pair

        pair = plan_cta_pair(spec)
    return TileLayout(
        spec=spec,
        a=a,
        b=b,
        smem=spec.smem_plan(),
        idesc=idesc,
        wgmma=wgmma_instr(spec) if spec.arch is Arch.SM90A else None,
        scales=scales,
        pair=pair,
    )
