"""The ``ptxgen`` command.

Exit status: 0 success; 1 a check failed (validation, lint, stale generated/); 2 bad usage or an
illegal spec; 3 no usable GPU.
"""

from __future__ import annotations

import argparse
import json
import sys

from .version import __version__
from .status import EXIT_CHECK_FAILED, EXIT_INTERRUPTED, EXIT_NO_GPU, EXIT_OK, EXIT_USAGE, SettingError, clipped
from .interrupt import interruptible, run_program, takes_over
from .cachedir import enabled
from .cliargs import UsageError, add_spec_flags, spec_from_args
from .isa.types import Arch, SpecError


def _parse_hex(text: str, bits: int, what: str) -> int:
    try:
        value = int(text, 16)
    except ValueError:
        raise UsageError(f"{what} {text!r} is not a hexadecimal number") from None
    if value < 0 or value >> bits:
        raise UsageError(f"{what} {text} does not fit in {bits} bits")
    return value


# ------------------------------------------------------------------------------------------------
TILE_REQUIRED = ("--bm", "--bn", "--bk", "--a")


def _tile_or_operands(args) -> bool:
    """True when the command works on user-kernel operands (``--operand TOKEN``, ptxgen.author), False for a tile
    (whose required flags must then be given); both at once is a usage error."""
    tokens = [t for t in (args.operand or []) if ":" in t or t.startswith("@")] if isinstance(args.operand, list) else (
        [args.operand] if args.operand and (":" in args.operand or args.operand.startswith("@")) else [])
    given = [f for f in ("bm", "bn", "bk", "a") if getattr(args, f) is not None]
    if tokens:
        if given:
            raise UsageError("give a tile (--bm, --bn, --bk, --a, ...) or --operand NAME:LAYOUT:DTYPE:MNxK, not both")
        return True
    missing = [flag for flag, f in zip(TILE_REQUIRED, ("bm", "bn", "bk", "a")) if getattr(args, f) is None]
    if missing:
        raise UsageError("the following arguments are required: " + ", ".join(missing)
                         + " (or --operand NAME:LAYOUT:DTYPE:MNxK for a kernel of your own)")
    return False


def cmd_explain(args) -> int:
    from .derive.tile.explain import explain_text
    from .derive.tile.layout import derive

    if _tile_or_operands(args):
        from .author.explain import explain_operands

        sys.stdout.write(explain_operands(args.operand, args.json))
        return EXIT_OK
    t = derive(spec_from_args(args))
    if args.json:
        print(json.dumps(t.to_json()))
    else:
        sys.stdout.write(explain_text(t))
    return EXIT_OK


def cmd_decode(args) -> int:
    from .isa.blockscale import IDESC_BS_TABLES
    from .isa.descriptors import SmemDescriptor, lint_smem_descriptor
    from .isa.idesc import InstrDescriptor, lint_block_scaled_idesc, lint_instr_descriptor

    if (args.hex is None) == (args.idesc is None):
        raise UsageError("give either a shared-memory descriptor HEX or --idesc HEX")
    if args.idesc is not None:
        raw = _parse_hex(args.idesc, 32, "instruction descriptor")
        if args.kind in IDESC_BS_TABLES:
            rep, table = lint_block_scaled_idesc(raw, args.kind), IDESC_BS_TABLES[args.kind]
        else:
            rep, table = lint_instr_descriptor(raw, args.kind), InstrDescriptor.TABLE
        title = f"tcgen05 instruction descriptor {raw:#010x} (kind::{args.kind})"
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
        for key in ("swizzle", "a_dtype", "b_dtype", "d_dtype", "scale_dtype", "a_major", "b_major"):
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

    from .emit.generated import ForeignFilesError
    from .runtime.compile.buildmemo import build
    from .runtime.compile.toolchain import CompileError

    spec = spec_from_args(args)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {args.out}: exists and is not a folder")
    try:
        res = build(spec, out)  # reuses a kernel folder that is already what the build would write
    except ForeignFilesError as e:
        raise UsageError(str(e)) from None
    except CompileError as e:
        print(f"ptxgen: error: {clipped(e)}", file=sys.stderr)
        return EXIT_CHECK_FAILED
    if args.json:
        print(json.dumps({"kernel_name": res.kernel_name, "dir": str(res.dir), "files": list(res.files), "sass": res.sass,
                          "layout": res.layout}))
    else:
        print(f"wrote {res.dir}/ ({', '.join(res.files)})")
        print(f"SASS: {res.sass_summary}")
        for p in res.sass["problems"]:
            print(f"SASS PROBLEM: {clipped(p)}", file=sys.stderr)
    return EXIT_OK if res.ok else EXIT_CHECK_FAILED


