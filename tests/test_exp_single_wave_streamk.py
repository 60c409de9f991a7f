"""tools/exp_single_wave_streamk.py on the CPU: its draw (no held-out shape), the pairs it times (the pick now against the
pick before stream-K over every SM), and its usage errors."""

import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parent.parent / "tools"
sys.path.insert(0, str(TOOLS))

import exp_single_wave_streamk as sw  # noqa: E402
from heldout_shapes import heldout30, heldout_shapes  # noqa: E402


def test_the_draw_is_seeded_and_few_tile():
    a, b = sw.drawn(), sw.drawn()
    assert a == b and len(a) == sw.DRAWS and a != sw.drawn(sw.SEED + 1)
    assert all(128 <= m <= 3072 and 128 <= n <= 3072 and k % 64 == 0 and 1024 <= k <= 16384 for m, n, k in a)
    assert not set(a) & (set(heldout_shapes()) | set(heldout30()))


def test_off_is_the_pick_before_the_change():
    from exp_candidates import device_for

    (shape, ks), = sw.plan(device_for("h100"), given=[("bf16", 285, 152, 10368)])
    on, off = ks
    assert shape == (285, 152, 10368) and on.spec.stream_k > 1 and off.spec.stream_k == 1
    assert sw.plan(device_for("h100"), given=[("bf16", 4096, 4096, 4096)]) == []  # control: the same pick is not timed


@pytest.mark.parametrize("bad", ["bogus", "bf16:1x2", "f32:1x2x3", "bf16:0x2x3"])
def test_a_malformed_shape_is_a_usage_error(bad):
    with pytest.raises(Exception, match="expected DTYPE:MxNxK"):
        sw.parse_given(bad)
    proc = subprocess.run([sys.executable, str(TOOLS / "exp_single_wave_streamk.py"), "--dry-run", "--no-compile",
                           "--shapes", bad], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "expected DTYPE:MxNxK" in proc.stderr
    assert sw.parse_given("bf16:1x2x3,e4m3:4x5x16") == [("bf16", 1, 2, 3), ("e4m3", 4, 5, 16)]  # control
