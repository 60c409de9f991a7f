"""What every plan of ``ptxgen.api.plan`` (ptxgen.api.callplan) is made of: the devices a plan is made for
(:data:`DEVICES`, :func:`target`), the result (:class:`CallPlan`, its :class:`Path`), and the reading of a call's
arrays (``runtime.launch.arrays.read_array``'s metadata only; a torch tensor on the meta device stands for a CUDA tensor
of its shape, strides and storage offset)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from ..derive.tile.spec import TileSpec
from ..runtime.launch.arrays import DL_CUDA, ArgumentError, ArrayInfo, read_array
from ..runtime.launch.gpu import NoGPU

# the chooser's devices: arch and SM count (both Hopper parts ptxgen runs on expose 132 SMs)
DEVICES = {"h100": ("sm_90a", 132), "h200": ("sm_90a", 132)}
# the name each device reports (its calibration and tuning table are looked up by it: runtime.choose.calibration)
DEVICE_NAMES = {"h100": "NVIDIA H100 80GB HBM3", "h200": "NVIDIA H200"}


class Path(str, enum.Enum):
    HOT = "hot"
    NARROW = "narrow"
    PACKED = "packed"
    REFUSED = "refused"


@dataclass(frozen=True)
class Target:
    name: str
    arch: str
    sm_count: int


@dataclass(frozen=True)
class CallPlan:
    """What one call does: the path, the kernel (None when refused), why (the rule), the arrays packed first."""

    op: str
    path: Path
    why: str
    kernel: str | None = None
    spec: TileSpec | None = None
    packed: tuple[tuple[str, str], ...] = ()  # (argument, why) copied (a, b) or computed fresh and copied back (out)
    swapped: bool = False  # the swap-ab rule: launched as kernel(b, a, out.T)
    error: str | None = None  # a refusal's exception class (ArgumentError, DTypeError, ProblemError, SpecError)
    device: str = ""
    arch: str = ""
    sm_count: int = 0
    precision: str | None = None  # float32 inputs: "tf32", or "3xtf32" (api.arrays.precision: one GEMM over the split operands)

    def __str__(self) -> str:
        lines = [f"{self.op} on {self.device} ({self.arch}, {self.sm_count} SMs): {self.path.value}"]
        if self.kernel:
            lines.append(f"  kernel: {self.kernel}" + (" (swap-ab: kernel(b, a, out.T))" if self.swapped else ""))
        if self.precision:
            lines.append(f"  float32 precision: {self.precision}" + (" (promoting kernel)" if self.promotes else ""))
        if self.accumulator == "f16":
            lines.append("  accumulate: f16 (an f16 accumulator: api.arrays.accumulate)")
        lines += [f"  packed {name}: {why}" for name, why in self.packed]
        lines.append(f"  why: {self.why}" if self.error is None else f"  refused ({self.error}): {self.why}")
        return "\n".join(lines)

    @property
    def promotes(self) -> bool:
        """The kernel promotes its accumulation (--promote: a 3xTF32 call's, derive.tile.rules_promote)."""
        return self.spec is not None and self.spec.promote > 0

    @property
    def accumulator(self) -> str | None:
        """The kernel's accumulator type (f32, f16 for an f16-accumulate call, s32), None without a kernel."""
        return None if self.spec is None else self.spec.acc.value

    def to_json(self) -> dict:
        return {"op": self.op, "path": self.path.value, "kernel": self.kernel, "why": self.why, "promotes": self.promotes,
                "accumulator": self.accumulator,
                "packed": [{"argument": n, "why": w} for n, w in self.packed], "swapped": self.swapped, "error": self.error,
                "device": self.device, "arch": self.arch, "sm_count": self.sm_count, "precision": self.precision,
                "spec": None if self.spec is None else self.spec.to_json()}


def target(device: str | None) -> Target:
    """The device a plan is made for: "h100", "h200", or None for the GPU present (NoGPU without one)."""
    if device is None:
        from .launch import streams

        try:
            dev = streams.require_gpu()
        except NoGPU as e:
            raise NoGPU(f"{e}; ptxgen.api.plan(..., device='h100' or 'h200') plans without a GPU") from None
        return Target(dev.name, dev.arch.value, dev.sm_count)
    key = str(device).lower()
    if key not in DEVICES:
        raise ArgumentError(f"device {device!r}: one of {', '.join(DEVICES)}, or None for the GPU present")
    return Target(key, *DEVICES[key])


def _stand_in(t: Target):
    """What the chooser reads of the device a plan is made for (name and SM count; an ordinal of its own, below 0)."""
    from types import SimpleNamespace

    names = list(DEVICE_NAMES)
    index = -1 - names.index(t.name) if t.name in names else -1 - len(names)
    return SimpleNamespace(name=DEVICE_NAMES.get(t.name, t.name), sm_count=t.sm_count, index=index)


def _made(op: str, t: Target, path: Path, why: str, spec: TileSpec | None = None, **kw) -> CallPlan:
    return CallPlan(op=op, path=path, why=why, kernel=None if spec is None else spec.kernel_name, spec=spec, device=t.name,
                    arch=t.arch, sm_count=t.sm_count, **kw)


_META_BASE = 1 << 40  # each meta tensor's stand-in allocation: slot 1 + _NAMES.index(argument) of 2^40 B


def _read(args: dict, *names: str) -> list[ArrayInfo | None]:
    return [None if args.get(n) is None else _read_one(args[n], n) for n in names]


def _read_one(x, name: str) -> ArrayInfo:
    """read_array's metadata; a torch tensor on the meta device stands for a CUDA tensor of its shape, strides and
    storage offset in an allocation of its own (its data_ptr is the storage offset in bytes)."""
    info = read_array(x, name)
    if info.via == "torch" and getattr(getattr(x, "device", None), "type", None) == "meta":
        info = replace(info, device=(DL_CUDA, 0), ptr=info.ptr + (1 + _NAMES.index(name)) * _META_BASE)
    return info


_NAMES = ("a", "b", "out", "offs", "scale_a", "scale_b", "bias", "c", "residual", "scale", "amax", "aux")


def _precision(p: CallPlan, prec: str | None, ai: ArrayInfo, split: ArrayInfo) -> CallPlan:
    """The plan of a call on float32 inputs: its precision, and for 3xTF32 what the door does first."""
    if prec is None or p.path is Path.REFUSED:
        return p
    if split is ai:
        return replace(p, precision=prec)
    why = (f"3xTF32: a and b split into tf32-exact big and small parts, one GEMM over K = {split.shape[-1]} "
           f"(3 x {ai.shape[-1]}, padded to a multiple of 4; api.arrays.precision)"
           + (f"; the kernel promotes (--promote {p.spec.promote if p.spec else 0}: the partial of each {p.spec.promote if p.spec else 0} "
              "K-tiles added to the f32 accumulator, rounded to nearest)"
              if p.spec is not None and p.spec.promote and "--promote" not in p.why else "") + "; ")
    return replace(p, precision=prec, why=why + p.why)


def _dense(shape) -> tuple[int, ...]:
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= max(1, s)
    return tuple(reversed(out))