def cmd_check(args) -> int:
    from pathlib import Path

    from .runtime.compile.artifacts import check_tree

    res = check_tree(Path(args.dir))
    for n in res.notes:
        print(f"note: {clipped(n)}", file=sys.stderr)
    for e in res.errors:
        print(f"ptxgen check: {clipped(e)}", file=sys.stderr)
    for p in res.differing:
        print(f"ptxgen check: {clipped(p)} differs from what ptxgen generates now (hand edit or stale generator)", file=sys.stderr)
    if res.ok:
        print(f"ptxgen check: {len(res.checked)} files in {args.dir} match the generator")
        return EXIT_OK
    return EXIT_CHECK_FAILED


def _cmd_sweep(args) -> int:
    from .sweep.command import cmd_sweep

    return cmd_sweep(args)


def _check_output(path: str) -> None:
    from .outputs import check_output_path

    try:
        check_output_path(path)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _lint_decode(t, raw: int) -> bool:
    """``show --decode``: the descriptor's problems and notes, as ``ptxgen decode`` prints them."""
    from .isa.descriptors import lint_smem_descriptor

    rep = lint_smem_descriptor(t.spec.arch, raw)
    for p in rep.problems:
        print(f"PROBLEM: {clipped(p)}", file=sys.stderr)
    for n in rep.notes:
        print(f"note: {clipped(n)}", file=sys.stderr)
    return rep.valid


def cmd_show(args) -> int:
    from .emit.pictures.svg import layout_svg
    from .derive.tile.layout import derive

    if _tile_or_operands(args):
        from .author.explain import operand_tokens, show_operand_svg

        tokens = operand_tokens([args.operand])
        if len(tokens) != 1:
            raise UsageError(f"show draws one operand; {args.operand} names {len(tokens)}")
        decode = _parse_hex(args.decode, 64, "descriptor") if args.decode else None
        if args.html or args.svg:
            _check_output(args.html or args.svg)
        layout, svg = show_operand_svg(tokens[0], decode)
        valid = _lint_decode(layout, decode) if decode is not None else True
        _write_svg(args, svg, tokens[0].split(":")[0])
        return EXIT_OK if valid else EXIT_CHECK_FAILED
    if args.operand not in (None, "a", "b", "d"):
        raise UsageError(f"--operand {args.operand!r}: a, b, d (an operand of the tile) or NAME:LAYOUT:DTYPE:MNxK (your own)")
    t = derive(spec_from_args(args))
    if args.operand == "d" and t.spec.epilogue.value != "tma":
        raise UsageError("--operand d draws the TMA-store epilogue's staging buffer, and this spec stores directly "
                         "(--epilogue direct): add --epilogue tma, or draw --operand a or b")
    decode = _parse_hex(args.decode, 64, "descriptor") if args.decode else None
    target = args.html or args.svg
    if target:
        _check_output(target)
    valid = _lint_decode(t, decode) if decode is not None else True
    _write_svg(args, layout_svg(t, (args.operand,) if args.operand else ("a", "b", "d"), decode), t.spec.kernel_name)
    return EXIT_OK if valid else EXIT_CHECK_FAILED


def _write_svg(args, svg: str, title: str) -> None:
    target = args.html or args.svg
    if args.html:
        svg = ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + title
               + "</title></head><body>\n" + svg.split("\n", 1)[1] + "</body></html>\n")
    if target:
        from .outputs import write_text_atomic

        write_text_atomic(target, svg)
        print(f"wrote {target}")
    else:
        sys.stdout.write(svg)


