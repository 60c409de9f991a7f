"""Human-readable explanation of a derived tile: every value, its formula, its reason, its PTX source,
and a text picture of where the cells of the first swizzle atom go."""

from __future__ import annotations

import textwrap

from .derived import Derived
from .kernel import plan_kernel
from .layout import TileLayout
from ..operands.operand import OperandLayout
from ...isa.types import Arch, Major


def _field_lines(d: Derived, width: int = 100) -> list[str]:
    head = f"  {d.name:<18} {d.value}"
    body = [
        f"      = {d.formula}",
        f"      why: {d.reason}",
        f"      ref: {d.ref}",
    ]
    out = [head]
    for line in body:
        out += textwrap.wrap(line, width=width, subsequent_indent="           ", break_on_hyphens=False) or [line]
    return out


def cell_label(op: OperandLayout, row: int, col: int) -> str:
    """``m3:q1`` (K-major: M/N row 3, 16-B K cell 1) or ``k5:nc2`` (MN-major: K row 5, 16-B N cell 2)."""
    mn = "m" if op.name == "a" else "n"
    if op.major is Major.K:
        return f"{mn}{row}:q{col}"  # MN row, 16-byte K cell q
    return f"k{row}:{mn}c{col}"  # K row, 16-byte MN cell


def atom_picture(op: OperandLayout) -> list[str]:
    """Where each logical cell of the first atom lands, drawn in physical order."""
    R, W, rb = op.atom_rows, op.atom_cols, op.swizzle.row_bytes
    lines = []
    if op.swizzle.is_swizzled:
        grid = [["?"] * W for _ in range(R)]
        for r in range(R):
            for c in range(W):
                phys = op.store.physical(r, c)
                grid[phys // rb][(phys % rb) // 16] = cell_label(op, r, c)
        w = max(8, max(len(x) for row in grid for x in row) + 2)
        lines.append(
            f"  first {op.swizzle.value} atom, physical order ({R} rows x {rb} B); each 16-B cell shows the logical "
            f"{'row:K-cell' if op.major is Major.K else 'K-row:MN-cell'} stored there"
        )
        lines.append("  " + " " * 10 + "".join(f"+{16 * c:<{w - 1}}" for c in range(W)) + "<- byte in row")
        for pr in range(R):
            bank0 = (pr * rb) % 128 // 4
            banks = f"banks {bank0}+" if rb < 128 else "banks 0+"
            lines.append(f"  row {pr:<5}" + "".join(f"{x:<{w}}" for x in grid[pr]) + f"  ({banks} 4/cell)")
    else:
        lines.append("  no swizzle: each core matrix is 8 rows x 16 B, contiguous (128 B); byte offset of each logical cell:")
        cols = min(op.store.cols, 4)
        lines.append("  " + " " * 10 + "".join(f"{'col ' + str(c):<10}" for c in range(cols)))
        for r in range(min(op.store.rows, 8)):
            lines.append(f"  row {r:<5}" + "".join(f"{op.store.physical(r, c):<10}" for c in range(cols)))
    return lines


def _types(s) -> str:
    a, b = s.operand_dtype("a"), s.operand_dtype("b")
    return a.value if a is b else f"{a.value} x {b.value}"


def _header_lines(t: TileLayout, plan) -> list[str]:
    s = t.spec
    return [
        f"ptxgen tile {s.bm}x{s.bn}x{s.bk}, {_types(s)} -> {s.acc.value} (out {s.out_dtype.value}), {s.arch.value} "
        f"({(t.scales.mma_opcode if t.scales is not None else f'tcgen05.mma.cta_group::{s.cta_group}.kind::' + s.dtype.kind) if s.arch is Arch.SM100A else 'wgmma.mma_async'}), "
        f"{s.stages} stages, loader {s.loader.value}",
        f"kernel: {s.kernel_name}",
        f"spec:   {s.cli_args()}",
        f"MMAs per K-tile: BK / K = {s.bk} / {s.k_per_mma} = {s.mmas_per_k_tile}; threads: {plan.pipeline.threads}; "
        f"shared memory: {plan.abi.dynamic_smem_bytes} B"
        + (f"; TMEM columns: {s.tmem_columns}" if s.arch is Arch.SM100A else "")
        + (f" per accumulator, {s.tmem_alloc_columns} allocated with {s.sf_tmem_columns} of scale factors" if s.block_scaled else ""),
        "",
    ]


def _instruction_lines(t: TileLayout) -> list[str]:
    """The instruction (and tcgen05's instruction descriptor), and block-scaled kinds' scale factors."""
    out: list[str] = []
    if t.idesc is not None:
        out.append(f"Instruction descriptor (32 bit): {t.idesc.hex}")
    else:
        out.append(f"Instruction: {t.wgmma.opcode} (no instruction descriptor on wgmma)")
    for d in t.idesc_derivation():
        out += _field_lines(d)
    if t.scales is not None:
        out += scale_lines(t)
    return out


def _plan_lines(t: TileLayout, plan) -> list[str]:
    """One section per part of the kernel plan the spec has: pair, TMEM, pipeline, epilogue, scales, chain, walks."""
    s = t.spec
    out: list[str] = []
    if t.pair is not None:
        out += ["", "CTA pair (cta_group::2; L1/L2 only: never run on Blackwell hardware):"]
        for d in t.pair.derivation:
            out += _field_lines(d)
    if plan.tmem is not None:
        out += ["", "Tensor Memory per SM (ptxgen.derive.roles.tmemfit" + ("; one CTA per SM, by shared memory" if plan.tmem.one_cta_per_sm
                                                                   else "") + "):"]
        for d in plan.tmem.derivation:
            out += _field_lines(d)
    out += ["", "Pipeline (warp-specialized, an mbarrier ring):"]
    for d in plan.pipeline.derivation:
        out += _field_lines(d)
    if plan.store is not None:
        out += ["", "Epilogue: registers -> stmatrix -> swizzled staging -> TMA store (D's tensor map from the staging layout):"]
        for d in plan.store.derivation:
            out += _field_lines(d)
    if plan.epi_order is not None:
        out += ["", f"Epilogue order (the {plan.epi_order.consumers} consumer warpgroups take turns; ptxgen.derive.roles.epiorder, "
                    "checked at L1 by ptxgen.model.sim.ordermodel):"]
        for d in plan.epi_order.derivation:
            out += _field_lines(d)
    if plan.direct is not None and plan.direct.d_major.value == "m":
        out += ["", "Epilogue: direct stores into M-major D (ptxgen.derive.store.output; checked at L1 by ptxgen.model.layouts.outmodel):"]
        for d in plan.direct.derivation:
            out += _field_lines(d)
    if plan.block_fp8 is not None:
        out += ["", "Block-scaled FP8 (the DeepSeek recipe; ptxgen.derive.scaled.blockfp8; checked at L1 by ptxgen.model.numerics.bfp8model):"]
        for d in plan.block_fp8.derivation:
            out += _field_lines(d)
        for d in plan.sfa_tma.derivation if plan.sfa_tma is not None else ():  # --fp8-scale-load tma (derive.scaled.sfa_tma)
            out += _field_lines(d)
        for d in plan.slabs.derivation if plan.slabs is not None else ():  # --consumer-slabs (derive.scaled.bfp8slabs)
            out += _field_lines(d)
    if plan.chain is not None:
        out += ["", "Fused epilogue chain (ptxgen.derive.store.fusion; checked at L1 by ptxgen.model.layouts.epimodel):"]
        out += plan.chain.explain_lines()
        for d in plan.chain.derivation:
            out += _field_lines(d)
    if plan.c_load is not None:
        out += ["", "C through TMA (ptxgen.derive.store.cload; checked at L1 by ptxgen.model.bridges.check_cload): C's chunk in the store's "
                    "staging buffer, read back in the fragment layout:"]
        for d in plan.c_load.derivation:
            out += _field_lines(d)
    if s.cluster.size > 1:
        out += ["", f"Cluster {s.cluster.value} (__cluster_dims__({plan.abi.cluster[0]}, 1, 1), TMA multicast of "
                    f"{s.cluster.shared_operand.upper()}; the multicast copies are under {s.cluster.shared_operand.upper()}'s tensor map):"]
        for d in plan.schedule.derivation()[2:]:
            out += _field_lines(d)
    if plan.grouped is not None:
        out += ["", "Grouped GEMM (torch._grouped_mm layout; docs/grouped.md): one persistent launch over every group's tiles:"]
        for d in plan.grouped.derivation():
            out += _field_lines(d)
        out += plan.grouped.walk_picture()
        if plan.block_fp8 is not None:
            out += _grouped_scale_lines(plan)
    if plan.kgrouped is not None:
        out += ["", ("K-grouped GEMM with 1 x 128 scales on both operands (DeepGEMM's k-grouped 1D1D: out[g] = the sum over "
                     "group g's 128-blocks of their scaled products, G x M x N; checked at L1 by ptxgen.model.layouts."
                     "kgroupmodel and ptxgen.model.numerics.kgroupbfp8model):" if plan.kgrouped.k_block else
                     "K-grouped GEMM (torch._grouped_mm 2-D x 2-D: out[g] = a[:, K of g] @ b[:, K of g]^T, G x M x N; "
                     "checked at L1 by ptxgen.model.layouts.kgroupmodel):")]
        for d in plan.kgrouped.derivation():
            out += _field_lines(d)
        out += plan.kgrouped.walk_picture()
    if plan.split is not None:
        out += ["", f"Split-K ({s.split_k} splits; grid z; one launch: the last split to arrive at a tile sums the partials "
                    "in split order and runs the epilogue):"]
        for d in plan.split.derivation():
            out += _field_lines(d)
    if plan.stream_k is not None:
        out += ["", f"Stream-K (at most {s.stream_k} splits of each last-round tile; the split, per shape, at launch):"]
        for d in plan.stream_k.derivation():
            out += _field_lines(d)
        if plan.block_fp8 is not None:
            out += _field_lines(plan.block_fp8.stream_k_derivation())
    return out


def _operand_lines(t: TileLayout) -> list[str]:
    """Each operand's stage: its fields, its tensor map's and a picture of its first atom rows."""
    s = t.spec
    out: list[str] = []
    for op in (t.a, t.b):
        out.append("")
        mn = "M" if op.name == "a" else "N"
        out.append(
            f"Operand {op.name.upper()} ({mn} x K = {op.mn} x {op.bk}{' in each CTA of the pair' if s.pair else ''}): "
            f"{op.major.value}-major, {op.swizzle.value}, "
            f"atom order {op.order.value}; one MMA reads {op.mma_mn} x {s.k_per_mma}; loader {op.loader.value}, ring at "
            f"+{op.ring_offset_bytes} B"
        )
        for d in op.derivation:
            out += _field_lines(d)
        if op.tma is not None:
            out.append(f"  TMA tensor map of {op.name.upper()} (derived from the same stage layout):")
            for d in op.tma.derivation:
                out += _field_lines(d)
        out += atom_picture(op)
    return out


def explain_text(t: TileLayout) -> str:
    plan = plan_kernel(t.spec, t)
    out = _header_lines(t, plan) + _instruction_lines(t) + _plan_lines(t, plan)
    out += ["", "Kernel ABI: " + ", ".join(p.c_decl for p in plan.abi.params)]
    out += _operand_lines(t)
    return "\n".join(out) + "\n"


def sf_atom_picture(vec: int) -> list[str]:
    """Where the scale factors of one 512-byte atom sit: 16-byte row r (TMEM lane r) holds rows r, r+32, r+64, r+96
    (TMEM columns 0-3), each a 32-bit word of 4 chunks (bytes = SF IDs)."""
    lines = [f"  one 512-byte atom (128 rows x 4 chunks of {vec} elements): byte 16 r0 + 4 r1 + j holds row r0 + 32 r1, chunk j",
             "  smem row / TMEM lane |  col 0 (word)      col 1              col 2              col 3"]
    for r0 in (0, 1, 31):
        words = "  ".join(f"r{r0 + 32 * r1:<3}c0 c1 c2 c3" for r1 in range(4))
        lines.append(f"  {r0:<20} |  {words}")
        if r0 == 1:
            lines.append("  ...")
    lines.append("  (bytes of a word = chunks 0..3 along K; an MMA with SF ID i reads byte i (1X), i..i+1 (2X) or all four (4X))")
    return lines


def scale_lines(t: TileLayout) -> list[str]:
    p = t.scales
    out = ["", f"Block scaling ({p.mma_opcode}; {p.kind.scale.value}, one scale factor per {p.vec} elements of K):"]
    for d in p.derivation:
        out += _field_lines(d)
    out += sf_atom_picture(p.vec)
    return out


def _grouped_scale_lines(plan) -> list[str]:
    """A block-scaled grouped kernel (ptxgen.blockscaled_grouped_gemm): the scale arrays each item of the example walk
    reads (derive.scaled.blockfp8 sfb_tile_terms / scale_address), with example strides of a contiguous allocation."""
    bf, s = plan.block_fp8, plan.spec
    offs = [0, 1, s.bm + 2, s.bm + 2]
    m_total, n, k = offs[-1], s.bn + 1, 2 * bf.bk
    kb, nb = -(-k // bf.bk), -(-n // 128)
    env0 = {"lds_a": m_total, "lds_b": kb, "lds_b_group": nb * kb}
    terms = " + ".join(f"({t.var} / {t.divisor}) x {t.stride}" if t.divisor > 1 else f"{t.var} x {t.stride}"
                       for t in bf.sfb_tile_terms)
    out = [f"  block scales of the example (ptxgen.blockscaled_grouped_gemm; K = {k}, contiguous scales: lds_a = M = "
           f"{m_total}, lds_b = ceil(K/128) = {kb}, lds_b_group = ceil(N/128) x lds_b = {nb * kb}): an item's scale_b base "
           f"is {terms}; its A scales are rows a_row0.. of scale_a (the stacked rows, no group offset)"]
    for t in plan.grouped.walk(offs, m_total, n):
        env = dict(env0, n0=t.n0, group=t.group)
        base = sum(x.value(env) for x in bf.sfb_tile_terms)
        out.append(f"  item {t.item}: group {t.group}, n0 = {t.n0}: scale_b elements from {base} (scale_b[{t.group}] block "
                   f"{t.n0 // 128}), scale_a rows {t.a_row0}..{t.a_row0 + s.bm - 1} (element kb x {m_total} + row)")
    return out
