"""``ptxgen build --kind attention --head-dim D --bm BM --bn BN [--causal] [--arch sm_90a|sm_100a]``.

Writes generated/<kernel>/{kernel.cu, kernel.ptx, plan.json} and prints the SASS gate. Exit 0 when the gate passes,
1 when it fails (or NVRTC refuses the source), 2 for bad usage or an illegal combination (checked before any compile).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..author import Arch, DType, SpecError
from ..status import EXIT_CHECK_FAILED, EXIT_OK, EXIT_USAGE


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own exit status is 2 as well; keep the project's message form
        print(f"ptxgen build: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def parser() -> argparse.ArgumentParser:
    from .spec import BLOCK_M, BLOCK_N, HEAD_DIMS, SCHEDULES

    p = _Parser(prog="ptxgen build --kind attention", description="emit, compile and SASS-check the attention forward")
    p.add_argument("--kind", choices=("attention",), required=True)
    p.add_argument("--head-dim", type=int, required=True, help=f"head dim ({', '.join(map(str, HEAD_DIMS))})")
    p.add_argument("--bm", type=int, default=128, help=f"query rows per CTA ({', '.join(map(str, BLOCK_M))}; default 128)")
    p.add_argument("--bn", type=int, default=None,
                   help=f"keys per block ({', '.join(map(str, BLOCK_N))}; default 128, 64 at head dim 256)")
    p.add_argument("--causal", action="store_true", help="causal mask (top-left aligned, as SDPA's is_causal)")
    p.add_argument("--dtype", default="bf16", help="bf16 or f16 (default bf16)")
    p.add_argument("--stages", type=int, default=2, help="K/V ring stages (default 2)")
    p.add_argument("--schedule", default="serial", help=f"consumer schedule ({', '.join(SCHEDULES)}; default serial)")
    p.add_argument("--persistent", action="store_true", help="one CTA per SM walks the query tiles (sm_90a)")
    p.add_argument("--q-buffers", type=int, default=1,
                   help="Q buffers of the persistent walk: 2 loads the next tile's Q while this one runs (default 1)")
    p.add_argument("--o-staging", action="store_true",
                   help="stage O in the tile's Q buffer and store 16-byte cells (with --q-buffers 2)")
    p.add_argument("--carry", action="store_true",
                   help="issue the next tile's first S with this tile's last P·V (with --q-buffers 2, overlap or pingpong)")
    p.add_argument("--arch", default="sm_90a", help="sm_90a (default) or sm_100a")
    p.add_argument("--out", default="generated", help="output folder (default generated)")
    p.add_argument("--json", action="store_true", help="print a JSON build report")
    return p


def _enum(cls, value: str, flag: str):
    try:
        return cls(value)
    except ValueError:
        raise SpecError(flag, value, "not a known value", ", ".join(m.value for m in cls)) from None


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    from .spec import AttentionSpec

    try:
        bn = args.bn if args.bn is not None else (64 if args.head_dim == 256 else 128)
        spec = AttentionSpec(args.head_dim, args.bm, bn, args.causal, _enum(DType, args.dtype, "--dtype"),
                             _enum(Arch, args.arch, "--arch"), args.stages, args.schedule, args.persistent,
                             args.q_buffers, args.o_staging, args.carry)
    except SpecError as e:
        print(f"ptxgen: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        print(f"ptxgen: error: --out {args.out}: exists and is not a folder", file=sys.stderr)
        return EXIT_USAGE
    from ..author import CompileError
    from .build import build

    try:
        b = build(spec)
    except CompileError as e:
        print(f"ptxgen: error: {e}", file=sys.stderr)
        return EXIT_CHECK_FAILED
    rep = b.sass_report()
    folder = out / spec.kernel_name
    folder.mkdir(parents=True, exist_ok=True)
    files = {"kernel.cu": b.source, "kernel.ptx": b.ptx, "plan.json": json.dumps(b.plan.to_json(), indent=1) + "\n"}
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    if args.json:
        print(json.dumps({"kernel_name": spec.kernel_name, "dir": str(folder), "files": list(files), "sass": rep.summary(),
                          "problems": rep.problems, "plan": b.plan.to_json()}))
    else:
        print(f"wrote {folder}/ ({', '.join(files)})")
        print(f"SASS: {rep.summary()}")
        for p in rep.problems:
            print(f"SASS PROBLEM: {p}", file=sys.stderr)
    return EXIT_OK if rep.ok else EXIT_CHECK_FAILED
