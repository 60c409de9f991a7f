"""Calibrations: the cost model's measured constants for one device, keyed by it (``choice.Device``), and which one the
chooser uses.

A calibration is a JSON document (format ``CALIBRATION_FORMAT``)::

    {"format": "ptxgen-calibration/1", "device": {name, sm_count, clock_mhz, memory_clock_mhz, memory_bus_bits,
     memory_gib}, "source": "...", "families": {"16bit": FAMILY, "e4m3": FAMILY}}

with FAMILY = {"dtype": family, "arch": "sm_90a", "sm_count": ..., "source": ..., "kernels": {name: {launch_us, tile_us,
ktile_us, off_sector, bandwidth_tbps, slots_per_sm, points}}, "swap": {launch_us, tile_us, ktile_us, ...} (optional)}.

Where they come from, first found first: ``ptxgen tune --calibrate`` writes one per device into the cache folder
(``ptxgen.cachedir``, ``calibration/<device stem>.json``); ptxgen ships some (``ptxgen/tuning/<slug>_calibration.json``).
``calibration_for(device)``: the cached calibration of exactly that device, else a shipped one of the same name, else
the nearest shipped one (SM count, clocks, memory), with one warning per device name. Without a device (a CPU, or a
caller that does not say): ``REFERENCE``, the calibration the shipped rules were measured with.
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

from ... import cachedir
from .candidates import BY_NAME
from .choice import Device

CALIBRATION_FORMAT = "ptxgen-calibration/1"
SHIPPED_SUFFIX = "_calibration.json"
REFERENCE = "h200"  # the shipped calibration used without a device: the rules were measured on an H200
CACHE_SUBDIR = "calibration"


@dataclass(frozen=True)
class Costs:
    """One kernel's measured constants (microseconds; bandwidth in TB/s = bytes per microsecond / 1e6)."""

    launch_us: float
    tile_us: float  # per tile and round: the pipeline's fill, the epilogue not hidden behind the next tile
    ktile_us: float  # per K-tile of one tile, steady state, rows on a 32-byte sector
    off_sector: float = 1.0  # factor on ktile_us when A's or B's rows start off a 32-byte sector
    bandwidth_tbps: float = 3.5
    slots_per_sm: int = 1


@dataclass(frozen=True)
class Family:
    """One input family's constants (``16bit`` or ``e4m3``) on one arch."""

    arch: str
    kernels: dict[str, Costs] = field(hash=False)
    swap: Costs | None = None  # the swapped 128 x BN' family (cost-model+swap-ab), where it was measured
    doc: dict = field(default_factory=dict, hash=False, compare=False)  # the family's JSON as read


@dataclass(frozen=True)
class Calibration:
    device: Device
    families: dict[str, Family] = field(hash=False)
    source: str = ""  # where it was read from (a shipped file, a cache file) or how it was made


def parse_kernels(doc: dict, known=None) -> dict[str, Costs]:
    """The ``kernels`` object of a family: name -> Costs (with ``known``, names not in it are left out)."""
    out = {}
    for name, d in doc.get("kernels", {}).items():
        if known is None or name in known:
            out[name] = Costs(float(d["launch_us"]), float(d["tile_us"]), float(d["ktile_us"]), float(d.get("off_sector", 1.0)),
                              float(d.get("bandwidth_tbps", 3.5)), int(d.get("slots_per_sm", 1)))
    return out


def parse_swap(doc: dict) -> Costs | None:
    d = doc.get("swap")
    return Costs(float(d["launch_us"]), float(d["tile_us"]), float(d["ktile_us"])) if isinstance(d, dict) else None


def parse(doc: dict, source: str = "", known=None) -> Calibration:
    """A calibration document -> Calibration (ValueError, KeyError or TypeError where it is not one)."""
    if doc.get("format") != CALIBRATION_FORMAT:
        raise ValueError(f"not a {CALIBRATION_FORMAT} document (format {doc.get('format')!r})")
    fams = {name: Family(str(f["arch"]), parse_kernels(f, known), parse_swap(f), f) for name, f in doc["families"].items()}
    return Calibration(Device.from_json(doc["device"]), fams, source or str(doc.get("source", "")))


def to_doc(device: Device, families: dict[str, dict], source: str) -> dict:
    """The document of a calibration from its families' JSON objects (as ``fit.fit_family`` returns them)."""
    return {"format": CALIBRATION_FORMAT, "device": device.to_json(), "source": source, "families": families}


def _known() -> set[str]:
    return set(BY_NAME)


@lru_cache(maxsize=1)
def shipped() -> dict[str, Calibration]:
    """The calibrations shipped in ptxgen/tuning, by slug ("h200"); an unreadable one is left out."""
    out = {}
    for entry in resources.files("ptxgen.tuning").iterdir():
        if entry.name.endswith(SHIPPED_SUFFIX):
            try:
                out[entry.name[: -len(SHIPPED_SUFFIX)]] = parse(json.loads(entry.read_text()), f"ptxgen/tuning/{entry.name}",
                                                                _known())
            except (OSError, ValueError, KeyError, TypeError):
                continue
    return out


def cache_path(device: Device) -> Path:
    return cachedir.cache_dir() / CACHE_SUBDIR / f"{device.stem}.json"


def cached(device: Device) -> Calibration | None:
    """The calibration ``ptxgen tune --calibrate`` wrote for exactly this device, or None (none, unreadable, caches off)."""
    path = cache_path(device)
    if not cachedir.enabled() or not path.is_file():
        return None
    try:
        cal = parse(json.loads(path.read_text()), str(path), _known())
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return cal if cal.device == device else None


def distance(a: Device, b: Device) -> float:
    """How unlike two devices are: the sum of |log ratio| of SM count, SM clock and memory bandwidth (clock x bus
    width); a term either side does not know counts nothing."""
    terms = [(a.sm_count, b.sm_count), (a.clock_mhz, b.clock_mhz),
             (a.memory_clock_mhz * a.memory_bus_bits, b.memory_clock_mhz * b.memory_bus_bits)]
    return sum(abs(math.log(x / y)) for x, y in terms if x > 0 and y > 0)


def nearest(device: Device, among: dict[str, Calibration]) -> Calibration:
    """Of ``among`` (non-empty), the calibration of the device least unlike ``device`` (ties: by slug)."""
    return min(sorted(among.items()), key=lambda kv: distance(device, kv[1].device))[1]


_WARNED: set[str] = set()


def calibration_for(device: Device | None) -> Calibration:
    """The calibration the chooser uses on ``device`` (see the module's docstring); None: the reference one."""
    ships = shipped()
    if device is None:
        return ships[REFERENCE]
    own = cached(device)
    if own is not None:
        return own
    same = [c for c in ships.values() if c.device.name == device.name]
    if same:
        return min(same, key=lambda c: distance(device, c.device))
    near = nearest(device, ships)
    if device.name not in _WARNED:
        _WARNED.add(device.name)
        warnings.warn(f"ptxgen: no calibration for {device.name} ({device.sm_count} SMs): the chooser uses the nearest "
                      f"shipped one, {near.device.name} ({near.source}); `ptxgen tune --calibrate` measures this GPU",
                      stacklevel=3)
    return near


def table_name(device: Device | None) -> str:
    """The tuning table of a device: ptxgen/tuning/<slug>.json where one ships, else the reference device's."""
    if device is not None and resources.files("ptxgen.tuning").joinpath(f"{device.slug}.json").is_file():
        return f"{device.slug}.json"
    return f"{REFERENCE}.json"
