"""``ptxgen explain --operand TOKEN`` and ``ptxgen show --operand TOKEN``: a user kernel's operands, explained and drawn
with the same text and pictures as ptxgen's own tiles (ptxgen.derive.tile.explain, ptxgen.emit.pictures.svg)."""

from __future__ import annotations

from pathlib import Path

from ..derive.tile.explain import _field_lines, atom_picture
from ..isa.types import SpecError
from .operand import Operand, parse_operand


def operand_tokens(values: list[str]) -> list[str]:
    """``--operand`` values: a token, or ``@FILE`` naming a file of tokens (one a line; ``#`` starts a comment)."""
    out = []
    for v in values:
        if v.startswith("@"):
            try:
                text = Path(v[1:]).read_text()
            except OSError as e:
                raise SpecError("--operand", v, f"the operand file cannot be read ({e.strerror})", "@FILE with one token a line") from None
            lines = [line.split("#", 1)[0].strip() for line in text.splitlines()]
            found = [line for line in lines if line]
            if not found:
                raise SpecError("--operand", v, "the operand file names no operand", "one token a line")
            out += found
        else:
            out.append(v)
    return out


def _role_words(op: Operand) -> str:
    side = "A (the M side, m64 slabs on wgmma)" if op.mma_role == "a" else "B (the N side)"
    return f"read as the MMA's {side}, {op.major.value}-major, {op.swizzle.value}, {op.dtype.value}, MN {op.mn} x K {op.k}, {op.arch.value}"


def explain_operand_text(token: str) -> str:
    op = parse_operand(token)
    plan = op.plan()
    out = [f"operand {op.token}: {_role_words(op)}",
           f"stage {plan.stage_bytes} B, aligned to {plan.alignment_bytes} B; {len(plan.k_steps)} K steps of {plan.k_per_step}; "
           f"TMA box {list(plan.tma.box)} x {len(plan.tma.copies)} copies, expect_tx {plan.expect_tx_bytes} B", ""]
    for d in plan.derivation:
        out += _field_lines(d)
    out += [""] + atom_picture(plan.layout)
    return "\n".join(out) + "\n"


def explain_operands(tokens: list[str], as_json: bool) -> str:
    import json

    tokens = operand_tokens(tokens)
    if as_json:
        return json.dumps({parse_operand(t).name: parse_operand(t).plan().to_json() for t in tokens}) + "\n"
    return "\n".join(explain_operand_text(t) for t in tokens)


def show_operand_svg(token: str, decode: int | None = None):
    """(the one-operand TileLayout, its SVG): the operand drawn as ``ptxgen show`` draws a tile's."""
    from ..derive.tile.layout import derive
    from ..emit.pictures.svg import layout_svg

    op = parse_operand(token)
    op.plan()  # refusals name the operand
    t = derive(op.tile_spec())
    svg = layout_svg(t, (op.mma_role,), decode)
    return t, svg.replace(f"ptxgen {t.spec.kernel_name}", f"ptxgen operand {op.token}", 1)
