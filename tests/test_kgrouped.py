"""The K-grouped GEMM (--grouped offs_k; ptxgen.derive.roles.kgrouped, ptxgen.kgrouped.grouped_gemm_k).

L1: the plan's K-tiles, the rendered C of the walk and of the K tail's zeroing (run on the CPU through g++) against the
independent model ptxgen.model.layouts.kgroupmodel, with controls that fail. L2: NVRTC compile and SASS gate. CLI: build,
explain, show, refusals. The door (binding, plan, launch, the torch operator) and the GPU tests: tests/test_kgrouped_door.py.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.roles.kgrouped import KGroupedPlan
from ptxgen.derive.tile.spec import make_spec
from ptxgen.emit.views import kgrouped_view as ckg
from ptxgen.emit.render import render_kernel
from ptxgen.emit.views.schedule_view import batched_tile_coords_c
from ptxgen.isa.types import SpecError
from ptxgen.model.layouts import kgroupmodel

ROOT = Path(__file__).resolve().parents[1]
BASE = dict(bm=128, bn=128, bk=64, stages=4, a="mnmajor-sw128", b="mnmajor-sw128", a_order="k", b_order="k", dtype="bf16",
            acc="f32", out_dtype="bf16", arch="sm_90a", schedule="persistent", epilogue="direct", grouped="offs_k")
KMAJOR = dict(BASE, a="kmajor-sw128", b="kmajor-sw128", a_order="k", b_order="k")


def _odd_offs(rng: random.Random, groups: int, bk: int) -> list[int]:
    """Cumulative K ends with empty groups, groups of 1 K row and sizes that are not multiples of BK."""
    sizes = [rng.choice([0, 1, bk - 1, bk, bk + 1, 2 * bk + 7, rng.randint(0, 3 * bk)]) for _ in range(groups)]
    return list(np.cumsum(sizes).tolist())


# ---- L1: the plan against the model ---------------------------------------------------------------------------------
@pytest.mark.parametrize("groups", [1, 2, 8, 13])
@pytest.mark.parametrize("k_align", [1, 8])
def test_plan_k_tiles_read_each_groups_k_rows_once(groups, k_align):
    rng = random.Random(groups)
    plan = KGroupedPlan(128, 128, 64, 8, k_align)
    for _ in range(40):
        offs = _odd_offs(rng, groups, plan.bk)
        k_total = offs[-1] + rng.choice([0, 0, 5])  # K_total past the last group: torch ignores those K rows
        blocks = [plan.k_blocks(s, e) for s, e in plan.group_k(offs, k_total)]
        assert kgroupmodel.check_k_walk(blocks, offs, k_total, plan.bk) == []


@pytest.mark.parametrize("k_align", [1, 8])
def test_untrusted_offs_keep_every_kept_k_row_inside_k_total(k_align):
    """Decreasing, negative or too large offs: every K row a box keeps lies in [0, K_total) and in its group's clamped
    range; groups are empty or shortened, never read outside A or B."""
    rng = random.Random(k_align)
    plan = KGroupedPlan(128, 128, 64, 8, k_align)
    for _ in range(200):
        k_total = rng.randint(1, 400)
        offs = [rng.randint(-50, 500) for _ in range(rng.randint(1, 9))]
        for ks, ke in plan.group_k(offs, k_total):
            assert 0 <= ks <= ke <= k_total
            for k0, lo, hi in plan.k_blocks(ks, ke):
                assert k0 >= 0 and 0 <= lo < hi <= plan.bk and ks <= k0 + lo and k0 + hi <= ke


def test_control_an_unmasked_tail_reads_the_next_groups_k_rows():
    plan = KGroupedPlan(128, 128, 64, 8)
    offs = [1, 66, 200]  # groups of 1 and 65 K rows: both last K-tiles hold the next group's rows
    blocks = [plan.k_blocks(s, e) for s, e in plan.group_k(offs, 200)]
    problems = kgroupmodel.check_k_walk(blocks, offs, 200, plan.bk, masked=False)
    assert len(problems) == 2 and "reads extra K [1, 2, 3, 4]" in problems[0]
    aligned = KGroupedPlan(128, 128, 64, 8, k_align=8)  # boxes from k_start rounded down: the head is another group's
    offs = [5, 9, 200]
    blocks = [aligned.k_blocks(s, e) for s, e in aligned.group_k(offs, 200)]
    assert blocks[1][0] == (0, 5, 9)
    problems = kgroupmodel.check_k_walk(blocks, offs, 200, aligned.bk, masked=False)
    assert any("group 1" in p and "reads extra K [0, 1, 2, 3]" in p for p in problems)


def test_simulated_product_equals_per_group_products_and_the_control_differs():
    rng = np.random.default_rng(0)
    plan = KGroupedPlan(128, 128, 16, 8, k_align=8)
    offs = [0, 1, 17, 17, 50, 64]  # empty, 1 row, BK + 0, empty, 33, 14
    a = rng.integers(-3, 4, size=(5, 70))  # K_total 70 > offs[-1]: the last group's box reads K rows of no group
    b = rng.integers(-3, 4, size=(6, 70))
    blocks = [plan.k_blocks(s, e) for s, e in plan.group_k(offs, 70)]
    want = kgroupmodel.reference(a, b, offs)
    assert np.array_equal(kgroupmodel.simulate(a, b, blocks, plan.bk), want)
    assert not (want[0] != 0).any() and not (want[3] != 0).any()  # empty groups: zeros
    assert not np.array_equal(kgroupmodel.simulate(a, b, blocks, plan.bk, masked=False), want)


# ---- L1: the rendered C, run on the CPU -----------------------------------------------------------------------------
WALK = r"""
#include <algorithm>
#include <cstdio>
using std::min; using std::max;
int main() {
  int G, M, N, K;
  while (std::scanf("%%d %%d %%d %%d", &G, &M, &N, &K) == 4) {
    static int offs[4096];
    for (int g = 0; g < G; ++g) if (std::scanf("%%d", &offs[g]) != 1) return 2;
    const int tiles_m = (M + %(bm1)d) / %(bm)d, tiles_n = (N + %(bn1)d) / %(bn)d;
    for (int tile = 0; tile < tiles_m * tiles_n * G; ++tile) {
      %(coords)s
      std::printf("%%d %%d %%d %%d %%d %%d %%d %%d %%d\n", bz, m0, n0, k_start, k_end, num_k_tiles, k_base, k_head, k_valid_last);
    }
    std::printf("end\n");
  }
  return 0;
}
"""

ZERO = r"""
#include <cstdio>
#include <cstring>
static unsigned char img[1 << 20];
[[maybe_unused]] static void st_shared_zero16(unsigned a) { std::memset(img + a, 0, 16); }
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


