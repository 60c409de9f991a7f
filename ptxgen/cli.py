"""The ``ptxgen`` command.

Exit status: 0 success; 1 a check failed (validation, lint, stale generated/); 2 bad usage or an
illegal spec; 3 no usable GPU.
"""

from __future__ import annotations

import argparse
import json
import sys

from . import __version__
from .types import Arch, SpecError

EXIT_OK, EXIT_CHECK_FAILED, EXIT_USAGE, EXIT_NO_GPU = 0, 1, 2, 3


class UsageError(Exception):
    """Bad command-line usage that argparse cannot see (exit 2)."""


def add_spec_flags(p: argparse.ArgumentParser, arch_default: str | None = "sm_100a") -> None:
    g = p.add_argument_group("tile spec")
    g.add_argument("--bm", type=int, required=True, help="tile M (rows of A and D)")
    g.add_argument("--bn", type=int, required=True, help="tile N (rows of B, columns of D)")
    g.add_argument("--bk", type=int, required=True, help="tile K per pipeline stage")
    g.add_argument("--a", required=True, metavar="TOKEN", help="A operand: <kmajor|mnmajor>-<none|sw32|sw64|sw128|sw128b32>")
    g.add_argument("--b", default="mnmajor-sw128", metavar="TOKEN", help="B operand token (default mnmajor-sw128)")
    g.add_argument("--a-order", choices=("mn", "k"), help="A atom order (default: A's major dimension)")
    g.add_argument("--b-order", choices=("mn", "k"), help="B atom order (default: B's major dimension)")
    g.add_argument("--dtype", default="f16", help="input type: f16 bf16 tf32 e4m3 e5m2 s8 u8 (default f16)")
    g.add_argument("--acc", default="f32", help="accumulator: f32 f16 s32 (default f32)")
    g.add_argument("--out-dtype", default=None, help="output type (default: the accumulator's)")
    g.add_argument(
        "--arch",
        default=arch_default,
        help="sm_100a (tcgen05) or sm_90a (wgmma)" + (f" (default {arch_default})" if arch_default else " (default: the GPU's)"),
    )
    g.add_argument("--stages", type=int, default=2, help="shared-memory pipeline stages (default 2)")


def spec_from_args(args, arch: str | None = None):
    from .spec import make_spec

    return make_spec(
        bm=args.bm,
        bn=args.bn,
        bk=args.bk,
        a=args.a,
        b=args.b,
        a_order=args.a_order,
        b_order=args.b_order,
        dtype=args.dtype,
        acc=args.acc,
        arch=arch or args.arch,
        stages=args.stages,
        out_dtype=args.out_dtype,
    )


def _parse_hex(text: str, bits: int, what: str) -> int:
    try:
        value = int(text, 16)
    except ValueError:
        raise UsageError(f"{what} {text!r} is not a hexadecimal number") from None
    if value < 0 or value >> bits:
        raise UsageError(f"{what} {text} does not fit in {bits} bits")
    return value


# ------------------------------------------------------------------------------------------------
def cmd_explain(args) -> int:
    from .explain import explain_text
    from .layout import derive

    t = derive(spec_from_args(args))
    if args.json:
        print(json.dumps(t.to_json()))
    else:
        sys.stdout.write(explain_text(t))
    return EXIT_OK


def cmd_decode(args) -> int:
    from .descriptors import InstrDescriptor, SmemDescriptor, lint_instr_descriptor, lint_smem_descriptor

    if (args.hex is None) == (args.idesc is None):
        raise UsageError("give either a shared-memory descriptor HEX or --idesc HEX")
    if args.idesc is not None:
        raw = _parse_hex(args.idesc, 32, "instruction descriptor")
        rep = lint_instr_descriptor(raw, args.kind)
        table, title = InstrDescriptor.TABLE, f"tcgen05 instruction descriptor {raw:#010x} (kind::{args.kind})"
    else:
        arch = Arch(args.arch)
        raw = _parse_hex(args.hex, 64, "descriptor")
        rep = lint_smem_descriptor(arch, raw)
        table, title = SmemDescriptor.TABLES[arch], f"{arch.value} {table_name(arch)} {raw:#018x}"
    if args.json:
        print(json.dumps({**rep.fields, "valid": rep.valid, "problems": rep.problems, "notes": rep.notes}))
    else:
        print(title)
        for f in table.fields:
            value = f.raw(raw) * f.unit_bytes
            unit = " B" if f.units == "16 B" else ""
            stored = f"  (field {f.raw(raw)})" if f.unit_bytes > 1 else ""
            print(f"  bits {f.bits_label:<6} {f.name:<14} {value}{unit}{stored}")
        for key in ("swizzle", "a_dtype", "b_dtype", "d_dtype", "a_major", "b_major"):
            if key in rep.fields:
                print(f"  -> {key}: {rep.fields[key]}")
        for p in rep.problems:
            print(f"PROBLEM: {p}")
        for n in rep.notes:
            print(f"note: {n}")
        print("valid" if rep.valid else f"invalid: {len(rep.problems)} problem(s)")
    return EXIT_OK if rep.valid else EXIT_CHECK_FAILED


def table_name(arch: Arch) -> str:
    return "shared-memory descriptor" if arch is Arch.SM100A else "wgmma matrix descriptor"


# ------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ptxgen", description="tensor-core GEMM tiles: derive, explain, emit, check")
    p.add_argument("--version", action="version", version=f"ptxgen {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    e = sub.add_parser("explain", help="derive every descriptor field of a tile and say why")
    add_spec_flags(e)
    e.add_argument("--json", action="store_true", help="print the layout JSON and nothing else")
    e.set_defaults(func=cmd_explain)

    d = sub.add_parser("decode", help="decode and lint a shared-memory or instruction descriptor")
    d.add_argument("hex", nargs="?", help="64-bit shared-memory descriptor, hexadecimal")
    d.add_argument("--idesc", metavar="HEX", help="decode a 32-bit tcgen05 instruction descriptor instead")
    d.add_argument("--kind", default="f16", choices=("f16", "tf32", "f8f6f4", "i8"), help="tcgen05 .kind of --idesc")
    d.add_argument("--arch", default="sm_100a", choices=[a.value for a in Arch])
    d.add_argument("--json", action="store_true")
    d.set_defaults(func=cmd_decode)

    _add_later_commands(sub)
    return p


def _add_later_commands(sub) -> None:
    """Commands of the emit and runtime layers (imported lazily so the core works without them)."""
    try:
        from . import cli_more
    except ImportError:  # pragma: no cover - only while the package is being assembled
        return
    cli_more.add_commands(sub, add_spec_flags)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except SpecError as e:
        print(f"ptxgen: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except UsageError as e:
        print(f"ptxgen: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # e.g. `ptxgen explain ... | head`
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
