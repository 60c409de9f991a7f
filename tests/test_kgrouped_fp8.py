"""The K-grouped row-wise FP8 GEMM (--grouped offs_k_rowwise; torch._scaled_grouped_mm's 2-D x 2-D form).

L1: the plan's scale indexing, the rendered C of the scale reads and of the FP8 K tail's byte-wise zeroing (run on the
CPU through g++), and the walk with FP8's 16-element box alignment, against the independent model
ptxgen.model.layouts.kgroupmodel, each with a control that fails. L2: NVRTC compile and SASS gate. Rules and the CLI.
The door and the GPU tests: tests/test_kgrouped_fp8_door.py. The 16-bit kernel's checks: tests/test_kgrouped.py.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_kgrouped import WALK, _build, _odd_offs

from ptxgen.derive.roles.kgrouped import KGroupedPlan
from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.tile.spec import make_spec
from ptxgen.emit.render import render_kernel
from ptxgen.emit.views import grouped_view as cg
from ptxgen.emit.views import kgrouped_view as ckg
from ptxgen.emit.views.schedule_view import batched_tile_coords_c
from ptxgen.isa.types import SpecError
from ptxgen.model.layouts import kgroupmodel

ROOT = Path(__file__).resolve().parents[1]
FP8 = dict(bm=128, bn=128, bk=128, stages=4, a="kmajor-sw128", b="kmajor-sw128", a_order="k", b_order="k", dtype="e4m3",
           acc="f32", out_dtype="bf16", arch="sm_90a", schedule="persistent", epilogue="direct", grouped="offs_k_rowwise")


# ---- L1: which scale each output element reads ------------------------------------------------------------------------
@pytest.mark.parametrize("groups,m,n", [(1, 1, 1), (3, 5, 7), (8, 16, 32), (4, 130, 9)])
def test_plan_scale_index_reads_torchs_slices(groups, m, n):
    plan = plan_kernel(make_spec(**FP8)).kgrouped
    assert plan.rowwise
    assert kgroupmodel.check_scale_reads(lambda g, r, c: plan.scale_index(g, r, c, m, n), groups, m, n) == []


def test_control_the_m_grouped_scale_layout_fails_the_k_grouped_model():
    """The M-grouped kernel's scale_a (one per stacked row, no group offset) read as the K-grouped one's: wrong for g > 0."""
    problems = kgroupmodel.check_scale_reads(lambda g, r, c: (r, g * 7 + c), 3, 5, 7)
    assert problems and "out[1][0, 0] reads scale_a[0]" in problems[0]
    assert kgroupmodel.check_scale_reads(lambda g, r, c: (g * 5 + r, g * 5 + c), 3, 5, 7)  # scale_b strided by M


def test_simulated_scaled_product_equals_torchs_per_group_scaled_products():
    rng = np.random.default_rng(1)
    plan = KGroupedPlan(128, 128, 32, 8, k_align=16, rowwise=True)
    offs = [0, 1, 33, 33, 90, 96]  # empty, 1 K row, 32, empty, 57, 6
    m, n, k_total = 5, 6, 112
    a = rng.integers(-3, 4, size=(m, k_total))
    b = rng.integers(-3, 4, size=(n, k_total))
    sa = 2.0 ** rng.integers(-3, 4, size=len(offs) * m)  # powers of two: every product exact in float64
    sb = 2.0 ** rng.integers(-3, 4, size=len(offs) * n)
    blocks = [plan.k_blocks(s, e) for s, e in plan.group_k(offs, k_total)]
    raw = kgroupmodel.simulate(a, b, blocks, plan.bk).astype(np.float64)
    idx = np.array([[[plan.scale_index(g, r, c, m, n) for c in range(n)] for r in range(m)] for g in range(len(offs))])
    got = raw * sa[idx[..., 0]] * sb[idx[..., 1]]
    want = kgroupmodel.reference_scaled(a, b, offs, sa, sb)
    assert np.array_equal(got, want)
    assert not want[0].any() and not want[3].any()  # empty groups: zeros
    swapped = raw * sa[idx[..., 1] % sa.size] * sb[idx[..., 0] % sb.size]  # control: the scales' roles swapped
    assert not np.array_equal(swapped, want)


SCALES = r"""
#include <cstddef>
#include <cstdio>
int main() {
  int G, M, N;
  while (std::scanf("%%d %%d %%d", &G, &M, &N) == 3) {
    for (int bz = 0; bz < G; ++bz)
      for (int row = 0; row < M + 2; ++row)
        for (int col = 0; col < N + 2; ++col) {
          if (row < %(row_limit)s && col < %(col_limit)s)
            std::printf("%%d %%d %%d %%zu %%zu\n", bz, row, col, static_cast<size_t>(%(a_index)s), static_cast<size_t>(%(b_index)s));
          else
            std::printf("%%d %%d %%d zero\n", bz, row, col);
        }
    std::printf("end\n");
  }
  return 0;
}
"""


def _scale_reads(tmp_path, view, cases):
    exe = _build(tmp_path, "scales", SCALES % dict(row_limit=view.row_limit, col_limit=view.col_limit,
                                                    a_index=view.a_index, b_index=view.b_index))
    stdin = "".join(f"{g} {m} {n}\n" for g, m, n in cases)
    out = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, check=True).stdout.split("end\n")
    results = []
    for (g, m, n), text in zip(cases, out):
        reads, zero = {}, set()
        for line in text.splitlines():
            f = line.split()
            key = tuple(map(int, f[:3]))
            if f[3] == "zero":
                zero.add(key)
            else:
                reads[key] = (int(f[3]), int(f[4]))
        results.append((reads, zero))
    return results


def test_rendered_scale_reads_match_the_model(tmp_path):
    view = ckg.row_scales_view(plan_kernel(make_spec(**FP8)).kgrouped)
    cases = [(1, 1, 1), (4, 16, 32), (3, 130, 9)]
    for (g, m, n), (reads, zero) in zip(cases, _scale_reads(tmp_path, view, cases)):
        assert set(reads) == {(z, r, c) for z in range(g) for r in range(m) for c in range(n)}
        assert len(zero) == g * ((m + 2) * (n + 2) - m * n)  # rows >= M or columns >= N: multiplied by 0, never read
        assert kgroupmodel.check_scale_reads(lambda z, r, c: reads[(z, r, c)], g, m, n) == []
    src = render_kernel(plan_kernel(make_spec(**FP8)))
    assert f"scale_a[{view.a_index}]" in src and f"scale_b[{view.b_index}]" in src


def test_control_the_m_grouped_scale_expressions_fail_the_model(tmp_path):
    from ptxgen.grouped import grouped_spec

    m_view = cg.row_scales_view(plan_kernel(grouped_spec("e4m3", rowwise=True)).grouped)
    assert m_view.a_index == "row"
    k_view = ckg.row_scales_view(plan_kernel(make_spec(**FP8)).kgrouped)
    mixed = cg.RowScalesView(k_view.doc, m_view.a_index, k_view.b_index, "M")
    (reads, _), = _scale_reads(tmp_path, mixed, [(3, 5, 7)])
    assert kgroupmodel.check_scale_reads(lambda z, r, c: reads[(z, r, c)], 3, 5, 7)


# The rendered scale multiply, compiled for the host with the kernel's own view: which scale_a and scale_b element each
# accumulator register of each thread is multiplied by. The reference is PTX's wgmma m64nN D fragment, written here from
# the ISA's figure ("wgmma .m64nNk* D fragments"): thread t's register i is row 16 (t / 32) + (t % 32) / 4 + 8 ((i / 2)
# % 2), column 8 (i / 4) + 2 (t % 4) + i % 2.
SCALE_MULTIPLY = r"""
#include <cstddef>
#include <cstdio>
int main() {
  const int M = %(m)d, N = %(n)d, bz = %(g)d, m0 = %(m0)d, n0 = %(n0)d;
  float scale_a[(bz + 1) * M], scale_b[(bz + 1) * N];
  // tags: scale_a[j] = 1 + j, scale_b[j] = 4096 (1 + j): their products here are exact in f32 (odd parts below 2^24)
  for (int j = 0; j < (bz + 1) * M; ++j) scale_a[j] = static_cast<float>(1 + j);
  for (int j = 0; j < (bz + 1) * N; ++j) scale_b[j] = 4096.f * static_cast<float>(1 + j);
  for (int wg = 0; wg < 2; ++wg)  // the two consumer warpgroups: rows 64 wg .. 64 wg + 63 of the tile
  for (int wg_tid = 0; wg_tid < 128; ++wg_tid) {
    const int lane = wg_tid %% 32;
%(decls)s
%(block)s
%(dump)s
  }
  return 0;
}
"""


def _scale_block(spec) -> tuple[str, object]:
    from ptxgen.emit.env import environment
    from ptxgen.emit.render import kernel_view

    k = kernel_view(plan_kernel(spec))
    return str(environment().get_template("mma_wgmma.cuh.j2").module.grouped_scales(k)), k


def _register_scales(tmp_path, block: str, k, m: int, n: int, g: int, m0: int, n0: int) -> dict:
    decls = "\n".join(f"    float acc{sl.index}[{k.epi.acc_elems}]; for (float& x : acc{sl.index}) x = 1.f;" for sl in k.slabs)
    dump = "\n".join(f'    for (int i = 0; i < {k.epi.acc_elems}; ++i) std::printf("{sl.index} %d %d %d %.1f\\n", wg, wg_tid, i, '
                     f'static_cast<double>(acc{sl.index}[i]));' for sl in k.slabs)
    block = block.replace("#pragma unroll", "")  # the host compiler warns on it (and warnings fail the build)
    exe = _build(tmp_path, f"mul{m}x{n}", SCALE_MULTIPLY % dict(m=m, n=n, g=g, m0=m0, n0=n0, decls=decls, block=block,
                                                                dump=dump))
    got = {}
    for line in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines():
        s, w, t, i, v = line.split()
        got[int(s), int(w), int(t), int(i)] = float(v)
    return got


def _fragment_expected(k, m: int, n: int, g: int, m0: int, n0: int) -> dict:
    """BM 128: cooperative, warpgroup w holds rows 64 w.. in one slab; ping-pong, each warpgroup its own whole tile in
    two slabs, slab s rows 64 s.. (the harness gives both warpgroups the same tile origin)."""
    want = {}
    for sl in k.slabs:
        for w in range(2):
            for t in range(128):
                for i in range(k.epi.acc_elems):
                    row = m0 + 64 * (sl.index if len(k.slabs) == 2 else w) + 16 * (t // 32) + (t % 32) // 4 + 8 * ((i // 2) % 2)
                    col = n0 + 8 * (i // 4) + 2 * (t % 4) + i % 2
                    inside = row < m and col < n
                    want[sl.index, w, t, i] = float(1 + g * m + row) * float(4096 * (1 + g * n + col)) if inside else 0.0
    return want


@pytest.mark.parametrize("kw", [{}, dict(bn=256), dict(consumers="pingpong", epilogue="tma")], ids=["128", "n256", "pingpong"])
def test_rendered_scale_multiply_gives_each_register_its_rows_and_columns_scales(tmp_path, kw):
    """L1: every accumulator register of every thread is multiplied by scale_a of its own row and scale_b of its own
    column (the group's pair), 0 past M or N: an interior tile and one cut by both edges."""
    bn = kw.get("bn", 128)
    block, k = _scale_block(make_spec(**dict(FP8, **kw)))
    assert "sa_lo" in block and "sb_hi" in block
    for m, n, g, m0, n0 in ((300, 600, 2, 128, 256), (140, 133 + bn, 1, 128, bn)):
        got, want = _register_scales(tmp_path, block, k, m, n, g, m0, n0), _fragment_expected(k, m, n, g, m0, n0)
        if got != want:  # not a bare assert: pytest's diff of two 65536-entry dicts would take minutes
            key = next(x for x in want if got.get(x) != want[x])
            raise AssertionError(f"(slab, warpgroup, thread, register) {key}: got {got.get(key)}, want {want[key]}")


def test_control_a_column_pair_read_the_other_way_round_fails(tmp_path):
    """Control: the group's two columns swapped in the rendered block, and the comparison above fails."""
    block, k = _scale_block(make_spec(**FP8))
    bad = block.replace("acc0[i] *= sa_lo * sb_lo;", "acc0[i] *= sa_lo * sb_hi;")
    assert bad != block
    got = _register_scales(tmp_path, bad, k, 300, 600, 2, 128, 256)
    assert got != _fragment_expected(k, 300, 600, 2, 128, 256)


# ---- L1: the walk with FP8's box alignment, and the byte-wise K tail --------------------------------------------------
def test_fp8_plan_aligns_boxes_to_16_elements_and_reads_each_k_row_once():
    plan = plan_kernel(make_spec(**FP8)).kgrouped
    assert plan.k_align == 16  # 16 bytes of e4m3: a K-major map's inner coordinate
    rng = random.Random(3)
    for _ in range(60):
        offs = _odd_offs(rng, rng.choice([1, 3, 8]), plan.bk)
        k_total = offs[-1] + rng.choice([0, 9])
        blocks = [plan.k_blocks(s, e) for s, e in plan.group_k(offs, k_total)]
        assert all(k0 % 16 == 0 for bl in blocks for k0, _, _ in bl)
        assert kgroupmodel.check_k_walk(blocks, offs, k_total, plan.bk) == []


def test_rendered_fp8_walk_matches_the_plan(tmp_path):
    spec = make_spec(**FP8)
    plan = plan_kernel(spec)
    kg = plan.kgrouped
    coords = batched_tile_coords_c(plan.schedule, spec.bm, spec.bn) + ckg.tile_k_c(kg)
    exe = _build(tmp_path, "walk", WALK % dict(bm=spec.bm, bm1=spec.bm - 1, bn=spec.bn, bn1=spec.bn - 1,
                                               coords="\n      ".join(coords)))
    rng = random.Random(5)
    cases = [(g, rng.randint(1, 300), rng.randint(1, 300), offs) for g in (1, 4, 8) for offs in [_odd_offs(rng, g, 128)]]
    cases = [(g, m, n, max(1, o[-1] + 7), o) for g, m, n, o in cases]
    stdin = "".join(f"{g} {m} {n} {k} {' '.join(map(str, o))}\n" for g, m, n, k, o in cases)
    out = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, check=True).stdout.split("end\n")
    for (g, m, n, k, offs), text in zip(cases, out):
        rows = [tuple(map(int, line.split())) for line in text.splitlines()]
        assert [r[:5] for r in rows] == [(t.group, t.m0, t.n0, t.k_start, t.k_end) for t in kg.walk(offs, k, m, n)]
        for _g, _m0, _n0, ks, ke, trips, base, head, valid in rows:
            c_blocks = tuple((base + t * kg.bk, head if t == 0 else 0, kg.bk if t < trips - 1 else valid) for t in range(trips))
            assert c_blocks == kg.k_blocks(ks, ke)


