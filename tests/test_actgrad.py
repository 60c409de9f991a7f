"""ptxgen.ops.actgrad: a Linear layer's activation backward and bias gradient in one pass (two kernels written with
ptxgen.author). L1 (no GPU): the derivative kernel's rendered source compiled as host C++ (its MUFU and conversion
helpers replaced by exact host ones) and run over every CTA and thread of its grid writes every element of dz from
its own dy and z and per-CTA column sums that add up to the column sums of that dz, at odd shapes, strides and row
splits (bf16, and f16 where the host compiler has _Float16); controls with a row block shifted and the sums written
to the wrong row are caught. The column sum's rendered source, a host thread per CUDA thread, adds in its stated
order bit for bit (control: the ways reversed). L2 (no GPU): each kernel compiles for sm_90a with no MMA and no local
memory, the derivative kernel with 16-byte loads and stores. gpu: dz and dbias against float64 (and torch's two
operators) for every activation, both 16-bit types, three bias types, odd shapes and strided rows; the operator's
fallback where the kernels do not take the tensors."""

from __future__ import annotations

import math
import random
import re

import pytest

from ptxgen.ops import actgrad

GELU_K0 = math.sqrt(2.0 / math.pi)


# -- L2 -------------------------------------------------------------------------------------------------------------------

def _opcodes(dump: str) -> list[str]:
    return re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_.]+)", dump)


@pytest.mark.parametrize("act", actgrad.ACTIVATIONS)
@pytest.mark.parametrize("dtype", actgrad.DTYPES)
def test_the_derivative_kernel_compiles_with_16_byte_accesses_and_no_local_memory(act, dtype):
    from ptxgen.author import build

    built = build(actgrad.grad_kernel(act, dtype))
    assert built.sass.ok and built.sass.counts == {"HGMMA": 0} and built.sass.local_bytes == 0, built.sass.problems
    ops = _opcodes(built.sass_dump)
    assert sum(o.startswith("LDG.E.128") for o in ops) >= 2 and "STG.E.128" in ops, sorted(set(ops))
    assert not any(o.startswith(("LDG.E.U16", "STG.E.U16", "LDG.E.32", "STG.E.32")) for o in ops)


@pytest.mark.parametrize("out", actgrad.BIAS_DTYPES)
def test_the_column_sum_kernel_compiles_without_local_memory(out):
    from ptxgen.author import build

    built = build(actgrad.sum_kernel(out))
    assert built.sass.ok and built.sass.local_bytes == 0, built.sass.problems


def test_refusals_name_the_legal_values():
    with pytest.raises(ValueError, match="relu, gelu_tanh, gelu_erf, silu"):
        actgrad.grad_kernel("tanh", "bf16")
    with pytest.raises(ValueError, match="bf16 or f16"):
        actgrad.grad_kernel("relu", "f32")
    with pytest.raises(ValueError, match="bf16, f16, f32"):
        actgrad.sum_kernel("e4m3")


def test_grid_plan_covers_every_row_and_column_once():
    """Exhaustive over small shapes and SM counts: the row blocks tile [0, M) (no empty block, none past M), the
    column CTAs cover N, at least MIN_ROWS_PER_CTA rows a block unless M is smaller."""
    for sms in (1, 2, 7, 132):
        for m in list(range(1, 70)) + [1000, 8192]:
            for n in (8, 1024, 1032, 4096, 14336):
                cols, blocks, rows = actgrad.grid_plan(m, n, sms)
                assert cols * actgrad.THREADS * actgrad.COLS_PER_THREAD >= n > (cols - 1) * actgrad.THREADS * 8
                assert blocks * rows >= m > (blocks - 1) * rows, (m, n, sms)
                assert rows >= min(m, actgrad.MIN_ROWS_PER_CTA)


# -- L1: the rendered derivative kernel as host C++ ----------------------------------------------------------------------

