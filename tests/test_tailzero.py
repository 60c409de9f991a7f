"""ptxgen.ops.tailzero: the kernel (written with ptxgen.author) that zeroes the rows of a grouped product's output past
its last group, for the expert bank's dx. L1 (no GPU): the rendered kernel compiled as host C++ and run over every CTA
and thread of its grid writes 0 exactly where the rule (restated here) says, and a kernel reading the wrong offset is
caught. L2 (no GPU): each output type's kernel compiles for sm_90a with no MMA and no local memory. gpu: on an output filled with NaN, exactly the rows at or past offs[-1] become 0 (the groups' rows keep
their NaN: nothing but the tail is written), for clamped, strided and f32 outputs; where every row belongs to a group
nothing changes (the control: a kernel that wrote from offs[0] would fail the first case)."""

from __future__ import annotations

import pytest

from ptxgen.ops import tailzero


@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
def test_the_kernel_compiles_without_mma_or_local_memory(dtype):
    from ptxgen.author import build

    built = build(tailzero.kernel_for(dtype))
    assert built.sass.ok and built.sass.counts == {"HGMMA": 0} and built.sass.local_bytes == 0, built.sass.problems
    assert ("float* __restrict__ out" if dtype == "f32" else "unsigned short* __restrict__ out") in built.source


def test_an_output_type_without_a_kernel_is_refused():
    with pytest.raises(ValueError, match="bf16, f16 or f32"):
        tailzero.kernel_for("e4m3")


@pytest.fixture(scope="module")
def torch(torch_cuda):
    return torch_cuda


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("offs,m,cols,ld", [([3, 3, 9], 20, 7, 7), ([5], 5, 64, 64), ([2, 40], 12, 33, 48),
                                            ([-4], 6, 8, 8), ([0, 1000, 2000], 3000, 136, 136), ([1], 4, 600, 640)])
def test_exactly_the_rows_past_the_last_group_become_zero(torch, dtype, offs, m, cols, ld):
    """offs[-1] = 9 of 20 rows; 5 of 5 (no tail: nothing written); 40 clamped to 12 (no tail); -4 clamped to 0 (every row);
    a 3000 x 136 output with a 1000-row tail (more rows than the grid has CTAs: the row loop); rows of 600 columns, 640
    apart (more columns than a CTA has threads: the column loop)."""
    dt = getattr(torch, dtype)
    store = torch.full((m, ld), float("nan"), device="cuda", dtype=dt)
    out = store[:, :cols]
    tailzero.zero_tail(torch, out, torch.tensor(offs, device="cuda", dtype=torch.int32))
    torch.cuda.synchronize()
    end = min(max(offs[-1], 0), m)
    assert store[:end].isnan().all(), "a row of a group was written"
    assert not out[end:].any() and not out[end:].isnan().any(), "a row past the last group is not zero"
    assert store[:, cols:].isnan().all(), "a column past the output's width was written"