def _build(tmp_path, name: str, src: str) -> Path:
    cxx = shutil.which("g++") or shutil.which("c++")
    if not cxx:
        pytest.skip("no host C++ compiler")
    (tmp_path / f"{name}.cc").write_text(src)
    subprocess.run([cxx, "-O1", "-Wall", "-Werror", "-include", "cstdlib", "-o", str(tmp_path / name), str(tmp_path / f"{name}.cc")],
                   check=True)
    return tmp_path / name


@pytest.mark.parametrize("fields", [BASE, KMAJOR], ids=["mn", "k"])
def test_rendered_walk_matches_the_plan_and_the_model(tmp_path, fields):
    spec = make_spec(**fields)
    plan = plan_kernel(spec)
    kg = plan.kgrouped
    coords = batched_tile_coords_c(plan.schedule, spec.bm, spec.bn) + ckg.tile_k_c(kg)
    exe = _build(tmp_path, "walk", WALK % dict(bm=spec.bm, bm1=spec.bm - 1, bn=spec.bn, bn1=spec.bn - 1,
                                               coords="\n      ".join(coords)))
    rng = random.Random(1)
    cases = [(1, 1, 1, 1, [1]), (8, 200, 130, 900, _odd_offs(rng, 8, 64)), (3, 128, 256, 10, [0, 10, 10])]
    for _ in range(6):
        g = rng.choice([1, 2, 5, 8])
        offs = _odd_offs(rng, g, 64)
        cases.append((g, rng.randint(1, 300), rng.randint(1, 300), max(1, offs[-1] + rng.choice([0, 3])), offs))
    stdin = "".join(f"{g} {m} {n} {k} {' '.join(map(str, o))}\n" for g, m, n, k, o in cases)
    out = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, check=True).stdout.split("end\n")
    for (g, m, n, k, offs), text in zip(cases, out):
        rows = [tuple(map(int, line.split())) for line in text.splitlines()]
        want = [(t.group, t.m0, t.n0, t.k_start, t.k_end) for t in kg.walk(offs, k, m, n)]
        assert [r[:5] for r in rows] == want
        per_group = {}
        for grp, _m0, _n0, ks, ke, trips, base, head, valid in rows:
            c_blocks = tuple((base + t * kg.bk, head if t == 0 else 0, kg.bk if t < trips - 1 else valid) for t in range(trips))
            assert c_blocks == kg.k_blocks(ks, ke)
            per_group[grp] = c_blocks
        assert kgroupmodel.check_k_walk([per_group[x] for x in range(g)], offs, k, kg.bk) == []