HOST = r"""
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>
struct Dim3 { unsigned x, y, z; };
static Dim3 blockIdx, threadIdx, gridDim;
struct uint4 { unsigned x, y, z, w; };
struct float4 { float x, y, z, w; };
static float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
static int min(int a, int b) { return a < b ? a : b; }
static float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
static unsigned short f32_to_bf16_bits(float x) {  // round to nearest even
  unsigned u; std::memcpy(&u, &x, 4); u += 0x7fffu + ((u >> 16) & 1u); return static_cast<unsigned short>(u >> 16);
}
static void b32_to_b16x2(unsigned w, unsigned short& lo, unsigned short& hi) {
  lo = static_cast<unsigned short>(w & 0xffffu); hi = static_cast<unsigned short>(w >> 16);
}
static unsigned b16x2_to_b32(unsigned short lo, unsigned short hi) { return lo | (static_cast<unsigned>(hi) << 16); }
#ifdef HOST_F16
static unsigned short f32_to_f16_bits(float x) { _Float16 h = static_cast<_Float16>(x); unsigned short u; std::memcpy(&u, &h, 2); return u; }
static float f16_bits_to_f32(unsigned short u) { _Float16 h; std::memcpy(&h, &u, 2); return static_cast<float>(h); }
#endif
static float tanh_approx(float x) { return std::tanh(x); }
static float ex2_approx(float x) { return std::exp2(x); }
static float rcp_approx(float x) { return 1.f / x; }
static float host_expf(float x) { return std::exp(x); }
#define __expf host_expf
#define __device__
#define __forceinline__ inline
#define __global__
#define __launch_bounds__(n)
#define __restrict__
KERNEL
int main() {
  int m, n, ld_dy, ld_z, ld_dz, cols, blocks, rows;
  while (std::scanf("%d %d %d %d %d %d %d %d", &m, &n, &ld_dy, &ld_z, &ld_dz, &cols, &blocks, &rows) == 8) {
    std::vector<unsigned short> dy(static_cast<size_t>(m) * ld_dy), z(static_cast<size_t>(m) * ld_z);
    for (auto& v : dy) { unsigned t; std::scanf("%u", &t); v = static_cast<unsigned short>(t); }
    for (auto& v : z) { unsigned t; std::scanf("%u", &t); v = static_cast<unsigned short>(t); }
    std::vector<unsigned short> dz(static_cast<size_t>(m) * ld_dz, 0xffffu);
    std::vector<float> partial(static_cast<size_t>(blocks) * n, NAN);
    gridDim = {static_cast<unsigned>(cols), static_cast<unsigned>(blocks), 1};
    for (int by = 0; by < blocks; ++by)
      for (int bx = 0; bx < cols; ++bx)
        for (int t = 0; t < THREADS; ++t) {
          blockIdx = {static_cast<unsigned>(bx), static_cast<unsigned>(by), 0};
          threadIdx = {static_cast<unsigned>(t), 0, 0};
          NAME(dy.data(), z.data(), dz.data(), partial.data(), m, n, rows, ld_dy, ld_z, ld_dz);
        }
    for (auto v : dz) std::printf("%u ", v);
    std::printf("\n");
    for (auto v : partial) std::printf("%.9g ", v);
    std::printf("\n");
  }
  return 0;
}
"""


def _host_source(source: str) -> str:
    """The rendered kernel without its inline-PTX helpers (each one ``__device__ __forceinline__`` function whose body
    holds ``asm(``); HOST defines exact host functions of the same names."""
    out, skip = [], False
    lines = source.replace('extern "C" ', "").splitlines()
    for i, line in enumerate(lines):
        if line.startswith("__device__ __forceinline__") and any("asm(" in x for x in lines[i:i + 4]) and line.rstrip().endswith("{"):
            skip = True
        if not skip:
            out.append(line)
        elif line == "}":
            skip = False
    return "\n".join(out)