ZERO8 = r"""
#include <cstdio>
#include <cstring>
static unsigned char img[1 << 20];
[[maybe_unused]] static void st_shared_zero16(unsigned a) { std::memset(img + a, 0, 16); }
[[maybe_unused]] static void st_shared_zero1(unsigned a) { std::memset(img + a, 0, 1); }
[[maybe_unused]] static void st_shared_zero2(unsigned a) { std::memset(img + a, 0, 2); }
int main(int argc, char** argv) {
  const int z_lo = std::atoi(argv[1]), z_hi = std::atoi(argv[2]);
  const unsigned stage = static_cast<unsigned>(std::atoi(argv[3]));
  const int size = std::atoi(argv[4]);
  if (std::fread(img, 1, size, stdin) != static_cast<size_t>(size)) return 2;
  const unsigned %(name)s = stage;
  for (int tid = 0; tid < %(threads)d; ++tid) {
    %(loop)s
  }
  std::fwrite(img, 1, size, stdout);
  return 0;
}
"""


def _zero_fn(tmp_path, loop, name: str, threads: int = 256):
    exe = _build(tmp_path, f"zero8_{name}_{threads}", ZERO8 % dict(name=name, threads=threads, loop="\n    ".join(loop)))

    def run(image: np.ndarray, stage: int, lo: int, hi: int) -> None:
        res = subprocess.run([str(exe), str(lo), str(hi), str(stage), str(image.size)], input=image.tobytes(),
                             capture_output=True, check=True)
        image[:] = np.frombuffer(res.stdout, dtype=np.uint8)

    return run


