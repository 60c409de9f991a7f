"""L2 under every supported CUDA, not only the pinned NVRTC (issue 19): a sample of the checked-in kernels compiled
by the oldest supported NVRTC (CUDA 12.8, from PyPI) through the same SASS gate as `ptxgen build`: the intended
MMA instructions, no local memory. CUDA 12.8 to 13.0 put the direct epilogue's tail buffer on the stack (36-72
LDL/STL per sm_100a kernel) where the pinned 13.5 kept it in registers, so the pinned compiler alone cannot see it.

The toolchains come from `tools/toolchain_matrix.py --install DIR` (pip wheels) named by $PTXGEN_TOOLCHAINS; .ci/run
installs the oldest. Without them the test skips, except under CI, where a missing toolchain is a failure."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from ptxgen.derive.tile.spec import TileSpec
from ptxgen.emit.generated import kernel_dirs, read_layout_json
from ptxgen.runtime.compile import toolchains

ROOT = Path(__file__).resolve().parents[1]
# One of each kind: the seed (direct epilogue, tile schedule), persistent TMA-store, the 8-bit kind, tf32 M=64,
# and a Hopper kernel.
SAMPLE = (
    "ptxgen_sm100a_f16_f32_128x128x32_s2_a_k_sw64_ok_b_mn_sw128_omn",
    "ptxgen_sm100a_bf16_f32_obf16_128x256x64_s3_a_k_sw128_ok_b_k_sw128_ok_persistent_g16_tmastore",
    "ptxgen_sm100a_e4m3_f32_128x128x128_s2_a_k_sw128_ok_b_mn_sw64_omn",
    "ptxgen_sm100a_tf32_f32_64x128x32_s2_a_k_sw128_ok_b_mn_sw128b32_omn",
    "ptxgen_sm90a_bf16_f32_obf16_128x128x64_s5_a_k_sw128_ok_b_k_sw128_ok_persistent_g16_pingpong_tmastore",
)


def _oldest():
    for tc in toolchains.installed():
        if tc.name == toolchains.OLDEST:
            return tc
    if os.environ.get("CI"):
        pytest.fail(f"CI must install the oldest supported NVRTC ({toolchains.WHEELS[toolchains.OLDEST]}) under ${toolchains.ENV}")
    pytest.skip(f"NVRTC {toolchains.OLDEST} not installed: tools/toolchain_matrix.py --install DIR, then {toolchains.ENV}=DIR")


def test_the_sample_is_checked_in():
    names = {d.name for d in kernel_dirs(ROOT / "generated")}
    assert set(SAMPLE) <= names


@pytest.mark.slow
def test_oldest_toolchain_passes_the_sass_gate(tmp_path):
    tc = _oldest()
    specs = [TileSpec.from_json(read_layout_json(ROOT / "generated" / n)["spec"]) for n in SAMPLE]
    results = toolchains.compile_and_check(tc, specs, tmp_path)
    assert [r.version for r in results] == [toolchains.OLDEST] * len(SAMPLE)
    bad = {r.kernel: r.problems for r in results if r.problems}
    assert bad == {}
    assert all(r.local_instructions == 0 and r.stack_bytes == 0 for r in results)


@pytest.mark.slow
def test_the_gate_sees_local_memory_from_a_runtime_indexed_array(tmp_path):
    """Control: the pre-fix tail loop (a runtime trip count indexing the converted chunk) under the oldest NVRTC puts
    the chunk on the stack, and the gate says so."""
    tc = _oldest()
    from ptxgen.derive.tile.layout import derive
    from ptxgen.emit import render

    spec = TileSpec.from_json(read_layout_json(ROOT / "generated" / SAMPLE[0])["spec"])
    cu = render.render_kernel(derive(spec))
    tail = "if (col + i < N) d_row[col + i] = v[i];"
    assert tail in cu
    bad = re.sub(r"#pragma unroll\n\s*for \(int i = 0; i < 32; \+\+i\) " + re.escape(tail),
                 "for (int i = 0; i < 32 && col + i < N; ++i) d_row[col + i] = v[i];", cu)
    assert bad != cu
    src = tmp_path / "bad"
    src.mkdir()
    results = toolchains.compile_and_check(tc, [spec], src, sources={spec.kernel_name: bad})
    assert results[0].local_instructions > 0 and any("local" in p for p in results[0].problems)