def _bits(x: float, dtype: str) -> int:
    """x rounded to the nearest even 16-bit value of ``dtype``, as its bits (bf16: the top half of f32; f16: IEEE half)."""
    import struct

    if dtype == "f16":
        return struct.unpack("<H", struct.pack("<e", x))[0]
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def _f(bits: int, dtype: str = "bf16") -> float:
    import struct

    if dtype == "f16":
        return struct.unpack("<e", struct.pack("<H", bits & 0xFFFF))[0]
    return struct.unpack("<f", struct.pack("<I", (bits & 0xFFFF) << 16))[0]


STEP = {"bf16": 2 ** -7, "f16": 2 ** -10}  # a 16-bit type's relative rounding step
FLOOR = {"bf16": 0.0, "f16": 2 ** -24}  # f16's subnormal step


def _dact(act: str, z: float) -> float:
    """act'(z), restated from the formulas (ptxgen.isa.epiops.Activation.derivative), in float64."""
    if act == "relu":
        return 1.0 if z > 0 else 0.0
    if act == "silu":
        s = 1.0 / (1.0 + math.exp(-z))
        return s * (1.0 + z * (1.0 - s))
    if act == "gelu_erf":
        return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0))) + z * math.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    t = math.tanh(GELU_K0 * (z + 0.044715 * z ** 3))
    return 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * GELU_K0 * (1.0 + 3.0 * 0.044715 * z * z)


def _cases(seed: int = 3):
    rng = random.Random(seed)
    cases = [(1, 8, 8, 8, 8, 1), (3, 1032, 1032, 1040, 1032, 1), (40, 16, 24, 16, 32, 5), (17, 2056, 2056, 2056, 2064, 2)]
    for _ in range(8):
        m, n = rng.randint(1, 48), 8 * rng.randint(1, 140)
        cases.append((m, n, n + 8 * rng.randint(0, 2), n + 8 * rng.randint(0, 2), n + 8 * rng.randint(0, 2), rng.randint(1, 9)))
    return cases


def _compile_host(tmp_path, src: str, stem: str, flags: list, missing: str, why: str):
    """``src`` compiled by the host C++ compiler into tmp_path/stem (warnings as errors but for unused functions and CUDA
    pragmas); the test skips without a compiler, or when the compiler's complaint names ``missing`` (``why``)."""
    import shutil
    import subprocess

    cxx = shutil.which("g++") or shutil.which("c++")
    if not cxx:
        pytest.skip("no host C++ compiler")
    (tmp_path / f"{stem}.cc").write_text(src)
    built = subprocess.run([cxx, "-O1", "-Wall", "-Wno-unused-function", "-Wno-unknown-pragmas", *flags, "-o",
                            str(tmp_path / stem), str(tmp_path / f"{stem}.cc")], capture_output=True, text=True)
    if built.returncode and missing and missing in built.stderr:
        pytest.skip(why)
    assert built.returncode == 0, built.stderr[-2000:]
    return tmp_path / stem


def _host_run(tmp_path, source: str, name: str, act: str, cases, dtype: str = "bf16"):
    import subprocess

    src = HOST.replace("KERNEL", _host_source(source)).replace("NAME", name).replace("THREADS", str(actgrad.THREADS))
    f16 = dtype == "f16"
    exe = _compile_host(tmp_path, src, "actgrad", ["-Werror", *(["-DHOST_F16"] if f16 else [])], "_Float16" if f16 else "",
                        "the host C++ compiler has no _Float16")
    rng = random.Random(11)
    lines, inputs = [], []
    for m, n, ld_dy, ld_z, ld_dz, sms in cases:
        cols, blocks, rows = actgrad.grid_plan(m, n, sms)
        dy = [_bits(rng.uniform(-3, 3), dtype) for _ in range(m * ld_dy)]
        z = [_bits(rng.uniform(-5, 5), dtype) for _ in range(m * ld_z)]
        inputs.append((dy, z, blocks))
        lines.append(f"{m} {n} {ld_dy} {ld_z} {ld_dz} {cols} {blocks} {rows}\n{' '.join(map(str, dy))}\n{' '.join(map(str, z))}\n")
    out = subprocess.run([str(exe)], input="".join(lines), capture_output=True, text=True, check=True).stdout.splitlines()
    return [(inputs[i], [int(v) for v in out[2 * i].split()], [float(v) for v in out[2 * i + 1].split()])
            for i in range(len(cases))]