def _zero_fn(tmp_path, op, threads: int, name: str, loop_lines=None):
    loop = loop_lines if loop_lines is not None else ckg._zero_loop_c(op, name, threads, 2)
    exe = _build(tmp_path, f"zero_{name}", ZERO % dict(name=name, threads=threads, loop="\n    ".join(loop)))

    def run(image: np.ndarray, stage: int, lo: int, hi: int) -> None:
        res = subprocess.run([str(exe), str(lo), str(hi), str(stage), str(image.size)], input=image.tobytes(),
                             capture_output=True, check=True)
        image[:] = np.frombuffer(res.stdout, dtype=np.uint8)

    return run


@pytest.mark.parametrize("fields", [BASE, KMAJOR, dict(BASE, a_order="mn", b_order="mn"), dict(BASE, b="kmajor-sw128")],
                         ids=["mn-mn", "k-k", "mn-mn-order-mn", "mn-k"])
def test_rendered_tail_zeroing_leaves_exactly_the_groups_k_rows(tmp_path, fields):
    spec = make_spec(**fields)
    plan = plan_kernel(spec)
    tj = plan.layout.to_json()
    for name, op, mn in (("a_zero", plan.layout.a, spec.bm), ("b_zero", plan.layout.b, spec.bn)):
        run = _zero_fn(tmp_path, op, 256, name)
        k_major = op.major.value == "k"
        for lo, hi in ((0, 1), (0, 7), (0, 8), (0, 9), (0, 33), (0, 63), (1, 64), (5, 64), (7, 64), (3, 12), (6, 7)):
            assert kgroupmodel.check_tail_zeroing(tj[op.name]["tma"], k_major, mn, spec.bk, lo, hi, run) == [], (name, lo, hi)


def test_control_zeroing_without_the_swizzle_or_at_all_fails(tmp_path):
    spec = make_spec(**KMAJOR)
    plan = plan_kernel(spec)
    op = plan.layout.a
    tma = plan.layout.to_json()["a"]["tma"]
    lines = ckg._zero_loop_c(op, "a_zero", 256, 2)
    unswizzled = [ln.replace(lines[3].split("= ", 1)[1], "a_zero + linear;") if "const unsigned dst" in ln else ln for ln in lines]
    assert unswizzled != lines
    bad = _zero_fn(tmp_path, op, 256, "a_zero", unswizzled)
    assert kgroupmodel.check_tail_zeroing(tma, True, spec.bm, spec.bk, 0, 9, bad)
    assert kgroupmodel.check_tail_zeroing(tma, True, spec.bm, spec.bk, 3, 64, lambda image, stage, lo, hi: None)


