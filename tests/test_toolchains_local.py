"""Where ptxgen finds the CUDA binary tools (cuobjdump, nvdisasm): a PyPI wheel first, else a CUDA toolkit on PATH or
under $CUDA_HOME / $CUDA_PATH / /usr/local/cuda (the H200 image has nvcc 13.0's tools and no wheel)."""

import os
import stat

import pytest

from ptxgen.runtime.compile import toolchain


@pytest.fixture
def no_wheels(monkeypatch):
    monkeypatch.setattr(toolchain, "_find", lambda rel_paths: None)
    toolchain.tool.cache_clear()
    yield
    toolchain.tool.cache_clear()


def _fake_tool(folder, name="cuobjdump"):
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    p.write_text("#!/bin/sh\nexit 0\n")
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return p


def test_a_toolkit_on_path_is_found_when_no_wheel_has_the_tool(no_wheels, monkeypatch, tmp_path):
    p = _fake_tool(tmp_path / "bin")
    monkeypatch.setenv("PATH", str(tmp_path / "bin") + os.pathsep + os.environ.get("PATH", ""))
    assert toolchain.tool("cuobjdump") == p


def test_cuda_home_is_searched_and_without_any_tool_the_error_says_what_to_install(no_wheels, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(toolchain.Path, "is_file", lambda self: str(self).startswith(str(tmp_path)) and os.path.isfile(self))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    with pytest.raises(toolchain.ToolchainError, match="pip install nvidia-cuda-cuobjdump"):  # control: nothing there
        toolchain.tool("cuobjdump")
    toolchain.tool.cache_clear()
    p = _fake_tool(tmp_path / "cuda" / "bin")
    assert toolchain.tool("cuobjdump") == p