def _problems(act: str, case, result, dtype: str = "bf16") -> list[str]:
    """What the rule says, checked: dz[r, c] = round16(dy x act'(z)) of its own element (within one step of the 16-bit
    type of the float64 value, plus 1e-6 |dy| for the f32 formulas' cancellation where act'(z) is near 0 and f16's
    subnormal step), padding columns untouched; the per-block sums of each column add up to
    the column's sum of dz (as stored)."""
    m, n, ld_dy, ld_z, ld_dz, _ = case
    (dy, z, blocks), dz, partial = result
    bad = []
    for r in range(m):
        for c in range(ld_dz):
            got = dz[r * ld_dz + c]
            if c >= n:
                if got != 0xFFFF:
                    bad.append(f"padding ({r}, {c}) written")
                continue
            g = _f(dy[r * ld_dy + c], dtype)
            want = g * _dact(act, _f(z[r * ld_z + c], dtype))
            if got == 0xFFFF or abs(_f(got, dtype) - want) > STEP[dtype] * abs(want) + 1e-6 * abs(g) + FLOOR[dtype]:
                bad.append(f"dz ({r}, {c}) = {_f(got, dtype)} != {want}")
    for c in range(n):
        col = sum(_f(dz[r * ld_dz + c], dtype) for r in range(m))
        got = sum(partial[b * n + c] for b in range(blocks))
        if not math.isfinite(got) or abs(got - col) > 1e-5 * max(1.0, abs(col)):
            bad.append(f"column {c}: partial sums {got} != {col}")
    return bad


@pytest.mark.parametrize("act,dtype", [(a, "bf16") for a in actgrad.ACTIVATIONS] + [("gelu_tanh", "f16"), ("silu", "f16")])
def test_the_rendered_kernel_writes_dz_and_column_sums_on_the_host(tmp_path, act, dtype):
    k = actgrad.grad_kernel(act, dtype)
    cases = _cases()
    for case, result in zip(cases, _host_run(tmp_path, k.render(), k.name, act, cases, dtype)):
        assert _problems(act, case, result, dtype) == [], case


@pytest.mark.parametrize("mutation", ["row block", "partial row"])
def test_control_a_shifted_row_block_or_sums_in_the_wrong_row_are_caught(tmp_path, mutation):
    k = actgrad.grad_kernel("gelu_tanh", "bf16")
    source = k.render()
    old = {"row block": "static_cast<int>(blockIdx.y) * rows_per_cta;",
           "partial row": "static_cast<unsigned long long>(blockIdx.y) * N + c0"}[mutation]
    new = {"row block": "static_cast<int>(blockIdx.y) * rows_per_cta + 1;",
           "partial row": "static_cast<unsigned long long>(blockIdx.x) * N + c0"}[mutation]
    assert old in source
    cases = [c for c in _cases() if actgrad.grid_plan(c[0], c[1], c[5])[1] > 1 or mutation == "row block"]
    results = _host_run(tmp_path, source.replace(old, new), k.name, "gelu_tanh", cases)
    assert any(_problems("gelu_tanh", c, r) for c, r in zip(cases, results))


# -- L1: the rendered column sum as host C++, a real thread per CUDA thread (std::barrier for __syncthreads) ----------

