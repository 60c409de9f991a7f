"""``ptxgen tune --calibrate``: measure what the cost model needs on the GPU present, fit it, write a calibration.

What is measured (``plan``): every kernel family of ``candidates`` with constants in the reference calibration, in
16-bit (bf16) and e4m3 inputs, on calibration shapes that are none of the named, held-out or test shapes (the same
shapes the shipped H200 calibration was fitted on: rows on a 128-byte line, rows off a 32-byte sector, the narrow tiles'
own shapes), and the swapped 128 x BN' family on five shapes (one and two rounds). ``fit`` turns the times into per-tile and
per-K-tile speeds, wave (launch) and tail (per tile and round) costs, the off-sector factors, the bandwidth floor and
the swap terms on this device's SM count; the stream-K forms are predicted from the same constants. A time budget
(``BUDGET_S``, 5 minutes) bounds the run: points left when it runs out are not measured, and a kernel with fewer than
``fit.MIN_POINTS`` on-sector points is left out of the calibration (the chooser does not rank it there).

The kernels are compiled first, in parallel (``precompile``; the budget counts it). Timing sources: ``gpu_timer`` (the kernel against cuBLAS / torch._scaled_mm in one process, output checked:
``runtime.check.bench.bench_spec``), or any callable with its signature (tests: a simulated device of known speeds).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Callable

from .calibration import REFERENCE, cache_path, shipped, to_doc
from .candidates import BY_NAME
from .choice import Device
from .costmodel import SWAP_FIT_POINTS
from .fit import MIN_POINTS, fit_family, fit_swap

BUDGET_S = 300.0
ARCH = "sm_90a"
FAMILY_DTYPE = {"16bit": "bf16", "e4m3": "e4m3"}  # the input type each family is measured in
ALIGNED = [(3072, 6144, 2048), (6144, 4096, 6144), (1536, 10240, 4096), (7168, 3584, 1024), (2304, 7168, 3072),
           (1024, 8192, 8192)]  # rows on a 128-byte line (K a multiple of 128)
OFF_SECTOR = {"16bit": [(3584, 6144, 3000), (6144, 2560, 4504)],  # 6000 / 9008-byte rows: 16 B past a sector
              "e4m3": [(3584, 6144, 3088), (6144, 2560, 4496)]}  # K = 16 (mod 32)
NARROW_SHAPES = [(16384, 192, 4096), (256, 12288, 2048), (512, 8192, 3072)]  # the narrow tiles' own ground
SWAP_POINTS = SWAP_FIT_POINTS  # (M, N, K, BN'): the shapes the swapped family is fitted on (costmodel)


@dataclass(frozen=True)
class Point:
    family: str  # 16bit | e4m3
    cand: str  # a candidates.CANDIDATES name, or "swap"
    m: int
    n: int
    k: int
    swap_bn: int = 0  # the swapped family's BN'


Timer = Callable[[Point], "tuple[float, float] | None"]  # a point -> (kernel time in us, A + B + D TB/s), None: failed


def plan(families: tuple[str, ...] = ("16bit", "e4m3")) -> list[Point]:
    """The points to measure: first ``fit.MIN_POINTS`` of every kernel (enough to fit it), then the rest round-robin,
    so that a budget cut leaves as many kernels fitted as it can."""
    ref = shipped()[REFERENCE]
    per_kernel: list[list[Point]] = []
    for fam in families:
        for name in ref.families[fam].kernels:
            c = BY_NAME[name]
            shapes = ALIGNED[::5] + OFF_SECTOR[fam] + NARROW_SHAPES if c.narrow else ALIGNED + OFF_SECTOR[fam]
            per_kernel.append([Point(fam, name, m, n, k) for m, n, k in shapes])
        if ref.families[fam].swap is not None:
            per_kernel.append([Point(fam, "swap", m, n, k, bn) for m, n, k, bn in SWAP_POINTS])
    first = [pts[:MIN_POINTS] for pts in per_kernel]  # enough for a fit, every kernel: rows on a line come first
    out = [p for pts in first for p in pts]
    for i in range(MIN_POINTS, max(map(len, per_kernel))):
        out += [pts[i] for pts in per_kernel if i < len(pts)]
    return out


def measure(points: list[Point], timer: Timer, budget_s: float = BUDGET_S, clock=time.monotonic,
            log=lambda s: None) -> tuple[list[dict], int]:
    """(measured points as ``fit`` reads them, how many were left when the budget ran out)."""
    start, out = clock(), []
    for i, p in enumerate(points):
        if clock() - start > budget_s:
            log(f"budget of {budget_s:.0f} s spent: {len(points) - i} of {len(points)} points not measured")
            return out, len(points) - i
        got = timer(p)
        if got is None:
            log(f"  {p.cand} {p.m}x{p.n}x{p.k}: failed, left out")
            continue
        us, tbps = got
        d = {"cand": p.cand, "m": p.m, "n": p.n, "k": p.k, "ours_us": us, "ours_tbps": tbps, "ok": True,
             "dtype": FAMILY_DTYPE[p.family], "family": p.family}
        out.append({**d, "swap_bn": p.swap_bn} if p.swap_bn else d)
        log(f"  {p.family} {p.cand}{f' BN {p.swap_bn}' if p.swap_bn else ''} {p.m}x{p.n}x{p.k}: {us:.1f} us")
    return out, 0


def fit_calibration(device: Device, measured: list[dict], source: str) -> dict:
    """The calibration document of ``device`` from measured points (its SM count in every wave count)."""
    families = {}
    for fam in FAMILY_DTYPE:
        pts = [p for p in measured if p["family"] == fam]
        if not [p for p in pts if "swap_bn" not in p]:
            continue
        doc = fit_family(pts, device.sm_count, ARCH, source)
        swap = fit_swap(pts, device.sm_count, source)
        families[fam] = {**doc, **({"swap": swap} if swap else {})}
    return to_doc(device, families, source)


def calibrate(device: Device, timer: Timer, budget_s: float = BUDGET_S, clock=time.monotonic, log=lambda s: None,
              prepare=None) -> dict:
    """Measure ``plan()`` with ``timer`` and fit: the calibration document of ``device``. ``prepare(points)`` runs first
    (the GPU's: ``precompile``); ``budget_s`` bounds both."""
    points, start = plan(), clock()
    if prepare is not None:
        prepare(points)
    measured, left = measure(points, timer, budget_s - (clock() - start), clock, log)
    src = (f"ptxgen tune --calibrate on {device.name}, {len(measured)} points" + (f", {left} left by the budget" if left else ""))
    return fit_calibration(device, measured, src)


def point_spec(p: Point):
    """The kernel a point times: the candidate's spec, or the swapped 128 x BN' kernel (None where it does not fit)."""
    from .rules import SWAP_FIT_STAGES
    from .swap import _swapped
    from .tune import default_spec

    dtype = FAMILY_DTYPE[p.family]
    return (_swapped(default_spec(dtype, ARCH), 128, p.swap_bn, SWAP_FIT_STAGES) if p.swap_bn
            else BY_NAME[p.cand].spec(dtype, ARCH))


def _compile_one(spec_json: dict) -> str:
    from ...derive.tile.kernel import plan_kernel
    from ...derive.tile.spec import TileSpec
    from ...emit.render import render_kernel
    from ..compile.cache import compile_cached

    spec = TileSpec.from_json(spec_json)
    compile_cached(render_kernel(plan_kernel(spec)), spec.kernel_name, spec.arch.value)
    return spec.kernel_name


def precompile(points: list[Point], jobs: int | None = None, log=lambda s: None) -> None:
    """Compile every kernel of ``points`` into the kernel cache, in parallel worker processes (NVRTC is single-threaded;
    the timings then load the cached cubins)."""
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor

    specs = {s.kernel_name: s.to_json() for s in filter(None, map(point_spec, points))}
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(specs)))
    ctx = multiprocessing.get_context("spawn")  # no CUDA context is inherited
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as ex:
        for name in ex.map(_compile_one, specs.values()):
            log(f"  compiled {name}")


