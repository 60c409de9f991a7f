"""The ``ptxgen`` command.

Exit status: 0 success; 1 a check failed (validation, lint, stale generated/); 2 bad usage or an
illegal spec; 3 no usable GPU.
"""

from __future__ import annotations

import argparse
import json
import sys

from . import __version__
from .status import EXIT_CHECK_FAILED, EXIT_NO_GPU, EXIT_OK, EXIT_USAGE
from .isa.types import Arch, SpecError


class UsageError(Exception):
    """Bad command-line usage that argparse cannot see (exit 2)."""


def add_spec_flags(p: argparse.ArgumentParser, arch_default: str | None = "sm_100a", required: bool = True) -> None:
    """One flag per spec field (ptxgen.derive.spec.FIELDS). ``required=False``: the tile flags may be left out."""
    from .derive.spec import FIELDS

    g = p.add_argument_group("tile spec")
    for f in FIELDS:
        kw: dict = {"help": f.help, "required": f.required and required}
        if f.is_int:
            kw["type"] = int
        if f.choices:
            kw["choices"] = f.choices
        default = f.default
        if f.name == "arch":
            default = arch_default
            kw["help"] = f.help + (f" (default {arch_default})" if arch_default else " (default: the GPU's)")
        if not f.required:
            kw["default"] = default
        g.add_argument(f.flag, dest=f.name, **kw)


def spec_from_args(args, arch: str | None = None):
    from .derive.spec import FIELDS, make_spec

    values = {f.name: getattr(args, f.name) for f in FIELDS}
    if arch:
        values["arch"] = arch
    return make_spec(**values)


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
    from .derive.explain import explain_text
    from .derive.layout import derive

    t = derive(spec_from_args(args))
    if args.json:
        print(json.dumps(t.to_json()))
    else:
        sys.stdout.write(explain_text(t))
    return EXIT_OK


def cmd_decode(args) -> int:
    from .isa.descriptors import InstrDescriptor, SmemDescriptor, lint_instr_descriptor, lint_smem_descriptor

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


def cmd_build(args) -> int:
    from pathlib import Path

    from .runtime.artifacts import build
    from .runtime.toolchain import CompileError

    spec = spec_from_args(args)
    try:
        path, art = build(spec, Path(args.out))
    except CompileError as e:
        print(f"ptxgen: error: {e}", file=sys.stderr)
        return EXIT_CHECK_FAILED
    rep = art.sass
    if args.json:
        print(
            json.dumps(
                {
                    "kernel_name": spec.kernel_name,
                    "dir": str(path),
                    "files": sorted(art.files),
                    "sass": {"ok": rep.ok, "opcode": rep.opcode, "mma_per_iteration": rep.mma_in_loop,
                             "registers": rep.registers, "local_bytes": rep.local_bytes, "problems": rep.problems},
                    "layout": art.layout.to_json(),
                }
            )
        )
    else:
        print(f"wrote {path}/ ({', '.join(sorted(art.files))})")
        print(f"SASS: {rep.summary()}")
        for p in rep.problems:
            print(f"SASS PROBLEM: {p}", file=sys.stderr)
    return EXIT_OK if rep.ok else EXIT_CHECK_FAILED


def cmd_check(args) -> int:
    from pathlib import Path

    from .runtime.artifacts import check_tree

    res = check_tree(Path(args.dir))
    for n in res.notes:
        print(f"note: {n}", file=sys.stderr)
    for e in res.errors:
        print(f"ptxgen check: {e}", file=sys.stderr)
    for p in res.differing:
        print(f"ptxgen check: {p} differs from what ptxgen generates now (hand edit or stale generator)", file=sys.stderr)
    if res.ok:
        print(f"ptxgen check: {len(res.checked)} files in {args.dir} match the generator")
        return EXIT_OK
    return EXIT_CHECK_FAILED