SUM_HOST = r"""
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>
struct Dim3 { unsigned x, y, z; };
static thread_local Dim3 threadIdx;
static Dim3 blockIdx, gridDim;
static std::barrier<>* cta_barrier;
static void __syncthreads() { cta_barrier->arrive_and_wait(); }
static unsigned short f32_to_bf16_bits(float x) {  // round to nearest even
  unsigned u; std::memcpy(&u, &x, 4); u += 0x7fffu + ((u >> 16) & 1u); return static_cast<unsigned short>(u >> 16);
}
#define __device__
#define __forceinline__ inline
#define __global__
#define __launch_bounds__(n)
#define __restrict__
#define __shared__ static
KERNEL
int main() {
  int n, parts;
  while (std::scanf("%d %d", &n, &parts) == 2) {
    std::vector<float> partial(static_cast<size_t>(parts) * n);
    for (auto& v : partial) std::scanf("%f", &v);
    std::vector<OUT_T> out(n + 1, SENTINEL);
    const unsigned ctas = (n + COLS - 1) / COLS;
    gridDim = {ctas, 1, 1};
    for (unsigned b = 0; b < ctas; ++b) {
      blockIdx = {b, 0, 0};
      std::barrier<> bar(COLS * WAYS);
      cta_barrier = &bar;
      std::vector<std::thread> threads;
      for (int t = 0; t < COLS * WAYS; ++t)
        threads.emplace_back([&, t] {
          threadIdx = {static_cast<unsigned>(t % COLS), static_cast<unsigned>(t / COLS), 0};
          NAME(partial.data(), out.data(), n, parts);
        });
      for (auto& th : threads) th.join();
    }
    for (auto v : out) std::printf(FMT, v);
    std::printf("\n");
  }
  return 0;
}
"""


def _sum_run(tmp_path, source: str, name: str, out_dtype: str, cases) -> list[list[str]]:
    import subprocess

    f32 = out_dtype == "f32"
    src = (SUM_HOST.replace("KERNEL", _host_source(source)).replace("NAME", name)
           .replace("OUT_T", "float" if f32 else "unsigned short").replace("SENTINEL", "NAN" if f32 else "0xffffu")
           .replace("FMT", '"%a "' if f32 else '"%u "').replace("COLS", str(actgrad.SUM_COLS))
           .replace("WAYS", str(actgrad.SUM_WAYS)))
    exe = _compile_host(tmp_path, src, "colsum", ["-std=c++20", "-pthread"], "barrier",
                        "the host C++ compiler has no std::barrier (C++20)")
    stdin = "".join(f"{n} {parts}\n{' '.join(repr(float(v)) for v in vals)}\n" for n, parts, vals in cases)
    out = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, check=True).stdout
    return [line.split() for line in out.splitlines()]