WINDOWS = ((0, 1), (0, 15), (0, 16), (0, 17), (0, 100), (0, 127), (1, 128), (7, 128), (15, 128), (3, 20), (16, 17))


def test_rendered_fp8_tail_zeroing_leaves_exactly_the_groups_k_rows(tmp_path):
    spec = make_spec(**FP8)
    plan = plan_kernel(spec)
    tj = plan.layout.to_json()
    src = render_kernel(plan)
    assert "st_shared_zero1(dst + static_cast<unsigned>(e) * 1u)" in src and "st.shared.b8" in src
    for name, op, mn in (("a_zero", plan.layout.a, spec.bm), ("b_zero", plan.layout.b, spec.bn)):
        run = _zero_fn(tmp_path, ckg._zero_loop_c(op, name, 256, 1), name)
        for lo, hi in WINDOWS:
            assert kgroupmodel.check_tail_zeroing(tj[op.name]["tma"], True, mn, spec.bk, lo, hi, run,
                                                  element_bytes=1) == [], (name, lo, hi)


def test_pingpong_fp8_tail_zeroing_by_one_warpgroup_leaves_exactly_the_groups_k_rows(tmp_path):
    """Ping-pong consumers (each warpgroup a whole tile): the warpgroup whose tile it is zeroes the K tail alone, its
    128 threads numbered wg_tid, byte by byte where the window cuts a cell (the rendered loop run on a stage image
    against ptxgen.model.layouts.kgroupmodel). Control: the cooperative loop (a 256-thread stride) run by 128 threads."""
    spec = make_spec(**dict(FP8, epilogue="tma", consumers="pingpong"))
    plan = plan_kernel(spec)
    tj = plan.layout.to_json()
    src = render_kernel(plan)
    assert "for (int cell = wg_tid; cell < 1024; cell += 128)" in src and "st.shared.b8" in src
    for name, op, mn in (("a_zero", plan.layout.a, spec.bm), ("b_zero", plan.layout.b, spec.bn)):
        lines = ("const int wg_tid = tid;",) + ckg._zero_loop_c(op, name, 128, 1, "wg_tid")
        run = _zero_fn(tmp_path, lines, name, threads=128)
        for lo, hi in WINDOWS:
            assert kgroupmodel.check_tail_zeroing(tj[op.name]["tma"], True, mn, spec.bk, lo, hi, run,
                                                  element_bytes=1) == [], (name, lo, hi)
    half = _zero_fn(tmp_path, ckg._zero_loop_c(plan.layout.a, "a_zero", 256, 1), "a_zero", threads=128)
    assert kgroupmodel.check_tail_zeroing(tj["a"]["tma"], True, spec.bm, spec.bk, 0, 9, half, element_bytes=1)