def cmd_cache(args) -> int:
    from .runtime.compile import cache

    limit = cache.max_bytes()  # a bad $PTXGEN_CACHE_MAX_BYTES: exit 2
    folder, on = cache.cache_dir(), cache.enabled()
    problem = cache.folder_problem(folder) if on or args.action == "clear" else None
    if problem:
        print(f"ptxgen cache: {clipped(problem)}: nothing is cached there (every kernel is compiled anew); set "
              "PTXGEN_CACHE_DIR to a folder ptxgen can write", file=sys.stderr)
        return EXIT_CHECK_FAILED
    if args.action == "clear":
        print(f"removed {cache.clear()} kernels from {folder}")
        return EXIT_OK
    u = cache.usage()
    state = "on" if on else "off (PTXGEN_NO_CACHE)"
    made = "" if folder.is_dir() else " (not created yet: made on the first compile)"
    print(f"{u.folder}{made}: {u.entries} entries, {u.bytes} bytes (cap {limit} bytes, PTXGEN_CACHE_MAX_BYTES); "
          f"cache {state}")
    return EXIT_OK


# ------------------------------------------------------------------------------------------------
class _ExactParser(argparse.ArgumentParser):
    """Flags are matched whole, never by a prefix: with prefixes ``ptxgen show ... --out FILE`` read FILE as
    ``--out-dtype`` (show has ``--svg``/``--html``), and a new flag would silently change what an old prefix means.
    The subcommands' parsers are of this class too (``add_subparsers`` makes its parsers of the parent's class)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        """argparse's usage error (exit 2), an echoed argument of 100 KB cut (status.clipped)."""
        super().error(clipped(message))


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ``only``, just that subcommand's parser under the top level (what ``main``
    needs to parse ``ptxgen ONLY ...``: the same flags, help and errors, without building the other subcommands)."""

    def want(name: str) -> bool:
        return only is None or only == name

    p = _ExactParser(prog="ptxgen", description="tensor-core GEMM tiles: derive, explain, emit, check")
    p.add_argument("--version", action="version", version=f"ptxgen {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    if want("explain"):
        e = sub.add_parser("explain", help="derive every descriptor field of a tile (or of your own kernel's operands) and say why")
        add_spec_flags(e, required=False)
        e.add_argument("--operand", action="append", metavar="TOKEN",
                       help="an operand of a kernel of your own (ptxgen.author), NAME:<k|mn>-SWIZZLE:DTYPE:MNxK[:a|:b][:ARCH], "
                            "e.g. V:mn-sw128:bf16:128x64; repeat it, or @FILE for a file of tokens (one a line); replaces the tile flags")
        e.add_argument("--json", action="store_true", help="print the layout JSON and nothing else")
        e.set_defaults(func=cmd_explain)

    if want("decode"):
        d = sub.add_parser("decode", help="decode and lint a shared-memory or instruction descriptor")
        d.add_argument("hex", nargs="?", help="64-bit shared-memory descriptor, hexadecimal")
        d.add_argument("--idesc", metavar="HEX", help="decode a 32-bit tcgen05 instruction descriptor instead")
        d.add_argument("--kind", default="f16", choices=("f16", "tf32", "f8f6f4", "i8", "mxf8f6f4", "mxf4", "mxf4nvf4"),
                       help="tcgen05 .kind of --idesc (mxf8f6f4, mxf4, mxf4nvf4: the block-scaled layouts, PTX Tables 43-44)")
        d.add_argument("--arch", default="sm_100a", choices=[a.value for a in Arch],
                       help="the descriptor format of this arch (default sm_100a)")
        d.add_argument("--json", action="store_true", help="print the decoded fields, problems and notes as JSON")
        d.set_defaults(func=cmd_decode)

    if want("build"):
        b = sub.add_parser("build", help="write generated/<kernel>/{kernel.cu,kernel.ptx,layout.json,layout.svg}")
        b.add_argument("--kind", choices=("gemm", "attention"), default="gemm",
                       help="gemm (default: the tile-spec flags below) or attention (--head-dim, --bm, --bn, --causal; "
                            "ptxgen build --kind attention --help)")
        add_spec_flags(b)
        b.add_argument("--out", default="generated", help="output folder (default generated)")
        b.add_argument("--json", action="store_true", help="print a JSON build report")
        b.set_defaults(func=cmd_build)

    if want("check"):
        c = sub.add_parser("check", help="regenerate every kernel under DIR and fail on any difference")
        c.add_argument("dir", nargs="?", default="generated", help="the folder of kernel folders (default generated)")
        c.set_defaults(func=cmd_check)

    if want("sweep"):
        w = sub.add_parser("sweep", help="read-model, compile and SASS checks over a grid of configurations")
        w.add_argument("--grid", default="ci", help="ci, full, or a TOML grid file (default ci)")
        w.add_argument("--jobs", type=int, default=None, help="worker processes (default: all CPUs)")
        w.add_argument("--shard", default=None, metavar="I/N", help="run only shard I of N (1-based, deterministic)")
        w.add_argument("--json", default=None, metavar="OUT", help="write the JSON report to OUT")
        w.add_argument("--no-compile", action="store_true", help="only the read-model check")
        w.add_argument("--run", action="store_true", help="also run each kernel on the GPU (needs one)")
        w.add_argument("--list", action="store_true", help="list the configurations and exit")
        w.add_argument("--list-dropped", action="store_true",
                       help="list each illegal combination of the grid with the reason it was dropped, and exit")
        w.add_argument("--resume", metavar="PARTIAL", help="skip the configurations already in this (partial) report")
        w.add_argument("--merge", nargs="+", metavar="REPORT",
                       help="merge shard reports into one summary (exit 1 if a check failed or a shard is missing or duplicated)")
        w.set_defaults(func=_cmd_sweep)

    if want("show"):
        sh = sub.add_parser("show", help="draw a stage's layout, its swizzle and what each MMA reads (SVG)")
        add_spec_flags(sh, required=False)
        sh.add_argument("--operand", metavar="a|b|d|TOKEN",
                        help="draw one operand; d: the TMA-store epilogue's staging buffer (default: all there are); or an operand "
                             "of a kernel of your own, NAME:<k|mn>-SWIZZLE:DTYPE:MNxK[:a|:b][:ARCH] (ptxgen.author), without tile flags")
        out = sh.add_mutually_exclusive_group()
        out.add_argument("--svg", metavar="FILE", help="write the SVG to FILE (default: stdout)")
        out.add_argument("--html", metavar="FILE", help="write a self-contained HTML page to FILE")
        sh.add_argument("--decode", metavar="HEX", help="highlight what this raw descriptor reads instead of the derived ones")
        sh.set_defaults(func=cmd_show)

    if want("cache"):
        ca = sub.add_parser("cache", help="the compiled-kernel cache: where it is and its size (info), or empty it (clear)")
        ca.add_argument("action", choices=("info", "clear"), help="info: folder, entries, bytes; clear: remove every kernel")
        ca.set_defaults(func=cmd_cache)

    if want("plan"):
        from . import plancli

        plancli.add(sub)
    if only is None or only in GPU_COMMANDS:
        _add_gpu_commands(sub)
    return p


def _add_gpu_commands(sub) -> None:
    from .api.bench.bench_ops import OPS
    from .runtime import commands

    commands.add(sub)
    bench = sub.choices["bench"]
    bench.add_argument("--api", action="store_true",
                       help="time what a torch user sees (bf16, K-major, out given): host us per call of ptxgen.gemm, of the "
                            "compiled kernel and of torch.mm; single-call and back-to-back ratios to torch.matmul")
    bench.add_argument("--op", choices=OPS, default=None,
                       help="with --api: which door to time against torch's equivalent (default gemm): fused (bias + "
                            "gelu_tanh vs addmm + gelu), batched (vs bmm), grouped (vs _grouped_mm), scaled_grouped (vs "
                            "_scaled_grouped_mm), bfp8 (vs blockwise _scaled_mm)")
    bench.set_defaults(func=_cmd_bench)


def _cmd_bench(args) -> int:
    from .runtime.commands import TILE_FLAGS, _shapes, cmd_bench

    if not args.api:
        if args.op is not None:
            raise UsageError("--op chooses the door that --api times: add --api")
        return cmd_bench(args)
    given = [f for f in TILE_FLAGS if getattr(args, f, None) is not None]
    if given:
        raise UsageError(f"--api times ptxgen.gemm with the kernel it chooses; drop {', '.join('--' + f for f in given)}")
    shapes = _shapes(args)
    bad = [s for s in shapes if min(s) < 1]
    if bad:
        raise UsageError(f"--shapes: every M, N, K must be at least 1 (got {'x'.join(map(str, bad[0]))})")
    from .runtime.choose.tune import table_entries

    table_entries()  # a tuning table named in $PTXGEN_TUNING with a problem: exit 2 with it, before any GPU work
    from .api.bench.bench_api import run

    return run(shapes, args.iters, args.json, args.op or "gemm")


_DEPENDENCIES = {"cuda": "cuda-python", "jinja2": "jinja2", "numpy": "numpy"}  # top-level module: pyproject's package


class _ClosedStdout(OSError):
    pass


LOCAL_COMMANDS = ("explain", "decode", "build", "check", "sweep", "show", "cache", "plan")
GPU_COMMANDS = ("validate", "probe", "selftest", "bench", "tune")


def _kind(argv: list[str]) -> str | None:
    """The value of build's --kind (``--kind X`` or ``--kind=X``), None when absent."""
    for i, a in enumerate(argv):
        if a == "--kind" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--kind="):
            return a.split("=", 1)[1]
    return None