def _sum_cases(seed: int = 5):
    """Partial sums of mixed magnitudes (the order of the additions shows in the last bits), N around the 32-column CTA
    edge, 1 to 40 parts (fewer than the 8 ways, and many more)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    cases = []
    for n, parts in ((1, 1), (31, 3), (32, 8), (33, 9), (70, 40), (100, 17)):
        vals = (rng.standard_normal(n * parts) * 10.0 ** rng.integers(-3, 4, n * parts)).astype(np.float32)
        cases.append((n, parts, vals))
    return cases


def _sum_want(n: int, parts: int, vals, out_dtype: str) -> list[str]:
    """The kernel's order, restated in f32: way w adds rows w, w + 8, ... of a column in turn; way 0 then adds the 8
    ways' sums in order w = 0..7 to 0; the result rounded to the output type (to nearest even). The extra element past
    N is untouched."""
    import numpy as np

    v = np.asarray(vals, dtype=np.float32).reshape(parts, n)
    out = []
    for c in range(n):
        ways = []
        for w in range(actgrad.SUM_WAYS):
            s = np.float32(0)
            for r in range(w, parts, actgrad.SUM_WAYS):
                s = np.float32(s + v[r, c])
            ways.append(s)
        t = np.float32(0)
        for s in ways:
            t = np.float32(t + s)
        out.append(float(t).hex() if out_dtype == "f32" else str(_bits(float(t), out_dtype)))
    return out + (["nan"] if out_dtype == "f32" else ["65535"])


def _sum_got(tokens: list[str], out_dtype: str) -> list[str]:
    return [t if t == "nan" else float.fromhex(t).hex() for t in tokens] if out_dtype == "f32" else tokens


@pytest.mark.parametrize("out_dtype", ["f32", "bf16"])
def test_the_rendered_column_sum_adds_in_its_fixed_order_on_the_host(tmp_path, out_dtype):
    """L1 of the second kernel: its rendered source as host C++, one std::thread per CUDA thread of each CTA and a
    std::barrier for __syncthreads: every column's result equals, bit for bit, the f32 sum in the order the kernel
    states (restated in numpy), rounded to the output type; nothing past N is written."""
    k = actgrad.sum_kernel(out_dtype)
    cases = _sum_cases()
    got = _sum_run(tmp_path, k.render(), k.name, out_dtype, cases)
    for (n, parts, vals), g in zip(cases, got):
        assert _sum_got(g, out_dtype) == _sum_want(n, parts, vals, out_dtype), (n, parts)


def test_control_the_ways_added_in_another_order_are_caught(tmp_path):
    """Control: the same kernel adding the 8 ways' sums last to first differs in the last bits somewhere."""
    k = actgrad.sum_kernel("f32")
    source = k.render()
    old = f"for (int w = 0; w < {actgrad.SUM_WAYS}; ++w)"
    assert old in source
    cases = _sum_cases()
    got = _sum_run(tmp_path, source.replace(old, f"for (int w = {actgrad.SUM_WAYS - 1}; w >= 0; --w)"), k.name, "f32", cases)
    assert any(_sum_got(g, "f32") != _sum_want(n, p, v, "f32") for (n, p, v), g in zip(cases, got))


# -- gpu ----------------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def torch(torch_cuda):
    return torch_cuda


def _reference(torch, dy, z, act):
    from ptxgen.ops.opsref import activation_backward

    return activation_backward(dy.double(), z.double(), act)


@pytest.mark.gpu
@pytest.mark.parametrize("act", actgrad.ACTIVATIONS)
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("shape,ld", [((1, 8), 8), ((300, 1032), 1032), ((1000, 4104), 4112), ((2048, 14336), 14336),
                                      ((37, 2056), 2064)])
def test_dz_and_dbias_against_float64(torch, act, dtype, shape, ld):
    """dz within one 16-bit rounding of the float64 derivative times dy (plus 2e-6 |dy|: the f32 formulas near act' = 0); dbias equal (f32 accumulation) to the float64
    sum of the dz the kernel wrote, and close to the float64 sum of the exact dz; strided rows (ld > N) read in place."""
    dt = getattr(torch, dtype)
    m, n = shape
    g = torch.Generator(device="cuda").manual_seed(m + n)
    dy = (torch.randn(m, ld, device="cuda", generator=g) * 2).to(dt)[:, :n]
    z = (torch.randn(m, ld, device="cuda", generator=g) * 3).to(dt)[:, :n]
    assert actgrad.eligible(dy, z, act, torch.float32)
    for bias_dtype in (torch.float32, torch.bfloat16, torch.float16):
        dz, dbias = actgrad.activation_grad(torch, dy, z, act, bias_dtype)
        torch.cuda.synchronize()
        ref = _reference(torch, dy, z, act)
        assert dz.dtype == dt and dz.shape == (m, n) and dz.is_contiguous() and dbias.dtype == bias_dtype
        step = 2 ** -7 if dtype == "bfloat16" else 2 ** -10
        err = (dz.double() - ref).abs() - step * ref.abs() - 2e-6 * dy.double().abs() - 2 ** -24  # f16 subnormals
        assert err.max().item() <= 0, f"dz off by {err.max().item()}"
        own = dz.double().sum(0)
        bstep = {torch.float32: 1e-5, torch.bfloat16: 2 ** -8, torch.float16: 2 ** -10}[bias_dtype]  # its own rounding
        tol = dict(rtol=bstep, atol=bstep if bias_dtype != torch.float32 else 1e-4)
        torch.testing.assert_close(dbias.double(), own, **tol)
        torch.testing.assert_close(dbias.double(), ref.sum(0), rtol=1e-2, atol=step * m ** 0.5 * 4)