def test_control_fp8_zeroing_with_16_bit_elements_fails(tmp_path):
    """The 16-bit kernel's loop (8 elements a cell, 2-byte stores) on an FP8 stage: the window cuts the wrong bytes."""
    spec = make_spec(**FP8)
    plan = plan_kernel(spec)
    tma = plan.layout.to_json()["a"]["tma"]
    bad = _zero_fn(tmp_path, ckg._zero_loop_c(plan.layout.a, "a_zero", 256, 2), "a_zero")
    assert kgroupmodel.check_tail_zeroing(tma, True, spec.bm, spec.bk, 0, 9, bad, element_bytes=1)
    assert kgroupmodel.check_tail_zeroing(tma, True, spec.bm, spec.bk, 3, 128, lambda image, stage, lo, hi: None,
                                          element_bytes=1)


# ---- the kernel source, L2 --------------------------------------------------------------------------------------------
def test_source_scales_after_the_k_loop_and_before_the_stores():
    src = render_kernel(plan_kernel(make_spec(**FP8)))
    loop_end = src.index("wgmma_wait<0>();")
    scales = src.index("sa_lo = row < M ? scale_a[static_cast<size_t>(bz) * M + row] : 0.f;")
    store = src.index("Epilogue: the wgmma D fragment straight to global memory")
    assert loop_end < scales < store
    assert "sb_lo = col < N ? scale_b[static_cast<size_t>(bz) * N + col] : 0.f;" in src
    assert "const float* __restrict__ scale_a, const float* __restrict__ scale_b, int M, int N, int K, int G" in src
    assert "const int k_base = k_start - k_start % 16;" in src
    plain = render_kernel(plan_kernel(make_spec(**dict(FP8, dtype="bf16", bk=64, grouped="offs_k"))))
    assert "scale_a" not in plain and "st_shared_zero1(" not in plain


