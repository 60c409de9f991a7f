import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

# The tests compile hundreds of kernels: their cubins go to a cache of their own (kept between runs on this
# machine, inherited by the CLI subprocesses), not into the user's ~/.cache/ptxgen. PTXGEN_CACHE_DIR wins.
os.environ.setdefault("PTXGEN_CACHE_DIR", str(Path(os.environ.get("TMPDIR", "/tmp")) / "ptxgen-test-cache"))


def _gpu_reason():
    try:
        from ptxgen.runtime.launch.gpu import NoGPU, require_gpu

        dev = require_gpu()
        return None, dev
    except NoGPU as e:
        return str(e), None
    except Exception as e:  # noqa: BLE001
        return f"GPU unusable: {e}", None


def pytest_collection_modifyitems(config, items):
    gpu_items = [i for i in items if "gpu" in i.keywords]
    if gpu_items:
        reason, _ = _gpu_reason()
        if reason:
            for item in gpu_items:
                item.add_marker(pytest.mark.skip(reason=f"no GPU: {reason}"))
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    for item in items:
        if "browser" in item.keywords and not chromium:
            item.add_marker(pytest.mark.skip(reason="headless Chromium not installed"))


@pytest.fixture(scope="session")
def gpu():
    reason, dev = _gpu_reason()
    if reason:
        pytest.skip(reason)
    return dev


@pytest.fixture(scope="session")
def artifact_dir():
    """Where GPU tests leave their logs and reports ($PTXGEN_ARTIFACTS, else a temp folder)."""
    d = Path(os.environ.get("PTXGEN_ARTIFACTS") or (Path(os.environ.get("TMPDIR", "/tmp")) / "ptxgen-artifacts"))
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.fixture(scope="module")
def torch_cuda(gpu):
    """torch, where it sees the GPU the ``gpu`` fixture found (the gpu tests that call ptxgen on torch tensors)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    return torch


def use_reference_chooser() -> None:
    """The door's chooser as the shipped rules were measured (the H200 reference calibration, tables and SM count),
    whatever GPU runs the test: the device's own calibration may pick another kernel (on an H100 it does for some of
    these shapes), and a test of one pick's kernel must get that pick."""
    from ptxgen.runtime.choose import calibrate

    calibrate.current_device = lambda dev=None: None


@pytest.fixture
def reference_chooser(monkeypatch):
    """:func:`use_reference_chooser` for one test."""
    from ptxgen.runtime.choose import calibrate

    monkeypatch.setattr(calibrate, "current_device", lambda dev=None: None)