@pytest.mark.gpu
def test_the_operator_falls_back_where_the_kernels_do_not_take_the_tensors(torch):
    """N not a multiple of 8 and a row stride of an odd number of elements go through torch's two operators: same
    results as the reference; f32 tensors too."""
    import ptxgen

    ptxgen.register_torch_ops()
    for m, n, ld, dt in ((5, 12, 12, torch.bfloat16), (9, 16, 17, torch.float16), (4, 16, 16, torch.float32)):
        dy = torch.randn(m, ld, device="cuda").to(dt)[:, :n]
        z = torch.randn(m, ld, device="cuda").to(dt)[:, :n]
        assert not actgrad.eligible(dy, z, "gelu_tanh", torch.float32)
        dz, dbias = torch.ops.ptxgen.activation_grad(dy, z, "gelu", "f32")
        ref = _reference(torch, dy, z, "gelu_tanh")
        torch.testing.assert_close(dz.double(), ref, rtol=1e-2, atol=1e-2)
        torch.testing.assert_close(dbias.double(), dz.double().sum(0), rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
def test_the_operator_runs_the_kernels_where_they_take_the_tensors(torch, monkeypatch):
    """With actgrad.ENABLED set, torch.ops.ptxgen.activation_grad returns what the kernels write (bit for
    bit); unset, torch's two operators (the same values up to the derivative's rounding)."""
    import ptxgen

    ptxgen.register_torch_ops()
    dy = torch.randn(300, 1032, device="cuda", dtype=torch.bfloat16)
    z = torch.randn_like(dy) * 3
    want_dz, want_db = actgrad.activation_grad(torch, dy, z, "gelu_tanh", torch.bfloat16)
    monkeypatch.setattr(actgrad, "ENABLED", True)
    dz, db = torch.ops.ptxgen.activation_grad(dy, z, "gelu", "bf16")
    assert torch.equal(dz, want_dz) and torch.equal(db, want_db)
    monkeypatch.setattr(actgrad, "ENABLED", False)
    dz2, db2 = torch.ops.ptxgen.activation_grad(dy, z, "gelu", "bf16")
    torch.testing.assert_close(dz2, want_dz, rtol=2 ** -7, atol=1e-5)
    torch.testing.assert_close(db2.float(), want_db.float(), rtol=2e-2, atol=0.5)


@pytest.mark.gpu
def test_a_linear_layers_bias_gradient_through_the_one_pass_operator(torch, monkeypatch):
    """ptxgen.nn.Linear with gelu: the step's bias gradient (the one-pass operator's kernels, in eager mode) against
    torch's Linear + GELU(tanh) in float64 from the same weights."""
    import ptxgen.nn as pnn

    monkeypatch.setattr(actgrad, "ENABLED", True)

    lin = pnn.Linear(256, 1024, activation="gelu", dtype=torch.bfloat16, device="cuda")
    ref = torch.nn.Linear(256, 1024, dtype=torch.float64, device="cuda")
    with torch.no_grad():
        ref.weight.copy_(lin.weight.double()); ref.bias.copy_(lin.bias.double())
    x = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16)
    dy = torch.randn(512, 1024, device="cuda", dtype=torch.bfloat16)
    lin(x).backward(dy)
    torch.nn.functional.gelu(ref(x.double()), approximate="tanh").backward(dy.double())
    scale = ref.bias.grad.abs().max().item()
    assert (lin.bias.grad.double() - ref.bias.grad).abs().max().item() <= 0.02 * scale