# ---- the kernel source, L2 --------------------------------------------------------------------------------------------
def test_source_reads_the_k_range_on_the_device_and_zeroes_the_tail():
    src = render_kernel(plan_kernel(make_spec(**BASE)))
    assert src.count("const int k_start = bz == 0 ? 0 : min(max(offs[bz - 1], 0), K);") == 2  # producer and consumers
    assert "const int k0 = k_base + kt * 64;" in src and "const int k_base = k_start;" in src
    assert "if (kt == num_k_tiles - 1 && k_valid_last < 64) {" in src  # MN-major: no head to zero
    src = render_kernel(plan_kernel(make_spec(**KMAJOR)))
    assert "const int k_base = k_start - k_start % 8;" in src
    assert "if ((kt == num_k_tiles - 1 && k_valid_last < 64) || (kt == 0 && k_head > 0)) {" in src
    assert "fence_proxy_async();  // the generic-proxy zeros" in src and "named_barrier_sync(1, 256);" in src
    assert "static_cast<size_t>(bz) * static_cast<size_t>(M) * static_cast<size_t>(ldd)" in src
    assert "const int num_tiles = tiles_m * tiles_n * G;" in src


def test_other_kernels_render_without_k_grouping():
    src = render_kernel(plan_kernel(make_spec(**{**BASE, "grouped": "none"})))
    assert "k_start" not in src and "st_shared_zero16" not in src


@pytest.mark.parametrize("fields", [BASE, KMAJOR, dict(BASE, out_dtype="f32"), dict(KMAJOR, dtype="f16", out_dtype="f16")],
                         ids=["mn-bf16", "k-bf16", "mn-f32", "k-f16"])
def test_kgrouped_kernels_compile_with_the_intended_sass(fields):
    from ptxgen.api import compile
    from ptxgen.runtime.compile.sass import check_sass

    spec = make_spec(**fields)
    compiled = compile(spec)
    report = check_sass(spec, compiled.cubin)
    assert report.ok, report.summary() + "; " + "; ".join(report.problems)
    assert "local 0 B" in report.summary()


def test_control_sass_check_fails_for_a_kgrouped_kernel_checked_as_another_tile():
    from ptxgen.api import compile
    from ptxgen.runtime.compile.sass import check_sass

    compiled = compile(make_spec(**BASE))
    report = check_sass(make_spec(**{**BASE, "bk": 128, "stages": 2}), compiled.cubin)
    assert not report.ok


# ---- rules and the CLI ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fields", [dict(BASE, batch="a"), dict(BASE, split_k=2, schedule="tile"),
                                    dict(KMAJOR, dtype="e4m3", bk=128), dict(BASE, arch="sm_100a")])
def test_illegal_kgrouped_specs_name_the_rule(fields):
    with pytest.raises(SpecError, match="--grouped=offs_k"):
        make_spec(**fields)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "ptxgen", *args], cwd=ROOT, capture_output=True, text=True)


FLAGS = ["--bm", "128", "--bn", "128", "--bk", "64", "--a", "mnmajor-sw128", "--b", "mnmajor-sw128", "--a-order", "k",
         "--b-order", "k", "--dtype", "bf16", "--acc", "f32", "--arch", "sm_90a", "--stages", "4", "--out-dtype", "bf16",
         "--schedule", "persistent", "--grouped", "offs_k"]


def test_cli_explain_show_build_and_refusal(tmp_path):
    r = _cli("explain", *FLAGS)
    assert r.returncode == 0 and "k_tail" in r.stdout
    assert "group 0: K 0..-1 is empty: no K-tile, out[0] stored as zeros" in r.stdout
    assert "group 1: 1 K-tile(s): K 0..63, zero K 1..63" in r.stdout  # a group of 1 K row
    assert "group 2: 2 K-tile(s): K 1..64; K 65..128, zero K 66..128" in r.stdout
    r = _cli("show", *FLAGS)
    assert r.returncode == 0 and 'id="kgrouped-k"' in r.stdout and 'class="zeroed"' in r.stdout
    r = _cli("build", *FLAGS, "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert any(p.name.endswith("groupedoffs_k") for p in tmp_path.iterdir())
    r = _cli("explain", *FLAGS, "--epilogue", "tma", "--d-major", "m")
    assert r.returncode == 2 and "offs_k" in r.stderr and "Traceback" not in r.stderr