def main(argv: list[str] | None = None) -> int:
    """The command. Run as the program (``python -m ptxgen``, the ``ptxgen`` script), Ctrl-C exits 130 with no
    traceback whenever it comes (ptxgen.interrupt); called from other code (a test, a tool), SIGINT is left alone."""
    program = takes_over(argv)
    argv = sys.argv[1:] if argv is None else list(argv)
    return run_program(lambda: _main(argv)) if program else _main(argv)


def _main(argv: list[str]) -> int:
    if argv and argv[0] == "build" and _kind(argv[1:]) == "attention":  # its own flags: ptxgen.attention.cli
        from .attention.cli import main as attention_build

        return attention_build(argv[1:])
    parser = build_parser(argv[0] if argv and argv[0] in LOCAL_COMMANDS + GPU_COMMANDS else None)
    args = parser.parse_args(argv)
    try:
        if sys.stdout is None:  # started with stdout closed (`ptxgen ... >&-`)
            raise _ClosedStdout()
        enabled()  # a PTXGEN_NO_CACHE ptxgen does not know: exit 2 before any work, whatever the command
        with interruptible():
            code = args.func(args)
        sys.stdout.flush()  # a full disk shows here, not in a message at interpreter exit
        return code
    except (SpecError, UsageError, SettingError) as e:
        print(f"ptxgen: error: {clipped(e)}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # e.g. `ptxgen explain ... | head`
        _silence_stdout()
        return EXIT_OK
    except KeyboardInterrupt:
        print("ptxgen: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except RuntimeError as e:  # Python wraps an exception raised in a class body's __set_name__ (a dataclass being
        if not _from_ctrl_c(e):  # made while a command's modules load) in RuntimeError: a Ctrl-C there is one too
            raise
        print("ptxgen: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except ModuleNotFoundError as e:  # a broken install: the compiler (cuda-python's NVRTC) or a renderer is missing
        if (e.name or "").split(".")[0] not in _DEPENDENCIES:
            raise
        package = _DEPENDENCIES[e.name.split(".")[0]]
        print(f"ptxgen: error: {package} is not installed (no module {e.name}), so this command cannot run here; "
              f"install ptxgen with its dependencies (pip install -e .)", file=sys.stderr)
        return EXIT_NO_GPU
    except _ClosedStdout:
        print("ptxgen: error: standard output is closed: nothing can be printed (redirect it, e.g. >/dev/null)",
              file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:  # an output path that cannot be written, an input that cannot be read
        if e.filename is None:  # stdout itself (e.g. /dev/full)
            _silence_stdout()
            print(f"ptxgen: error: cannot write the output: {clipped(e.strerror or e)}", file=sys.stderr)
        else:
            print(f"ptxgen: error: {clipped(e.filename)}: {clipped(e.strerror or e)}", file=sys.stderr)
        return EXIT_USAGE


def _from_ctrl_c(e: BaseException) -> bool:
    """A KeyboardInterrupt somewhere in ``e``'s chain of causes (``raise ... from``, or raised while handling it)."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def _silence_stdout() -> None:
    """Drop what stdout still buffers: the interpreter's flush at exit would fail again, with a traceback-like message."""
    import os

    try:
        fd = sys.stdout.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
