"""cp.async copies of 8 or 4 bytes (``copy_bytes``): operands whose rows start only 8- or 4-byte aligned are read
in place instead of packed (codegen tier: spec rules, rendering, NVRTC + SASS at L2, the argument checks, and
which arrays gemm routes to such a kernel)."""

from __future__ import annotations

import re

import pytest

import ptxgen
from ptxgen import api
from ptxgen.api.arrays import packing
from ptxgen.api.arrays.binding import ArrayInfo
from ptxgen.runtime.launch.arrays import read_array
from ptxgen.derive.tile.spec import TileSpec
from ptxgen.isa.types import SpecError
from ptxgen.runtime.launch.launch import Problem, problem_errors
from test_api import FakeArray, SimulatedGPU, _fresh, kmajor, read_params

NARROW = dict(bm=128, bn=128, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", out_dtype="bf16", stages=4,
              loader="cp.async", arch="sm_90a")


def test_spec_rules_and_names():
    s8 = ptxgen.make_spec(**NARROW, copy_bytes=8)
    assert s8.kernel_name.endswith("_cpasync8") and s8.to_json()["copy_bytes"] == 8 and "--copy-bytes 8" in s8.cli_args()
    assert TileSpec.from_json(s8.to_json()) == s8
    s16 = ptxgen.make_spec(**NARROW)
    assert "copy_bytes" not in s16.to_json() and s16.kernel_name.endswith("_cpasync")  # older names and JSON unchanged
    assert s8.operand_row_align_bytes == 8 and s16.operand_row_align_bytes == 16
    with pytest.raises(SpecError, match="4, 8 or 16"):
        ptxgen.make_spec(**NARROW, copy_bytes=2)
    with pytest.raises(SpecError, match="cp.async loader"):
        ptxgen.make_spec(**{**NARROW, "loader": "tma"}, copy_bytes=8)


@pytest.mark.parametrize("copy_bytes", [8, 4])
def test_pieces_render_and_compile(copy_bytes):
    """Each 16-byte cell is copied as 16 / copy_bytes pieces at the cell's swizzled offset (L2: NVRTC, the SASS
    has the narrow LDGSTS and no local memory)."""
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import run_tool

    k = ptxgen.compile(**NARROW, copy_bytes=copy_bytes, schedule="persistent")
    pieces = 16 // copy_bytes
    assert f"cp.async.ca.shared.global [%0], [%1], {copy_bytes}, %2;" in k.source
    assert len(re.findall(rf"cp_async_{copy_bytes}\(dst \+ \d+u", k.source)) == 2 * pieces  # A and B
    assert not check_sass(k.spec, k.cubin).problems
    sass = run_tool("cuobjdump", ["--dump-sass"], k.cubin)
    width = {8: r"LDGSTS\.E\.64\.", 4: r"LDGSTS\.E\.ZFILL"}[copy_bytes]
    assert re.search(width, sass) and not re.search(r"LDGSTS\.E\.BYPASS\.128", sass)


def test_sixteen_byte_kernels_render_as_before():
    src = ptxgen.compile(**NARROW).source
    assert "piece_bytes" not in src and "cp.async.ca" not in src


def test_bind_and_problem_checks_follow_the_copy_size():
    k8 = ptxgen.compile(**NARROW, copy_bytes=8)
    tma = ptxgen.compile(**{**NARROW, "loader": "tma"})
    out = FakeArray((300, 200), strides=(208, 1))
    a, b = kmajor(300, 250, ld=260), kmajor(200, 250, ld=264)  # A's rows 520 B apart: 8-byte aligned
    p = api.bind(k8.spec, *(read_array(x, n) for x, n in ((a, "a"), (b, "b"), (out, "out")))).problem
    assert (p.lda, p.ldb) == (260, 264) and problem_errors(k8.spec, p) == []
    with pytest.raises(api.ArgumentError, match="16-byte aligned"):  # the control: TMA refuses the same arrays
        tma.check(a, b, out)
    with pytest.raises(api.ArgumentError, match="8-byte aligned"):
        k8.check(kmajor(300, 250, ld=258), b, out)  # 516 B: 4-byte aligned only
    with pytest.raises(api.ArgumentError, match="not 8-byte aligned"):
        k8.check(kmajor(300, 250, ld=264, ptr=0x7E0000000004), b, out)
    assert any("multiple of 8 B" in e for e in problem_errors(k8.spec, Problem(300, 200, 250, 258, 264, 208)))


def test_simulated_launch_reads_rows_in_place(monkeypatch):
    sim = SimulatedGPU(monkeypatch)
    k = ptxgen.compile(**NARROW, copy_bytes=8)
    _fresh(k)
    a, b, out = kmajor(300, 250, ld=260), kmajor(200, 250, ld=252), FakeArray((300, 200), strides=(208, 1))
    a_off = kmajor(300, 250, ld=264, ptr=0x7E0000000008)  # data 8 bytes into a buffer
    assert k(a, b, out) is out and k(a_off, b, out) is out
    first, second = (read_params(x["params"], k.params) for x in sim.launches)
    ptr = {n: read_array(x, n).ptr for x, n in ((a, "a"), (b, "b"), (out, "out"))}
    assert first == [ptr["a"], ptr["b"], ptr["out"], 300, 200, 250, 260, 252, 208]
    assert second == [0x7E0000000008, ptr["b"], ptr["out"], 300, 200, 250, 264, 252, 208]


def _info(name, shape, strides, ptr=0x10000, dtype="bf16", itemsize=2):
    return ArrayInfo(name, ptr, shape, strides, dtype, itemsize, (2, 0), "torch", "torch")


def test_gemm_routes_4_and_8_byte_rows_to_narrow_copies():
    def route(a, b):
        packed = packing.pack_plan(a, b, None)
        return packing.narrow_copy_bytes(a, b, packed) if packed else "aligned"

    b = _info("b", (200, 250), (256, 1), 0x20000)
    assert route(_info("a", (300, 250), (260, 1)), b) == (8, False)  # 520 B rows
    assert route(_info("a", (300, 250), (258, 1)), b) == (4, False)  # 516 B rows
    assert route(_info("a", (300, 250), (264, 1), ptr=0x10008), b) == (8, True)  # the pointer decided
    assert route(_info("a", (300, 250), (257, 1)), b) is None  # 514 B: 2-byte rows are packed
    assert route(_info("a", (300, 250), (0, 1)), b) is None  # broadcast: packed
    assert route(_info("a", (300, 250), (256, 1)), b) == "aligned"
    f32 = _info("a", (300, 250), (257, 1), dtype="f32", itemsize=4)
    assert route(f32, _info("b", (200, 250), (256, 1), 0x20000, "f32", 4)) == (4, False)
    mn = _info("a", (300, 250), (1, 302))  # M-major, columns 604 B apart
    assert route(mn, b) == (4, False)
