"""Calibration per device (ptxgen.runtime.choose.calibration, .calibrate, .fit) on a CPU: the fit against a simulated
device of known speeds, the shipped H200 calibration against the committed H200 logs, which calibration a device gets,
and ``ptxgen tune --calibrate``'s exit codes and files. The gpu test at the end measures a real device."""

import json
import math
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

from ptxgen.runtime.choose import Device, Problem, calibrate, calibration, choose
from ptxgen.runtime.choose import costmodel as cm
from ptxgen.runtime.choose.fit import fit_family, fit_swap

ROOT = Path(__file__).resolve().parent.parent


# -- a simulated device: its own arithmetic (not costmodel's), known constants per kernel ----------------------------
class SimDevice:
    """Kernel times from first principles: tiles of BM x BN (2x1 clusters pair rows of tiles), ceil(tiles / SMs)
    rounds, ceil(K bytes / 128) K-tiles, rows off a 32-byte sector slower by a factor; never below the bytes over the
    bandwidth. Every kernel gets its own constants (launch, per tile, per K-tile, off-sector)."""

    def __init__(self, sm_count: int, bandwidth_tbps: float = 6.0):
        self.sm_count, self.bw = sm_count, bandwidth_tbps
        self.truth = {}
        for i, c in enumerate(cm.CANDIDATES):
            self.truth[c.name] = (3.0 + 0.25 * i, 0.5 + 0.1 * (i % 7), 0.3 + 0.02 * i + 0.01 * (c.bm * c.bn // 8192),
                                  1.05 + 0.03 * (i % 5))
        self.swap_truth = (11.0, 6.0, 0.45)

    def __call__(self, p):
        eb = 1 if p.family == "e4m3" else 2
        kt = math.ceil(p.k * eb / 128)
        if p.swap_bn:
            ctas = math.ceil(p.n / 128) * math.ceil(p.m / p.swap_bn)
            launch, tile, ktile = self.swap_truth
            t = launch + math.ceil(ctas / self.sm_count) * (tile + kt * ktile * p.swap_bn / 192)
            return t, 1.0
        c = cm.BY_NAME[p.cand]
        launch, tile, ktile, off = self.truth[p.cand]
        if p.family == "e4m3":
            ktile *= 0.8  # FP8's own speeds: the fit of each family must find its own
        rows = math.ceil(math.ceil(p.m / c.bm) / c.cluster_m) * c.cluster_m
        tiles = rows * math.ceil(p.n / c.bn)
        factor = off if (p.k * eb) % 32 else 1.0
        t = launch + math.ceil(tiles / self.sm_count) * (tile + kt * ktile * factor)
        nbytes = eb * (p.m * p.k + p.n * p.k) + 2 * p.m * p.n
        t = max(t, nbytes / (self.bw * 1e6))
        return t, nbytes / t / 1e6


def _sim_calibration(sim, budget_s=1e9, clock=None):
    dev = Device("Simulated H100 PCIe", sim.sm_count, 1755, 1593, 5120, 79)
    return dev, calibrate.calibrate(dev, sim, budget_s, **({"clock": clock} if clock else {}))


def test_a_simulated_device_of_known_speeds_is_recovered():
    sim = SimDevice(sm_count=114)
    dev, doc = _sim_calibration(sim)
    cal = calibration.parse(doc, known=cm.BY_NAME)
    assert cal.device == dev and set(cal.families) == {"16bit", "e4m3"}
    for fam, scale in (("16bit", 1.0), ("e4m3", 0.8)):
        got = cal.families[fam].kernels
        assert set(got) == set(calibration.shipped()["h200"].families[fam].kernels)  # every kernel measured and fitted
        for name, c in got.items():
            launch, tile, ktile, off = sim.truth[name]
            assert c.launch_us == pytest.approx(launch, abs=0.02), (fam, name)
            assert c.tile_us == pytest.approx(tile, abs=0.002), (fam, name)
            assert c.ktile_us == pytest.approx(ktile * scale, abs=2e-4), (fam, name)
            assert c.off_sector == pytest.approx(off, abs=2e-3), (fam, name)
    sw = cal.families["16bit"].swap
    assert (sw.launch_us, sw.tile_us, sw.ktile_us) == pytest.approx(sim.swap_truth, abs=2e-3)
    assert cal.families["e4m3"].swap is None  # the reference has no e4m3 swap family: not measured
    assert doc["families"]["16bit"]["sm_count"] == 114


def test_control_the_fit_with_another_sm_count_does_not_recover_them():
    """The same simulated times read on 132 SMs (the H200's) give other constants: the device's SM count matters."""
    sim = SimDevice(sm_count=114)
    measured, _ = calibrate.measure(calibrate.plan(("16bit",)), sim)
    wrong = fit_family([p for p in measured if "swap_bn" not in p], 132)["kernels"]
    off = [n for n, c in wrong.items() if abs(c["ktile_us"] - sim.truth[n][2]) > 2e-4 or abs(c["tile_us"] - sim.truth[n][1]) > 2e-3]
    assert len(off) >= len(wrong) // 2


def test_the_budget_bounds_the_measurement_and_thin_kernels_are_left_out():
    ticks = iter(range(10**6))
    sim = SimDevice(sm_count=132)
    _, doc = _sim_calibration(sim, budget_s=40, clock=lambda: next(ticks))  # one second a point: ~40 points
    measured = sum(k["points"] for f in doc["families"].values() for k in f["kernels"].values())
    assert 0 < measured <= 41 and "left by the budget" in doc["source"]
    kernels = doc["families"]["16bit"]["kernels"]
    assert 0 < len(kernels) < len(cm.CANDIDATES)  # round-robin: the kernels reached 3 points first are fitted


def test_the_shipped_h200_calibration_is_the_fit_of_the_committed_h200_logs():
    """Same numbers: the package's fit of the logs the H200 tables were fitted from gives the shipped calibration."""
    def points(*paths):
        out = []
        for path in paths:
            for line in (ROOT / path).read_text().splitlines():
                d = json.loads(line)
                if "ours_us" in d and d.get("ok") and d.get("cand") in cm.BY_NAME:
                    out.append(d)
        return out

    h200 = calibration.shipped()["h200"]
    assert h200.device == Device("NVIDIA H200", 132)
    fam16 = fit_family(points("runs/2026-12-01-cost-model/run1_cal.jsonl", "runs/2026-12-01-cost-model/run3_cal2.jsonl"), 132)
    fam8 = fit_family(points("runs/2026-12-01-fp8-shapes/run1/cal_e4m3.jsonl"), 132)
    assert fam16["kernels"] == h200.families["16bit"].doc["kernels"]
    assert fam8["kernels"] == h200.families["e4m3"].doc["kernels"]
    swap = [json.loads(x) for x in (ROOT / "runs/2026-12-01-swap-waves/run1/swap.jsonl").read_text().splitlines()]
    named = {(333, 8192, 8192)}  # the named shape the swap fit left out (tools/exp_cost.py _named)
    swap = [dict(d, swap_bn=int(d["kernel"].split("_obf16_")[1].split("x")[1])) for d in swap
            if d.get("swap_ab") and "ours_us" in d and (d["m"], d["n"], d["k"]) not in named]
    got = fit_swap(swap, 132)
    want = h200.families["16bit"].doc["swap"]
    assert {f: got[f] for f in ("launch_us", "tile_us", "ktile_us", "points")} == {f: want[f] for f in ("launch_us", "tile_us", "ktile_us", "points")}


def test_every_planned_point_has_a_kernel_and_the_plan_is_the_calibration_shapes():
    """The plan names legal specs (the swapped ones M-major, of the planned BN'), none on a named or held-out shape."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from heldout_shapes import heldout30, heldout_shapes
    finally:
        sys.path.pop(0)
    pts = calibrate.plan()
    held = set(heldout_shapes()) | set(heldout30())
    assert pts and not {(p.m, p.n, p.k) for p in pts} & held
    for p in pts:
        spec = calibrate.point_spec(p)
        assert spec is not None, p
        if p.swap_bn:
            assert (spec.bm, spec.bn, spec.d_major.value) == (128, p.swap_bn, "m")
        else:
            assert (spec.bm, spec.bn) == (cm.BY_NAME[p.cand].bm, cm.BY_NAME[p.cand].bn)
    assert {p.family for p in pts} == {"16bit", "e4m3"} and all(p.family == "16bit" for p in pts if p.swap_bn)


def test_precompile_puts_the_kernels_in_the_cache(tmp_path, monkeypatch):
    """Compiled in a worker process (NVRTC, no GPU), then found in the kernel cache by the same key."""
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.cache import cache_key, load

    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("PTXGEN_NO_CACHE", raising=False)
    point = calibrate.Point("16bit", "t128x192", 3072, 6144, 2048)
    spec = calibrate.point_spec(point)
    key = cache_key(render_kernel(plan_kernel(spec)), spec.arch.value, ())
    assert load(key, tmp_path) is None  # control: not there before
    calibrate.precompile([point], jobs=1)
    assert load(key, tmp_path) is not None


# -- which calibration a device gets --------------------------------------------------------------------------------
@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("PTXGEN_NO_CACHE", raising=False)
    monkeypatch.setattr(calibration, "_WARNED", set())
    return tmp_path


def test_no_device_is_the_reference_and_the_same_name_gets_the_shipped_one(cache):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert calibration.calibration_for(None).device.name == "NVIDIA H200"
        other_clocks = Device("NVIDIA H200", 132, 1980, 3201, 6144, 140)
        assert calibration.calibration_for(other_clocks) is calibration.shipped()["h200"]


def test_an_unknown_device_gets_the_nearest_shipped_one_with_one_warning(cache, monkeypatch):
    h200 = calibration.shipped()["h200"]
    small = calibration.Calibration(Device("Small GPU", 66, 1500), h200.families, "synthetic")
    monkeypatch.setattr(calibration, "shipped", lambda: {"h200": h200, "small": small})
    dev = Device("NVIDIA H100 PCIe", 114, 1755)
    with pytest.warns(UserWarning, match="nearest shipped one, NVIDIA H200"):
        assert calibration.calibration_for(dev) is h200  # |log 114/132| < |log 114/66|
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per device name
        assert calibration.calibration_for(dev) is h200
    with pytest.warns(UserWarning, match="Small GPU"):  # control: a device nearer the other one gets that one
        assert calibration.calibration_for(Device("Tiny GPU", 70)) is small


def test_a_cached_calibration_of_exactly_this_device_wins(cache):
    sim = SimDevice(sm_count=114)
    dev, doc = _sim_calibration(sim)
    calibrate.write(doc, calibration.cache_path(dev))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = calibration.calibration_for(dev)
    assert got.source == str(calibration.cache_path(dev)) and got.families["16bit"].kernels["p128x256"].launch_us == pytest.approx(sim.truth["p128x256"][0], abs=0.02)
    other = Device(dev.name, dev.sm_count, dev.clock_mhz + 100, dev.memory_clock_mhz, dev.memory_bus_bits, dev.memory_gib)
    with pytest.warns(UserWarning):  # another clock: another key, so not this cache file
        assert calibration.calibration_for(other) is calibration.shipped()["h200"]


def test_caches_off_ignore_the_cached_calibration(cache, monkeypatch):
    dev, doc = _sim_calibration(SimDevice(sm_count=114))
    calibrate.write(doc, calibration.cache_path(dev))
    monkeypatch.setenv("PTXGEN_NO_CACHE", "1")
    with pytest.warns(UserWarning):
        assert calibration.calibration_for(dev) is calibration.shipped()["h200"]


def test_the_chooser_uses_the_devices_calibration_and_sm_count(cache):
    shape = (2500, 10000, 4000)
    ref = choose(Problem("bf16", "sm_90a", *shape))
    assert ref == choose("bf16", "sm_90a", *shape)  # the spelled-out form is the same problem with no device
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        h200 = choose(Problem("bf16", "sm_90a", *shape), Device("NVIDIA H200", 132))
    assert h200 == ref
    dev, doc = _sim_calibration(SimDevice(sm_count=114))
    calibrate.write(doc, calibration.cache_path(dev))
    mine = choose(Problem("bf16", "sm_90a", *shape), dev)
    assert "rounds of 114" in mine.why and mine.why != ref.why


def test_device_keys_and_file_names():
    d = Device("NVIDIA H100 80GB HBM3", 132, 1980, 2619, 5120, 79)
    assert d.slug == "h100-80gb-hbm3" and d.stem == "h100-80gb-hbm3-132sm-1980mhz-2619mhz-5120bit-79gib"
    assert Device.from_json(d.to_json()) == d and Device("NVIDIA H200", 132).slug == "h200"
    assert calibration.table_name(Device("NVIDIA H200", 132)) == "h200.json"
    assert calibration.table_name(Device("NVIDIA H20", 78)) == "h200.json"  # no table of its own: the reference's
    assert calibration.distance(d, d) == 0 and calibration.distance(d, Device("x", 66)) == pytest.approx(math.log(2))


# -- ptxgen tune --calibrate ----------------------------------------------------------------------------------------
def _main(argv):
    from ptxgen.cli import main

    return main(argv)


@pytest.mark.parametrize("argv", [["tune", "--calibrate", "--shapes", "8x8x8"], ["tune", "--calibrate", "--json", "t.json"],
                                  ["tune", "--out", "c.json"], ["tune", "--budget-s", "10"],
                                  ["tune", "--calibrate", "--budget-s", "301"], ["tune", "--calibrate", "--budget-s", "0"],
                                  ["tune", "--calibrate", "--out", "/nonexistent/folder/c.json"]])
def test_bad_flags_exit_2_before_any_gpu_work(argv, monkeypatch):
    monkeypatch.setattr(calibrate, "device_key", lambda: pytest.fail("the GPU was asked"))
    assert _main(argv) == 2


def test_no_gpu_exits_3(monkeypatch, capsys):
    from ptxgen.runtime.launch.gpu import NoGPU

    def none():
        raise NoGPU("no usable NVIDIA GPU (test)")

    monkeypatch.setattr(calibrate, "device_key", none)
    assert _main(["tune", "--calibrate"]) == 3
    assert "no usable NVIDIA GPU" in capsys.readouterr().err


def _fake_gpu(monkeypatch, dev, sim, arch="sm_90a"):
    from ptxgen.runtime.launch import gpu

    monkeypatch.setattr(calibrate, "device_key", lambda: dev)
    monkeypatch.setattr(calibrate, "gpu_timer", lambda iters=5: sim)
    compiled = []
    monkeypatch.setattr(calibrate, "precompile", lambda points, jobs=None, log=None: compiled.extend(points))
    monkeypatch.setattr(gpu, "require_gpu", lambda index=0: SimpleNamespace(arch=SimpleNamespace(value=arch), name=dev.name))
    return compiled


def test_calibrate_writes_the_cache_and_out_and_the_chooser_reads_it(cache, tmp_path, monkeypatch, capsys):
    sim = SimDevice(sm_count=114)
    dev = Device("Simulated H100 PCIe", 114, 1755, 1593, 5120, 79)
    compiled = _fake_gpu(monkeypatch, dev, sim)
    out = tmp_path / "h100_calibration.json"
    assert _main(["tune", "--calibrate", "--out", str(out)]) == 0
    assert compiled == calibrate.plan()  # every kernel compiled before the timing
    written = json.loads(out.read_text())
    assert written == json.loads(calibration.cache_path(dev).read_text())
    assert written["format"] == calibration.CALIBRATION_FORMAT and written["device"] == dev.to_json()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert calibration.calibration_for(dev).source == str(calibration.cache_path(dev))


def test_calibrate_on_another_arch_exits_3(cache, monkeypatch):
    _fake_gpu(monkeypatch, Device("NVIDIA B200", 148), SimDevice(148), arch="sm_100a")
    assert _main(["tune", "--calibrate"]) == 3


def test_calibrate_with_nothing_measured_exits_1(cache, monkeypatch):
    _fake_gpu(monkeypatch, Device("Broken GPU", 132), lambda p: None)
    assert _main(["tune", "--calibrate"]) == 1


# -- on the device (gpu tier) -----------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_calibrate_on_the_gpu_present(gpu, tmp_path):
    """``ptxgen tune --calibrate`` on the GPU: exit 0 within its budget (plus compile time), a calibration keyed by this
    device with both input families, at least 10 of the 16-bit kernels and the swapped family fitted."""
    import subprocess
    import time

    out = tmp_path / "cal.json"
    env = {**__import__("os").environ, "PTXGEN_CACHE_DIR": str(tmp_path / "cache")}
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "ptxgen", "tune", "--calibrate", "--out", str(out)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=900)
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(out.read_text())
    cal = calibration.parse(doc, known=cm.BY_NAME)
    assert cal.device.name == gpu.name and cal.device.sm_count == gpu.sm_count and set(cal.families) == {"16bit", "e4m3"}
    assert took < calibrate.BUDGET_S + 240  # the budget bounds the measuring; compiling the first kernels adds to it
    assert len(cal.families["16bit"].kernels) >= 10 and cal.families["16bit"].swap is not None


def test_current_device_asks_nothing_before_the_gpu_is_used_and_once_after(monkeypatch):
    from ptxgen.runtime.launch import gpu

    asked = []
    monkeypatch.setattr(calibrate, "_KEYS", {})
    monkeypatch.setattr(calibrate, "device_key", lambda dev=None: asked.append(dev.index) or Device(dev.name, dev.sm_count))
    monkeypatch.setattr(gpu, "_DEVICE", None)
    assert calibrate.current_device() is None and asked == []  # ptxgen.gemm before any GPU work: the reference
    h200 = SimpleNamespace(name="NVIDIA H200", sm_count=132, index=0)
    monkeypatch.setattr(gpu, "_DEVICE", h200)
    assert calibrate.current_device() == calibrate.current_device() == Device("NVIDIA H200", 132) and asked == [0]


def test_each_device_of_a_call_gets_its_own_key(monkeypatch):
    """A machine with two kinds of GPU: the call's device picks the calibration, each asked once."""
    asked = []
    monkeypatch.setattr(calibrate, "_KEYS", {})
    monkeypatch.setattr(calibrate, "device_key", lambda dev=None: asked.append(dev.index) or Device(dev.name, dev.sm_count))
    h200 = SimpleNamespace(name="NVIDIA H200", sm_count=132, index=0)
    h100 = SimpleNamespace(name="NVIDIA H100 PCIe", sm_count=114, index=1)
    assert calibrate.current_device(h100) == Device("NVIDIA H100 PCIe", 114)
    assert calibrate.current_device(h200) == Device("NVIDIA H200", 132)
    assert calibrate.current_device(h100) == Device("NVIDIA H100 PCIe", 114) and asked == [1, 0]
