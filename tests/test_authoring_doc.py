"""docs/authoring.md's tutorial runs: its python code blocks, in order, in one namespace (the last block launches the
kernel only where there is a GPU). The tutorial's kernel compiles with NVRTC and passes its SASS gate (L2)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "authoring.md"


def blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", DOC.read_text(), re.S | re.M)


def test_the_tutorial_has_its_steps():
    code = blocks()
    assert len(code) == 8 and "build(kernel)" in code[5] and "TEMPLATE" in code[4] and "resident=(q,)" in code[7]


def test_the_tutorial_runs(capsys):
    ns: dict = {}
    for i, code in enumerate(blocks()):
        exec(compile(code, f"{DOC.name} block {i + 1}", "exec"), ns)
    built = ns["built"]
    assert built.sass.ok and built.sass.counts == {"HGMMA": 4}
    out = capsys.readouterr().out
    assert "HGMMA (expected 4)" in out and "0x4000004000010000ull" in out


@pytest.mark.gpu
def test_the_tutorial_launches_and_matches_numpy(gpu):
    """L3 (H100/H200): step 7 on the GPU: the tutorial's kernel at M, N, K off its tile (200 x 300 x 136) against numpy
    (the block's own assertion), the launch having happened (the CPU test above skips it)."""
    ns: dict = {}
    for i, code in enumerate(blocks()):
        exec(compile(code, f"{DOC.name} block {i + 1}", "exec"), ns)
    assert ns["have_gpu"] and ns["got"].shape == (200, 300)