def cmd_sweep(args) -> int:
    from .sweep import default_jobs, load_grid, run_sweep, shard, summary_table, write_json

    try:
        grid = load_grid(args.grid)
        specs = shard(grid.specs, args.shard)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if args.list:
        for sp in specs:
            print(sp.cli_args())
        return EXIT_OK
    if args.run:
        from .runtime.gpu import NoGPU, require_gpu

        try:
            require_gpu()
        except NoGPU as e:
            print(f"ptxgen: {e}", file=sys.stderr)
            return EXIT_NO_GPU
    print(
        f"sweep grid {grid.name}: {len(specs)} configurations"
        + (f" (shard {args.shard} of {len(grid.specs)})" if args.shard else "")
        + f", {grid.dropped} illegal combinations dropped",
        file=sys.stderr,
    )
    report = run_sweep(specs, args.jobs or default_jobs(), compile=not args.no_compile, run=args.run)
    report["grid"] = grid.name
    print(summary_table(report))
    if args.json:
        write_json(report, args.json)
    return EXIT_OK if report["summary"]["failed"] == 0 else EXIT_CHECK_FAILED


def cmd_show(args) -> int:
    from .emit.svg import layout_svg
    from .derive.layout import derive

    t = derive(spec_from_args(args))
    decode = _parse_hex(args.decode, 64, "descriptor") if args.decode else None
    svg = layout_svg(t, (args.operand,) if args.operand else ("a", "b"), decode)
    if args.html:
        page = (
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>"
            + t.spec.kernel_name
            + "</title></head><body>\n"
            + svg.split("\n", 1)[1]
            + "</body></html>\n"
        )
        with open(args.html, "w", encoding="utf-8") as f:
            f.write(page)
        print(f"wrote {args.html}")
    elif args.svg:
        with open(args.svg, "w", encoding="utf-8") as f:
            f.write(svg)
        print(f"wrote {args.svg}")
    else:
        sys.stdout.write(svg)
    return EXIT_OK


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

    b = sub.add_parser("build", help="write generated/<kernel>/{kernel.cu,kernel.ptx,layout.json,layout.svg}")
    add_spec_flags(b)
    b.add_argument("--out", default="generated", help="output folder (default generated)")
    b.add_argument("--json", action="store_true", help="print a JSON build report")
    b.set_defaults(func=cmd_build)

    c = sub.add_parser("check", help="regenerate every kernel under DIR and fail on any difference")
    c.add_argument("dir", nargs="?", default="generated")
    c.set_defaults(func=cmd_check)

    w = sub.add_parser("sweep", help="read-model, compile and SASS checks over a grid of configurations")
    w.add_argument("--grid", default="ci", help="ci, full, or a TOML grid file (default ci)")
    w.add_argument("--jobs", type=int, default=None, help="worker processes (default: all CPUs)")
    w.add_argument("--shard", default=None, metavar="I/N", help="run only shard I of N (1-based, deterministic)")
    w.add_argument("--json", default=None, metavar="OUT", help="write the JSON report to OUT")
    w.add_argument("--no-compile", action="store_true", help="only the read-model check")
    w.add_argument("--run", action="store_true", help="also run each kernel on the GPU (needs one)")
    w.add_argument("--list", action="store_true", help="list the configurations and exit")
    w.set_defaults(func=cmd_sweep)

    sh = sub.add_parser("show", help="draw a stage's layout, its swizzle and what each MMA reads (SVG)")
    add_spec_flags(sh)
    sh.add_argument("--operand", choices=("a", "b"), help="draw one operand (default both)")
    out = sh.add_mutually_exclusive_group()
    out.add_argument("--svg", metavar="FILE", help="write the SVG to FILE (default: stdout)")
    out.add_argument("--html", metavar="FILE", help="write a self-contained HTML page to FILE")
    sh.add_argument("--decode", metavar="HEX", help="highlight what this raw descriptor reads instead of the derived ones")
    sh.set_defaults(func=cmd_show)

    _add_gpu_commands(sub)
    return p


def _add_gpu_commands(sub) -> None:
    from .runtime import commands

    commands.add(sub, add_spec_flags)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (SpecError, UsageError) as e:
        print(f"ptxgen: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # e.g. `ptxgen explain ... | head`
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
