"""``ptxgen tune``: search a bounded space of kernels for a shape on the GPU; the table of winners ships
with the package (ptxgen/tuning/<device>.json), and ``ptxgen bench`` / ``ptxgen.gemm`` pick from it.

The table maps (dtype, arch, M, N, K) to a spec; which kernel runs a shape that is not in it is decided in
``ptxgen.runtime.choose.walk``.
"""

from __future__ import annotations

import dataclasses
import json
from importlib import resources
from pathlib import Path

from ...derive.spec import TileSpec, make_spec
from ...isa.types import Epilogue, SpecError
from ...status import SettingError
from .calibration import table_name
from .choice import Device

TABLE = "h200.json"  # the reference device's table (calibration.REFERENCE); each device's: calibration.table_name

# The search space, per input type: tile, stages, schedule, raster group (A and B K-major, as torch lays them out).
_TILES = {
    "16bit": [(128, 256, 64, 4), (128, 256, 64, 3), (128, 128, 64, 6), (256, 128, 64, 4), (128, 192, 64, 5)],
    "e4m3": [(128, 256, 128, 4), (128, 128, 128, 6), (256, 128, 128, 4)],
}
_SCHEDULES = [("tile", 8), ("persistent", 8), ("persistent", 16), ("persistent", 4)]
# ping-pong consumer warpgroups (persistent only): tile, stages
_PINGPONG = {"16bit": [(128, 128, 64, 6), (64, 256, 64, 5), (128, 128, 64, 5)], "e4m3": [(128, 128, 128, 5)]}


def candidates(dtype: str, arch: str) -> list[TileSpec]:
    out_dtype = "bf16" if dtype in ("bf16", "e4m3") else "f16"
    tiles = _TILES["e4m3" if dtype == "e4m3" else "16bit"]
    specs = []
    for bm, bn, bk, stages in tiles:
        for schedule, group in _SCHEDULES:
            try:
                specs.append(make_spec(bm=bm, bn=bn, bk=bk, a="kmajor-sw128", b="kmajor-sw128", dtype=dtype, acc="f32",
                                       out_dtype=out_dtype, arch=arch, stages=stages, schedule=schedule, raster_group=group))
            except SpecError:
                continue
    for bm, bn, bk, stages in _PINGPONG["e4m3" if dtype == "e4m3" else "16bit"]:
        for group in (8, 16):
            try:
                specs.append(make_spec(bm=bm, bn=bn, bk=bk, a="kmajor-sw128", b="kmajor-sw128", dtype=dtype, acc="f32",
                                       out_dtype=out_dtype, arch=arch, stages=stages, schedule="persistent",
                                       raster_group=group, consumers="pingpong"))
            except SpecError:
                continue
    return specs + [v for v in map(store_variant, specs) if v is not None]


def store_variant(spec: TileSpec) -> TileSpec | None:
    """The same kernel with the TMA-store epilogue (one stage fewer where its staging buffers need the room)."""
    for stages in range(spec.stages, 1, -1):
        try:
            return dataclasses.replace(spec, epilogue=Epilogue.TMA, stages=stages)
        except SpecError:
            continue
    return None


TUNABLE_DTYPES = ("f16", "bf16", "e4m3")  # the input types candidates() has tiles for


def check_tunable(dtype: str) -> None:
    """The chooser and the tuner pick among candidates() tiles: another input type needs the tile flags (exit 2)."""
    if dtype not in TUNABLE_DTYPES:
        raise SpecError("--dtype", dtype, "the chooser has kernels for these input types only; give --bm --bn --bk --a "
                        "(and --dtype) to run one spec of another type", ", ".join(TUNABLE_DTYPES))


def default_spec(dtype: str, arch: str) -> TileSpec:
    check_tunable(dtype)
    return candidates(dtype, arch)[1]  # 128 x 256 (128 for e4m3: 128 x 256 x 128), persistent, group 8


def load_table(path: str | None = None, device: Device | None = None) -> list[dict]:
    """The shipped table of ``device`` (ptxgen/tuning/<device>.json, else the reference device's), or the file named
    by ``path`` or $PTXGEN_TUNING."""
    import os

    path = path or os.environ.get("PTXGEN_TUNING")
    name = table_name(device) if device is not None else TABLE
    text = Path(path).read_text() if path else resources.files("ptxgen.tuning").joinpath(name).read_text()
    return json.loads(text)["entries"]


class TuningTableError(SettingError):
    """The tuning table named in $PTXGEN_TUNING cannot be used (the same error in ``ptxgen bench`` and ``ptxgen.gemm``)."""


def entry_problem(e) -> str | None:
    if not isinstance(e, dict):
        return f"an entry is a {type(e).__name__}, not an object"
    if not (isinstance(e.get("dtype"), str) and isinstance(e.get("arch"), str) and isinstance(e.get("spec"), dict)):
        return "every entry needs dtype, arch (text) and spec (an object)"
    if not all(type(e.get(d)) is int and e[d] >= 1 for d in "mnk"):
        return "every entry needs m, n, k (positive integers): the shape it was tuned for"
    return None


def table_entries(table: list[dict] | None = None, device: Device | None = None) -> list[dict]:
    """``table``, else the tuning table's entries: [] when the shipped table cannot be read, TuningTableError when the
    table the user named in $PTXGEN_TUNING cannot (a named table must be there: a silent default benchmarks the wrong
    kernel)."""
    import os

    if table is not None:
        return table
    try:
        entries = load_table(device=device)
        if not isinstance(entries, list):
            raise TypeError("'entries' must be a list")
        for e in entries:
            why = entry_problem(e)
            if why:
                raise KeyError(why)
        return entries
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as e:
        if os.environ.get("PTXGEN_TUNING"):
            raise TuningTableError(f"PTXGEN_TUNING={os.environ['PTXGEN_TUNING']}: not a readable tuning table "
                                   f"({type(e).__name__}: {e})") from None
        return []


def tune_shape(dtype: str, arch: str, m: int, n: int, k: int, rounds: int = 20, log=print) -> dict:
    """Bench every candidate for one shape (same process, alternating with cuBLAS); the best by ratio."""
    from ..bench import bench_spec
    from ..gpu import CudaError

    results = []
    for spec in candidates(dtype, arch):
        try:
            r = bench_spec(spec, m, n, k, warmup=3, iters=rounds)
        except CudaError as e:  # the context is lost (a sticky error): nothing after this can run here
            log(f"  STOP at {spec.kernel_name}: {e}")
            break
        except Exception as e:  # noqa: BLE001 - a candidate that cannot run this shape is skipped
            log(f"  skip {spec.kernel_name}: {e}")
            continue
        log(f"  {r.line()}")
        if r.checked_ok:
            results.append((r.ratio, spec, r))
    ratio, spec, r = max(results, key=lambda x: x[0])
    return {"dtype": dtype, "arch": arch, "m": m, "n": n, "k": k, "spec": spec.to_json(), "kernel": spec.kernel_name,
            "ratio": round(ratio, 4), "ours_tflops": round(r.ours_tflops, 1), "cublas_tflops": round(r.cublas_tflops, 1)}