@pytest.mark.parametrize("fields", [FP8, dict(FP8, out_dtype="f32"), dict(FP8, b_dtype="e5m2"), dict(FP8, dtype="e5m2", out_dtype="f16")],
                         ids=["e4m3-bf16", "e4m3-f32", "e4m3xe5m2", "e5m2-f16"])
def test_fp8_kgrouped_kernels_compile_with_the_intended_sass(fields):
    from ptxgen.api import compile
    from ptxgen.runtime.compile.sass import check_sass

    spec = make_spec(**fields)
    report = check_sass(spec, compile(spec).cubin)
    assert report.ok, report.summary() + "; " + "; ".join(report.problems)
    assert "QGMMA" in report.summary() and "local 0 B" in report.summary()


def test_control_sass_check_fails_for_an_fp8_kgrouped_kernel_checked_as_another_tile():
    from ptxgen.api import compile
    from ptxgen.runtime.compile.sass import check_sass

    compiled = compile(make_spec(**FP8))
    assert not check_sass(make_spec(**dict(FP8, bk=256, stages=2)), compiled.cubin).ok


# ---- rules and the CLI ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fields,rule", [
    (dict(FP8, a="mnmajor-sw128"), "mnmajor"),  # wgmma reads FP8 K-major only
    (dict(FP8, dtype="bf16", bk=64), "--grouped=offs_k_rowwise"),
    (dict(FP8, grouped="offs_k"), "offs_k_rowwise"),  # FP8 with offs_k: pointed at offs_k_rowwise
])
def test_illegal_fp8_kgrouped_specs_name_the_rule(fields, rule):
    with pytest.raises(SpecError, match=rule):
        make_spec(**fields)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "ptxgen", *args], cwd=ROOT, capture_output=True, text=True)