def gpu_timer(iters: int = 5) -> Timer:
    """Times on the GPU present: ``runtime.check.bench.bench_spec`` (alternating with the baseline, output checked)."""
    from ..check.bench import bench_spec

    def timer(p: Point) -> tuple[float, float] | None:
        spec = point_spec(p)
        if spec is None:
            return None
        try:
            r = bench_spec(spec, p.m, p.n, p.k, warmup=2, iters=iters, swap_ab=bool(p.swap_bn))
        except Exception:  # noqa: BLE001 - a point that cannot run is left out of the fit, not fatal
            return None
        return (r.ours_ms * 1e3, r.ours_tbps) if r.checked_ok else None

    return timer


def device_key(dev=None) -> Device:
    """The key of ``dev`` (a ``runtime.launch.gpu.Device``; None: the GPU present, NoGPU where there is none): name, SMs,
    clocks, memory."""
    from ..launch import gpu

    dev = dev if dev is not None else gpu.require_gpu()
    handle = getattr(dev, "handle", None)
    if handle is None:  # a device without a driver handle (a test's stand-in): its name and SM count only
        return Device(dev.name, dev.sm_count)
    cu = gpu._driver()
    attr = cu.CUdevice_attribute

    def get(a, what):
        return gpu.check(cu.cuDeviceGetAttribute(a, handle), what)

    clock_khz = get(attr.CU_DEVICE_ATTRIBUTE_CLOCK_RATE, "clock rate")
    mem_khz = get(attr.CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, "memory clock rate")
    bus = get(attr.CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, "memory bus width")
    total = gpu.check(cu.cuDeviceTotalMem(handle), "total memory")
    return Device(dev.name, dev.sm_count, clock_khz // 1000, mem_khz // 1000, bus, int(total) >> 30)


_KEYS: dict = {}  # device ordinal -> its key, queried once per device


def current_device(dev=None) -> Device | None:
    """The key of ``dev`` (the ``runtime.launch.gpu.Device`` a call runs on), else of the first GPU this process uses
    (``gpu.require_gpu`` was called), else None; queried once per device."""
    from ..launch import gpu

    dev = dev if dev is not None else gpu.current()
    if dev is None:
        return None
    index = getattr(dev, "index", 0)
    key = _KEYS.get(index)
    if key is None:
        key = _KEYS[index] = device_key(dev)
    return key


def write(doc: dict, path) -> None:
    from ...outputs import write_text_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(str(path), json.dumps(doc, indent=1) + "\n")


def check_flags(args) -> None:
    """Bad usage of ``tune --calibrate`` (UsageError, exit 2), before any GPU work."""
    from ...cliargs import UsageError

    if not args.calibrate:
        if args.out is not None or args.budget_s is not None:
            raise UsageError("--out and --budget-s go with --calibrate (the tuning table goes to --json)")
        return
    clash = [f for f, v in (("--shapes", args.shapes), ("--json", args.json), ("--merge", args.merge)) if v]
    if clash:
        raise UsageError(f"--calibrate measures its own shapes and writes a calibration (--out): not with {', '.join(clash)}")
    if args.budget_s is not None and not 0 < args.budget_s <= BUDGET_S:
        raise UsageError(f"--budget-s {args.budget_s}: must be in (0, {BUDGET_S:.0f}] seconds")


def run(args) -> int:
    """``ptxgen tune --calibrate [--out FILE] [--budget-s S]``: 0 written, 1 too few points to fit, 3 no usable GPU."""
    import sys
    from pathlib import Path

    from ...status import EXIT_CHECK_FAILED, EXIT_NO_GPU, EXIT_OK
    from ..launch.gpu import NoGPU

    try:
        device = device_key()
        from ..launch import gpu

        if gpu.require_gpu().arch.value != ARCH:
            raise NoGPU(f"{device.name} runs {gpu.require_gpu().arch.value} kernels; the calibrated kernels are {ARCH}")
    except NoGPU as e:
        print(f"ptxgen tune --calibrate: {e}", file=sys.stderr)
        return EXIT_NO_GPU
    print(f"calibrating {device.name} ({device.sm_count} SMs, {device.clock_mhz} MHz, {device.memory_gib} GiB): "
          f"at most {args.budget_s or BUDGET_S:.0f} s", flush=True)
    say = lambda s: print(s, flush=True)  # noqa: E731
    doc = calibrate(device, gpu_timer(), args.budget_s or BUDGET_S, log=say, prepare=lambda pts: precompile(pts, log=say))
    if not doc["families"]:
        print("ptxgen tune --calibrate: no kernel could be measured: nothing written", file=sys.stderr)
        return EXIT_CHECK_FAILED
    targets = [cache_path(device)] + ([Path(args.out)] if args.out else [])
    for path in targets:
        write(doc, path)
        print(f"wrote {path}")
    return EXIT_OK
