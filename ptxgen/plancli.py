"""``ptxgen plan OP ARRAY... [NAME=ARRAY|NAME=VALUE ...]``: ``ptxgen.api.plan`` from the command line, no GPU needed.

An array is ``SHAPE:DTYPE[:STRIDES][+OFFSET]``: ``3000x7000:bf16``, ``7000x3000:bf16:1,7000`` (a transposed view),
``64x10:bf16+2`` (data 2 bytes into an aligned allocation); dtypes as ptxgen spells them (bf16, f16, f32, e4m3, e5m2, s8,
u8, s32). Positional arrays are the op's positional arguments in order; ``name=ARRAY`` names one (out=, offs=, bias=,
c=, residual=, scale_a=, ...); ``name=VALUE`` passes a number or a word (alpha=0.5, activation=gelu_tanh,
out_dtype=f32, precision=tf32: float32 arrays standing for torch's are planned under torch's default float32
precision, "highest", as 3xtf32 unless precision= says otherwise). The arrays stand for ``--library``'s (torch by default: the doors copy torch and CuPy arrays they cannot
read as they are, and refuse other libraries'). Exit status: 0 a plan that runs (hot, narrow, packed), 1 a refused call
(its rule printed), 2 bad usage, 3 ``--device`` left out and no GPU.
"""

from __future__ import annotations

import json
import re
import sys

from .cliargs import UsageError
from .status import EXIT_CHECK_FAILED, EXIT_NO_GPU, EXIT_OK

_SIZES = {"bf16": 2, "f16": 2, "f32": 4, "e4m3": 1, "e5m2": 1, "s8": 1, "u8": 1, "s32": 4}
_NAMES = {"bf16": "bfloat16", "f16": "float16", "f32": "float32", "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2",
          "s8": "int8", "u8": "uint8", "s32": "int32"}
_TYPESTR = {"bf16": "<f2", "f16": "<f2", "f32": "<f4", "e4m3": "|u1", "e5m2": "|u1", "s8": "|i1", "u8": "|u1", "s32": "<i4"}
_ARRAY = re.compile(r"(\d+(?:x\d+)*):(\w+)(?::(-?\d+(?:,-?\d+)*))?(?:\+(\d+))?")
_BASE = 1 << 40


class _Array:
    """Array metadata only (__cuda_array_interface__ v3), at an address of its own; the class's module is --library."""

    def __init__(self, shape, dtype, strides, ptr):
        self.dtype = _NAMES[dtype]
        size = _SIZES[dtype]
        self.__cuda_array_interface__ = {"shape": shape, "typestr": _TYPESTR[dtype], "data": (ptr, False), "version": 3,
                                         "stream": None, "strides": None if strides is None else tuple(s * size for s in strides)}

    def __dlpack_device__(self):
        return (2, 0)


def parse_array(text: str, slot: int, library: str):
    m = _ARRAY.fullmatch(text)
    if not m:
        return None
    shape = tuple(int(x) for x in m.group(1).split("x"))
    dtype = m.group(2)
    if dtype not in _SIZES:
        raise UsageError(f"{text}: dtype {dtype!r}, one of {', '.join(_SIZES)}")
    strides = None if m.group(3) is None else tuple(int(x) for x in m.group(3).split(","))
    if strides is not None and len(strides) != len(shape):
        raise UsageError(f"{text}: {len(shape)} dimensions but {len(strides)} strides")
    cls = type("Tensor" if library == "torch" else "ndarray", (_Array,), {"__module__": library})
    return cls(shape, dtype, strides, (slot + 1) * _BASE + int(m.group(4) or 0))


def _value(text: str):
    try:
        return float(text)
    except ValueError:
        return text


def add(sub) -> None:
    p = sub.add_parser("plan", help="say what a call of an op will do (kernel, hot/narrow/packed/refused and why), no GPU")
    p.add_argument("op", help="gemm, fused, grouped_gemm, scaled_grouped_gemm, blockscaled_grouped_gemm, fp8blocks.gemm "
                              "(or batched, grouped, scaled_grouped, blockscaled_grouped, bfp8)")
    p.add_argument("args", nargs="*", metavar="ARRAY|NAME=ARRAY|NAME=VALUE",
                   help="arrays as SHAPE:DTYPE[:STRIDES][+OFFSET], e.g. 3000x7000:bf16 or out=3000x5000:bf16")
    p.add_argument("--device", choices=("h100", "h200"), default=None, help="plan for this device (default: the GPU present)")
    p.add_argument("--library", default="torch", choices=("torch", "cupy", "other"),
                   help="whose arrays the shapes stand for (default torch)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(func=cmd_plan)


def cmd_plan(args) -> int:
    from .api.callplan import Path, plan
    from .runtime.launch.arrays import ArgumentError
    from .runtime.launch.gpu import NoGPU

    positional, named = [], {}
    for i, text in enumerate(args.args):
        name, eq, rest = text.partition("=")
        if eq and re.fullmatch(r"[a-z_]+", name):
            arr = parse_array(rest, i, args.library)
            named[name] = arr if arr is not None else _value(rest)
        else:
            arr = parse_array(text, i, args.library)
            if arr is None:
                raise UsageError(f"{text!r} is not an array (SHAPE:DTYPE[:STRIDES][+OFFSET], e.g. 3000x7000:bf16)")
            positional.append(arr)
    try:
        p = plan(args.op, *positional, device=args.device, **named)
    except (TypeError, ArgumentError) as e:  # arguments the op does not take, an unknown op
        raise UsageError(f"{args.op}: {e}") from None
    except NoGPU as e:
        print(f"ptxgen: error: {e}", file=sys.stderr)
        return EXIT_NO_GPU
    print(json.dumps(p.to_json(), indent=1) if args.json else p)
    return EXIT_CHECK_FAILED if p.path is Path.REFUSED else EXIT_OK
