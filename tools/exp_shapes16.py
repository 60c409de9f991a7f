"""Issue 16, GPU experiment 1 (one process per mode; tools/gpu_issue16.sh runs them with timeouts).

Hypotheses written before the run (docs/performance.md, run 25, says what came out):
 H1 the slow row pitches are the ones whose rows do not start on a 32-byte L2 sector (phase 16, 48, 80, 112 B past a
    128-byte line); phases 0, 32, 64, 96 are fast.
 H2 the tensor map's L2 promotion (none / 64 / 128 / 256 B) changes the loss of the 16-B phase (a 256-B promotion of a
    row that straddles lines fetches more); prediction: small effect either way.
 H3 the loss is in the copy engine's handling of a box row that starts mid-sector: the 64-B swizzle (64-B box rows,
    3 sectors instead of 2) loses more, the cp.async producer (16-B copies, no TMA) loses nothing to the phase but is
    slower at phase 0.
 H4 ncu: at the 16-B phase the kernel's L2 read requests/sectors per byte delivered rise (5 sectors per 128-B row).
 H5 small M: the tuned kernels (128 x 256 tiles) leave most SMs idle at M <= 128 (N / 256 CTAs); smaller BN and BM = 64
    tiles raise the bandwidth; cuBLAS picks split-K kernels there (kernel names from the torch profiler).

Experiment 2 (mode ``variants``), hypotheses written before the second run:
 H6 128-byte L2 promotion (now derived from the row pitch at launch) lifts the chooser's kernels on the four unaligned
    shapes from about 0.6 to about 0.75, as it did for the 128 x 256 kernel at 5120 x 5120 x 5000.
 H7 the kernel is L2-bound at those phases (ncu, run 25), so a 2x1 cluster that multicasts B (a third less L2 -> SM
    traffic) adds more there than on rows on a sector (runs 15-17: within +-0.03); 1x2 (multicast A) less than 2x1.
 H8 small N (N <= 128, M large) mirrors small M: 128 x 64 or 64 x 64 tiles, one CTA per tile, beat the nearest-fit
    kernel (a 128 x 192 / 128 x 256 tile whose B box is mostly zero fill).

Modes: pitch | ncu | names | smallm | variants | shapes SHAPES...
"""

import math
import sys

import torch

from ptxgen import make_spec
from ptxgen.derive.kernel import plan_kernel
from ptxgen.emit.render import render_kernel
from ptxgen.runtime import bench
from ptxgen.runtime.bench import alternate
from ptxgen.runtime.gpu import Kernel, require_gpu
from ptxgen.runtime.launch import Problem, gemm_args, launch_geometry
from ptxgen.runtime.tensormap import encode
from ptxgen.runtime.toolchain import compile_cuda
from ptxgen.runtime.choose import choose_spec

BASE = dict(bm=128, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", out_dtype="bf16", arch="sm_90a",
            stages=4, schedule="persistent", epilogue="tma")
VARIANTS = {
    "base": {},
    "sw64_bk64": dict(a="kmajor-sw64", b="kmajor-sw64"),
    "sw64_bk32_s6": dict(a="kmajor-sw64", b="kmajor-sw64", bk=32, stages=6),
    "sw32_bk64": dict(a="kmajor-sw32", b="kmajor-sw32"),
    "cpasync": dict(loader="cp.async"),
    "128x128_s6": dict(bn=128, stages=6),
}