@pytest.mark.gpu
def test_the_expert_banks_dx_has_zero_rows_past_the_last_group_on_a_dirty_allocator(torch):
    """Through the operator: the allocator's blocks are filled with NaN first (so an unwritten row cannot read as 0 by
    luck), then dx of a bank with 3 rows past offs[-1]: those rows 0, the groups' rows finite."""
    import ptxgen

    ptxgen.register_torch_ops()
    for _ in range(4):
        torch.full((64, 256), float("nan"), device="cuda", dtype=torch.bfloat16)
    offs = torch.tensor([10, 10, 29], device="cuda", dtype=torch.int32)
    dy = torch.randn(32, 256, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(3, 256, 64, device="cuda", dtype=torch.bfloat16)
    dx = torch.ops.ptxgen.grouped_gemm(dy, w.transpose(1, 2), offs, None, True)
    assert dx.shape == (32, 64) and not dx[29:].any() and dx[:29].isfinite().all()


# -- the rendered kernel run as host C++ (no GPU): every (CTA, thread) of the grid in turn, against the rule ---------------

HARNESS = r"""
#include <cstdio>
#include <vector>
struct Dim3 { unsigned x, y, z; };
static Dim3 blockIdx, threadIdx, gridDim;
static int min(int a, int b) { return a < b ? a : b; }
static int max(int a, int b) { return a > b ? a : b; }
#define __global__
#define __launch_bounds__(n)
#define __restrict__
KERNEL
int main() {
  int g, m, cols, ld, grid;
  while (std::scanf("%d %d %d %d %d", &g, &m, &cols, &ld, &grid) == 5) {
    std::vector<int> offs(g);
    for (int i = 0; i < g; ++i) std::scanf("%d", &offs[i]);
    std::vector<float> out(static_cast<size_t>(m) * ld, 7.0f);
    gridDim = {static_cast<unsigned>(grid), 1, 1};
    for (int b = 0; b < grid; ++b)
      for (int t = 0; t < THREADS; ++t) {
        blockIdx = {static_cast<unsigned>(b), 0, 0};
        threadIdx = {static_cast<unsigned>(t), 0, 0};
        NAME(out.data(), offs.data(), g, m, cols, static_cast<unsigned long long>(ld));
      }
    for (size_t i = 0; i < out.size(); ++i) std::printf("%d", out[i] == 0.0f ? 0 : (out[i] == 7.0f ? 1 : 2));
    std::printf("\n");
  }
  return 0;
}
"""


def _host_run(tmp_path, source: str, name: str, cases) -> list[str]:
    import shutil
    import subprocess

    cxx = shutil.which("g++") or shutil.which("c++")
    if not cxx:
        pytest.skip("no host C++ compiler")
    body = source.replace('extern "C" ', "")
    src = HARNESS.replace("KERNEL", body).replace("NAME", name).replace("THREADS", str(tailzero.THREADS))
    (tmp_path / "tail.cc").write_text(src)
    subprocess.run([cxx, "-O1", "-Wall", "-Werror", "-o", str(tmp_path / "tail"), str(tmp_path / "tail.cc")], check=True)
    stdin = "".join(f"{len(o)} {m} {cols} {ld} {grid} {' '.join(map(str, o))}\n" for o, m, cols, ld, grid in cases)
    out = subprocess.run([str(tmp_path / "tail")], input=stdin, capture_output=True, text=True, check=True).stdout
    return out.split()


def _want(offs, m, cols, ld) -> str:
    """The rule, restated: element (r, c) of the M x ld store is 0 where r >= offs[-1] clamped into [0, M] and c < cols;
    every other element keeps its value."""
    end = min(max(offs[-1], 0), m)
    return "".join("0" if r >= end and c < cols else "1" for r in range(m) for c in range(ld))


def _cases():
    import random

    rng = random.Random(7)
    cases = [([3, 3, 9], 20, 7, 7, 4), ([5], 5, 64, 64, 2), ([2, 40], 12, 33, 48, 24), ([-4], 6, 8, 8, 3),
             ([1], 4, 600, 640, 8), ([0], 9, 3, 5, 1)]
    for _ in range(40):
        m, cols = rng.randint(1, 40), rng.randint(1, 300)
        offs = sorted(rng.randint(-5, m + 5) for _ in range(rng.randint(1, 4)))
        cases.append((offs, m, cols, cols + rng.choice((0, 0, 3, 16)), rng.randint(1, 2 * m)))
    return cases


def test_the_rendered_kernel_zeroes_exactly_the_tail_on_the_host(tmp_path):
    """L1 of the kernel's index arithmetic: its rendered source compiled as host C++ and run over every CTA and thread
    of the grid (grids smaller and larger than the tail's rows, rows wider than a CTA, row strides past the width,
    offsets past M and below 0) writes 0 exactly where the rule says and nothing else."""
    k = tailzero.kernel_for("f32")
    cases = _cases()
    got = _host_run(tmp_path, k.render(), k.name, cases)
    assert len(got) == len(cases)
    for (offs, m, cols, ld, grid), g in zip(cases, got):
        assert g == _want(offs, m, cols, ld), (offs, m, cols, ld, grid)


def test_control_a_kernel_that_ends_at_the_first_group_is_caught(tmp_path):
    """Control: the same harness over a kernel reading offs[0] for the groups' end fails the rule."""
    k = tailzero.kernel_for("f32")
    source = k.render()
    assert "offs[G - 1]" in source
    cases = _cases()
    got = _host_run(tmp_path, source.replace("offs[G - 1]", "offs[0]"), k.name, cases)
    assert any(g != _want(*c[:4]) for c, g in zip(cases, got))
