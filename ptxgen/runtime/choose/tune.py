"""``ptxgen tune``: search a bounded space of kernels for a shape on the GPU; the table of winners ships
with the package (ptxgen/tuning/<device>.json), and ``ptxgen bench`` / ``ptxgen.gemm`` pick from it.

The table maps (dtype, arch, M, N, K) to a spec; which kernel runs a shape that is not in it is decided in
``ptxgen.runtime.choose.walk``.
"""

from __future__ import annotations

import dataclasses
import json
from importlib import resources

from ...derive.tile.spec import TileSpec, make_spec
from ...isa.types import Epilogue, SpecError
from ...outputs import read_text
from ...status import SettingError, shown
from .calibration import table_name
from .choice import Device

TABLE = "h200.json"  # the reference device's table (calibration.REFERENCE); each device's: calibration.table_name

# The search space, per input type: tile, stages, schedule, raster group (A and B K-major, as torch lays them out).
_TILES = {
    "16bit": [(128, 256, 64, 4), (128, 256, 64, 3), (128, 128, 64, 6), (256, 128, 64, 4), (128, 192, 64, 5)],
    "e4m3": [(128, 256, 128, 4), (128, 128, 128, 6), (256, 128, 128, 4)],
}
_SCHEDULES = [("tile", 8), ("persistent", 8), ("persistent", 16), ("persistent", 4)]
# ping-pong consumer warpgroups (persistent only): tile, stages. e4m3 128 x 160 / 128 x 192 (legal since 2026-12-07, the
# setmaxnreg budget): N of 640-1024 in fewer, wider tiles, the few-wave class no other tile reaches cuBLAS in
_PINGPONG = {"16bit": [(128, 128, 64, 6), (64, 256, 64, 5), (128, 128, 64, 5)],
             "e4m3": [(128, 128, 128, 5), (128, 160, 128, 4), (128, 192, 128, 4)]}


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
    """The entries of the shipped table of ``device`` (ptxgen/tuning/<device>.json, else the reference device's), or of
    the file named by ``path`` or $PTXGEN_TUNING (read as they are: see :func:`table_problem` for the checks)."""
    import os

    path = path or os.environ.get("PTXGEN_TUNING")
    name = table_name(device) if device is not None else TABLE
    text = read_text(path) if path else resources.files("ptxgen.tuning").joinpath(name).read_text()
    doc = json.loads(text)
    if not isinstance(doc, dict):
        raise TypeError(f"a tuning table is a JSON object with 'entries', not a {type(doc).__name__}")
    unknown = sorted(map(str, set(doc) - TABLE_KEYS))
    if unknown:
        raise KeyError(f"unknown key(s) {shown(unknown)}: a tuning table has {', '.join(sorted(TABLE_KEYS))}")
    return doc["entries"]


class TuningTableError(SettingError):
    """The tuning table named in $PTXGEN_TUNING cannot be used (the same error in ``ptxgen bench`` and ``ptxgen.gemm``)."""


TABLE_KEYS = frozenset({"device", "entries"})
ENTRY_KEYS = frozenset({"dtype", "arch", "m", "n", "k", "spec", "kernel", "ratio", "ours_tflops", "cublas_tflops"})
_NUMBERS = ("ratio", "ours_tflops", "cublas_tflops")  # what tune measured: numbers where present