class Runner:
    """One spec on views A[m, :k], B[n, :k] of tensors whose rows are ``pitch`` elements apart; ``l2`` overrides the
    tensor maps' L2 promotion (0 none, 1 64 B, 2 128 B, 3 256 B)."""

    def __init__(self, spec, m, n, k, pitch, l2=None, seed=0):
        dev = require_gpu()
        self.plan = plan_kernel(spec)
        c = compile_cuda(render_kernel(self.plan), spec.kernel_name, spec.arch.value)
        self.kernel = Kernel(c.cubin, spec.kernel_name, self.plan.abi.dynamic_smem_bytes)
        g = torch.Generator(device="cuda").manual_seed(seed)
        self.a = torch.randn(m, pitch, device="cuda", dtype=torch.bfloat16, generator=g)[:, :k]
        self.b = torch.randn(n, pitch, device="cuda", dtype=torch.bfloat16, generator=g)[:, :k]
        ldd = -(-n // 8) * 8
        self.d = torch.full((m, ldd), float("nan"), device="cuda", dtype=torch.bfloat16)[:, :n]
        p = Problem(m, n, k, pitch, pitch, ldd)
        enc = encode if l2 is None else (lambda args: encode(__import__("dataclasses").replace(args, l2_promotion=l2)))
        args = gemm_args(self.plan, self.a.data_ptr(), self.b.data_ptr(), self.d.data_ptr(), p, encode=enc)
        grid, block, _ = launch_geometry(self.plan, p, dev.sm_count, self.kernel)
        self.ours = lambda: self.kernel.launch(grid, block, args)
        self.base = lambda: torch.matmul(self.a, self.b.t())
        self.ref = self.a.float() @ self.b.float().t()
        self.ref_norm = torch.linalg.norm(self.ref)

    def err(self):
        return float(torch.linalg.norm(self.d.float() - self.ref) / self.ref_norm)


def pitch_mode():
    m = n = 5120
    k = 5000
    rows = []
    for phase in (0, 16, 32, 48, 64, 80, 112):
        rows.append(("base", phase, None))
    for name in VARIANTS:
        if name != "base":
            rows += [(name, ph, None) for ph in (0, 16, 48)]
    rows += [("base", ph, l2) for ph in (0, 16, 48) for l2 in (0, 1, 2)]  # 3 (256 B) is the default
    for name, phase, l2 in rows:
        pitch = 5056 + phase // 2  # 5056 elements = 10112 B = 79 lines: phase 0
        try:
            spec = make_spec(**{**BASE, **VARIANTS[name]})
            r = Runner(spec, m, n, k, pitch, l2)
            r.ours()
            torch.cuda.synchronize()
            ours, base, err = alternate(torch, r.ours, r.base, r.err, 20, 5)
            fl = 2 * m * n * k
            print(f"PITCH {name:13s} phase {phase:3d} B l2 {'default(256B)' if l2 is None else ('none', '64B', '128B')[l2]:13s} "
                  f"ratio {base / ours:.3f} ours {fl / ours / 1e9:.1f} cuBLAS {fl / base / 1e9:.1f} TFLOP/s err {err:.1e} "
                  f"{'OK' if err < 1e-2 else 'FAIL'} [{spec.kernel_name}]", flush=True)
            r.kernel.unload()
        except Exception as e:  # noqa: BLE001
            print(f"PITCH {name} phase {phase} l2 {l2}: ERROR {type(e).__name__}: {e}", flush=True)


def ncu_mode():
    """Each of: ours at phase 0, ours at phase 16, cuBLAS at phase 0, cuBLAS at phase 16 (profiled range only)."""
    spec = make_spec(**BASE)
    runs = [Runner(spec, 5120, 5120, 5000, 5056 + ph // 2) for ph in (0, 16)]
    for r in runs:
        r.ours(), r.base()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for r in runs:
        r.ours()
        torch.cuda.synchronize()
    for r in runs:
        r.base()
        torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print("ncu order: ours phase 0, ours phase 16, cuBLAS phase 0, cuBLAS phase 16")


def names_mode():
    """The cuBLAS kernel torch.matmul runs, per shape (and pitch)."""
    from torch.profiler import ProfilerActivity, profile

    cases = [(5120, 5120, 5000, 5056), (5120, 5120, 5000, 5000), (5120, 5120, 5000, 5024), (5000, 5000, 5000, 5000)]
    cases += [(m, n, k, k) for m in (1, 16, 64, 128) for n, k in ((4096, 4096), (7168, 16384), (16384, 4096))]
    for m, n, k, pitch in cases:
        a = torch.randn(m, pitch, device="cuda", dtype=torch.bfloat16)[:, :k]
        b = torch.randn(n, pitch, device="cuda", dtype=torch.bfloat16)[:, :k]
        torch.matmul(a, b.t())
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            torch.matmul(a, b.t())
            torch.cuda.synchronize()
        names = [e.key for e in prof.key_averages() if e.device_type.name == "CUDA"]
        print(f"NAMES {m}x{n}x{k} pitch {pitch}: {names}", flush=True)


SMALL_M_TILES = [  # bm, bn, bk, stages, schedule, epilogue
    (64, 32, 128, 8, "tile", "direct"), (64, 64, 64, 8, "tile", "direct"), (64, 64, 128, 6, "tile", "direct"),
    (64, 128, 64, 8, "tile", "direct"), (64, 128, 64, 7, "tile", "tma"), (128, 64, 64, 8, "tile", "direct"),
    (64, 256, 64, 5, "tile", "direct"),
]


def smallm_mode():
    shapes = [(m, n, k) for m in (1, 16, 64, 128) for n, k in ((4096, 4096), (7168, 16384), (16384, 4096))]
    for m, n, k in shapes:
        specs = [("chosen", choose_spec("bf16", "sm_90a", m, n, k)[0])]
        for bm, bn, bk, st, sch, ep in SMALL_M_TILES:
            try:
                specs.append((f"{bm}x{bn}x{bk}", make_spec(**{**BASE, "bm": bm, "bn": bn, "bk": bk, "stages": st,
                                                              "schedule": sch, "epilogue": ep})))
            except Exception as e:  # noqa: BLE001
                print(f"SMALLM skip {bm}x{bn}x{bk}: {e}", flush=True)
        for label, spec in specs:
            try:
                r = bench.bench_spec(spec, m, n, k, warmup=5, iters=20)
                gb = (m * k + n * k + m * n) * 2
                print(f"SMALLM {m}x{n}x{k} {label:12s} ratio {r.ratio:.3f} ours {r.ours_tflops:.1f} TFLOP/s "
                      f"{gb / r.ours_ms / 1e9:.2f} TB/s cuBLAS {r.cublas_tflops:.1f} TFLOP/s {gb / r.cublas_ms / 1e9:.2f} TB/s "
                      f"ok {r.checked_ok} err {r.rel_error:.1e} [{spec.kernel_name}]", flush=True)
            except Exception as e:  # noqa: BLE001
                print(f"SMALLM {m}x{n}x{k} {label}: ERROR {type(e).__name__}: {e}", flush=True)


def _run(label, spec, m, n, k, pitch, l2=None):
    try:
        r = Runner(spec, m, n, k, pitch, l2)
        r.ours()
        torch.cuda.synchronize()
        ours, base, err = alternate(torch, r.ours, r.base, r.err, 30, 5)
        fl = 2 * m * n * k
        print(f"VARIANT {m}x{n}x{k} pitch {pitch} ({pitch * 2 % 128} B) {label:24s} ratio {base / ours:.3f} ours {fl / ours / 1e9:.1f} "
              f"cuBLAS {fl / base / 1e9:.1f} TFLOP/s err {err:.1e} {'OK' if err < 1e-2 else 'FAIL'} [{spec.kernel_name}]", flush=True)
        r.kernel.unload()
    except Exception as e:  # noqa: BLE001
        print(f"VARIANT {m}x{n}x{k} {label}: ERROR {type(e).__name__}: {e}", flush=True)


def variants_mode():
    import dataclasses

    from ptxgen.isa.types import Cluster
    from ptxgen.runtime.choose import choose

    for m, n, k in ((5000, 5000, 5000), (3000, 7000, 5000), (1500, 9000, 3000), (4096, 4096, 5000)):
        c = choose("bf16", "sm_90a", m, n, k)
        plain = dataclasses.replace(c.spec, cluster=Cluster.C1X1)
        _run("1x1, L2 256B (before)", plain, m, n, k, k, l2=3)
        _run("1x1, L2 by pitch", plain, m, n, k, k)
        _run("2x1, L2 by pitch", dataclasses.replace(plain, cluster=Cluster.C2X1), m, n, k, k)
        _run("1x2, L2 by pitch", dataclasses.replace(plain, cluster=Cluster.C1X2), m, n, k, k)
        _run("2x1, L2 256B", dataclasses.replace(plain, cluster=Cluster.C2X1), m, n, k, k, l2=3)
    # small N (the mirror of small M), on shapes outside the held-out set: the older rule's kernel against the new one
    from ptxgen.derive.spec import TileSpec
    from ptxgen.runtime.choose import tile_fit
    from ptxgen.runtime.choose.tune import load_table

    for m, n, k in ((8192, 16, 8192), (16384, 64, 4096), (4096, 100, 16384)):
        entries = [e for e in load_table() if e["dtype"] == "bf16"]
        near = sorted(entries, key=lambda e: sum(abs(math.log(x) - math.log(e[d])) for x, d in ((m, "m"), (n, "n"), (k, "k"))))[:3]
        old = max((TileSpec.from_json(e["spec"]) for e in near), key=lambda s: round(tile_fit(s, m, n), 2))
        for label, spec in (("nearest-fit (before)", old), (choose("bf16", "sm_90a", m, n, k).chosen_by, choose("bf16", "sm_90a", m, n, k).spec)):
            _run(label, spec, m, n, k, k)
    base = make_spec(**BASE)
    for phase in (0, 16, 48):
        pitch = 5056 + phase // 2
        _run("128x256 1x1, L2 by pitch", base, 5120, 5120, 5000, pitch)
        _run("128x256 2x1, L2 by pitch", dataclasses.replace(base, cluster=Cluster.C2X1), 5120, 5120, 5000, pitch)


def shapes_mode(arg):
    ratios = []
    for s in arg.split(","):
        m, n, k = map(int, s.split("x"))
        spec, why = choose_spec("bf16", "sm_90a", m, n, k)
        try:
            r = bench.bench_spec(spec, m, n, k, warmup=5, iters=20)
            ratios.append(r.ratio)
            print(f"SHAPE {s} ratio {r.ratio:.3f} ours {r.ours_tflops:.1f} cuBLAS {r.cublas_tflops:.1f} TFLOP/s "
                  f"ours {r.ours_ms * 1e3:.1f} us cuBLAS {r.cublas_ms * 1e3:.1f} us ok {r.checked_ok} [{spec.kernel_name}] ({why})", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"SHAPE {s}: ERROR {type(e).__name__}: {e}", flush=True)
    print(f"SHAPES geomean {math.exp(sum(map(math.log, ratios)) / max(1, len(ratios))):.3f} over {len(ratios)}")


if __name__ == "__main__":
    mode = sys.argv[1]
    {"pitch": pitch_mode, "ncu": ncu_mode, "names": names_mode, "smallm": smallm_mode, "variants": variants_mode}.get(mode, lambda: shapes_mode(sys.argv[2]))()