FLAGS = ["--bm", "128", "--bn", "128", "--bk", "128", "--a", "kmajor-sw128", "--b", "kmajor-sw128", "--dtype", "e4m3",
         "--acc", "f32", "--arch", "sm_90a", "--stages", "4", "--out-dtype", "bf16", "--schedule", "persistent",
         "--grouped", "offs_k_rowwise"]


def test_cli_explain_show_build_and_refusals(tmp_path):
    r = _cli("explain", *FLAGS)
    assert r.returncode == 0, r.stderr
    assert "kgrouped_scales" in r.stdout and "acc x scale_a[g M + row] x scale_b[g N + column]" in r.stdout
    assert "group 2: 2 K-tile(s): K 0..127, zero K 0..0; K 128..255, zero K 130..255" in r.stdout  # boxes from 16s
    assert "out[2][5, 7] reads scale_a[37] and scale_b[71]" in r.stdout  # 2 x 16 + 5, 2 x 32 + 7
    r = _cli("show", *FLAGS)
    assert r.returncode == 0 and 'id="kgrouped-k"' in r.stdout
    r = _cli("build", *FLAGS, "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert any(p.name.endswith("groupedoffs_k_rowwise") for p in tmp_path.iterdir())
    for bad in (["--a", "mnmajor-sw128"], ["--dtype", "bf16", "--bk", "64"]):
        r = _cli("explain", *FLAGS, *bad)
        assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.strip(), r.stderr