def entry_problem(e) -> str | None:
    """Why a tuning table entry cannot be used (None: it can): its keys, the shape, the spec (legal, of the entry's
    input type and arch, of the kernel it names), the measured numbers."""
    if not isinstance(e, dict):
        return f"an entry is a {type(e).__name__}, not an object"
    unknown = sorted(map(str, set(e) - ENTRY_KEYS))
    if unknown:
        return f"unknown key(s) {shown(unknown)}; an entry has {', '.join(sorted(ENTRY_KEYS))}"
    if not (isinstance(e.get("dtype"), str) and isinstance(e.get("arch"), str) and isinstance(e.get("spec"), dict)):
        return "every entry needs dtype, arch (text) and spec (an object)"
    if not all(type(e.get(d)) is int and e[d] >= 1 for d in "mnk"):
        return "every entry needs m, n, k (positive integers): the shape it was tuned for"
    if e["dtype"] not in TUNABLE_DTYPES:
        return f"dtype {shown(e['dtype'])}: the chooser has kernels for {', '.join(TUNABLE_DTYPES)} only"
    try:
        spec = TileSpec.from_json(e["spec"])
    except (SpecError, ValueError, TypeError) as x:
        return f"its spec is illegal: {shown(x, 400)}"
    if (spec.dtype.value, spec.arch.value) != (e["dtype"], e["arch"]):
        return (f"its spec is a {spec.dtype.value} kernel for {spec.arch.value}, but the entry says dtype "
                f"{shown(e['dtype'])}, arch {shown(e['arch'])}")
    if "kernel" in e and e["kernel"] != spec.kernel_name:
        return f"'kernel' {shown(e['kernel'])} is not its spec's kernel {spec.kernel_name}"
    bad = [x for x in _NUMBERS if x in e and (type(e[x]) not in (int, float) or e[x] != e[x])]
    if bad:
        return f"{', '.join(bad)} must be numbers"
    return None


def table_problem(entries) -> str | None:
    """Why a table's entries cannot be used (None: they can): every entry checked (:func:`entry_problem`), and no shape
    twice for one input type and arch."""
    if not isinstance(entries, list):
        return "'entries' must be a list"
    seen = set()
    for i, e in enumerate(entries):
        why = entry_problem(e)
        if why:
            return f"entries[{i}]: {why}"
        key = (e["dtype"], e["arch"], e["m"], e["n"], e["k"])
        if key in seen:
            return f"entries[{i}]: a second entry for {e['dtype']} {e['arch']} {e['m']}x{e['n']}x{e['k']}"
        seen.add(key)
    return None


_checked: dict = {}  # (path, size, mtime, inode) -> the entries of a table that passed table_problem


def table_entries(table: list[dict] | None = None, device: Device | None = None) -> list[dict]:
    """``table`` (ValueError if :func:`table_problem` finds one), else the tuning table's entries (``device``'s shipped one, or $PTXGEN_TUNING's), checked whole before
    any is used: TuningTableError when the table the user named in $PTXGEN_TUNING cannot be read or has a problem (a
    named table must be there and right: a silent default benchmarks the wrong kernel); [] when the shipped table cannot
    be read (tests/test_hostile_faults.py checks that it passes)."""
    import os

    if table is not None:
        why = table_problem(table)
        if why:
            raise ValueError(f"tuning table: {why}")
        return table
    named = os.environ.get("PTXGEN_TUNING")
    try:
        st = os.stat(named) if named else None
        key = (named, st.st_size, st.st_mtime_ns, st.st_ino) if st else ("shipped", table_name(device) if device else TABLE)
        if key in _checked:
            return _checked[key]
        entries = load_table(device=device)
    except (OSError, ValueError, KeyError, TypeError) as e:
        if named:
            why = e.args[0] if isinstance(e, KeyError) and e.args else e
            raise TuningTableError(f"PTXGEN_TUNING={shown(named)}: not a readable tuning table ({type(e).__name__}: "
                                   f"{shown(why, 600)})") from None
        return []
    why = table_problem(entries)
    if why:
        if named:
            raise TuningTableError(f"PTXGEN_TUNING={shown(named)}: not a usable tuning table: {shown(why, 600)}")
        return []
    _checked[key] = entries
    return entries


def tune_shape(dtype: str, arch: str, m: int, n: int, k: int, rounds: int = 20, log=print) -> dict:
    """Bench every candidate for one shape (same process, alternating with cuBLAS); the best by ratio."""
    from ..check.bench import bench_spec
    from ..launch.gpu import CudaError

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
