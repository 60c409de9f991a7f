"""Reference measurement (issue 17): DeepGEMM's SM90 FP8 1D2D kernel (block-scaled FP8, DeepSeek recipe) on this GPU,
beside torch's blockwise ``torch._scaled_mm`` and our default block-FP8 kernel (tools/bench_blockfp8.py's n192-s4-tma),
the same tensors, one process, alternating rounds, medians (ptxgen.runtime.check.bench.alternate_medians).

DeepGEMM stays outside the repository: tools/ref/deepgemm_harness.cu includes its headers from the paths given here
and builds one shared object per configuration (tools/ref/deepgemm_configs.py: DeepGEMM's own pick for the shape and
the 128x128 / 256x128 / 128x160 / 128x192 tiles, each with the cluster DeepGEMM's model gives it).

    # build only (no GPU, no torch): the shared objects into --build-dir
    python tools/ref/bench_deepgemm.py --build-only --dg-include DG/deep_gemm/include --cutlass-include CUTLASS/include
    # measure (builds what is missing first)
    python tools/ref/bench_deepgemm.py 4096x7168x16384 8192x8192x8192 2048x7168x4096 --rounds 8 \\
        --dg-include ... --cutlass-include ... --json out.jsonl --smi smi.csv

Every DeepGEMM output is compared with torch's blockwise output (relative Frobenius error); a configuration whose
output is off by 1e-2 or more, or that fails to build, prepare or launch, is reported and not timed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import datetime
import hashlib
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))          # deepgemm_configs
sys.path.insert(0, str(HERE.parent))   # bench_blockfp8 (inputs, Launch, parse_variant)

import deepgemm_configs as dgc  # noqa: E402

HARNESS = HERE / "deepgemm_harness.cu"
# DeepGEMM's JIT flags (csrc/jit/compiler.hpp: Compiler + NVCCCompiler), plus -shared and the ptxas report
NVCC_FLAGS = ["-std=c++20", "--diag-suppress=39,161,174,177,186,940", "--ptxas-options=--register-usage-level=10",
              "--ptxas-options=--verbose,--warn-on-local-memory-usage", "-gencode", "arch=compute_90a,code=sm_90a",
              "--compiler-options=-fPIC,-O3,-fconcepts,-Wno-deprecated-declarations,-Wno-abi", "-O3",
              "--expt-relaxed-constexpr", "--expt-extended-lambda", "-shared"]
OURS_VARIANT = "n192-s4-tma"
CHECK_TOL = 1e-2
DEFAULT_SHAPES = ["4096x7168x16384", "8192x8192x8192", "2048x7168x4096"]


def parse_shape(s: str) -> tuple[int, int, int]:
    m, n, k = (int(x) for x in s.lower().split("x"))
    return m, n, k


def parse_extra(x: str) -> tuple[int, int, int, int]:
    tile, clu = x.lower().split("-c")
    bm, bn = (int(v) for v in tile.split("x"))
    cm, cn = (int(v) for v in clu.split("x"))
    if cm * cn > 2 or bm % 64 or bn % 16 or not 16 <= bn <= 256:
        raise ValueError(x)
    return bm, bn, cm, cn


def plan_for(shape, num_sms: int, extra) -> list:
    """DeepGEMM's pick and tiles (deepgemm_configs.configs_for) plus the --extra ones not already there."""
    out = dgc.configs_for(*shape, num_sms)
    for bm, bn, cm, cn in extra:
        c = dgc.make_config(*shape, num_sms, bm, bn, cm, cn)
        if c.stages >= 1 and all(c != o for o, _ in out):
            out.append((c, False))
    return out


def stamp(cfg: dgc.DgConfig, includes: list[str]) -> str:
    h = hashlib.sha256(HARNESS.read_bytes())
    h.update(" ".join(NVCC_FLAGS + cfg.defines()).encode())
    return h.hexdigest()[:16]


def build_one(nvcc: str, cfg: dgc.DgConfig, includes: list[str], build_dir: Path) -> tuple[dgc.DgConfig, str | None]:
    """Build cfg's shared object unless one with the same stamp is there; -> (cfg, None) or (cfg, error text)."""
    so = build_dir / cfg.lib
    st = build_dir / (cfg.lib + ".stamp")
    want = stamp(cfg, includes)
    if so.exists() and st.exists() and st.read_text().strip() == want:
        return cfg, None
    cmd = [nvcc, *NVCC_FLAGS, *[f"-I{i}" for i in includes], *cfg.defines(), str(HARNESS), "-o", str(so)]
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    log = build_dir / (cfg.lib + ".log")
    log.write_text(" ".join(cmd) + "\n" + r.stdout + r.stderr + f"\nexit {r.returncode} in {time.time() - t0:.1f} s\n")
    if r.returncode != 0:
        return cfg, f"nvcc exit {r.returncode}: {(r.stderr or r.stdout).strip()[-600:]}"
    st.write_text(want + "\n")
    return cfg, None


def build_all(args, cfgs: list[dgc.DgConfig]) -> dict:
    """{lib name: error or None}, building in parallel."""
    build_dir = Path(args.build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    includes = [args.dg_include, args.cutlass_include]
    for inc in includes:
        if not inc or not Path(inc).is_dir():
            sys.exit(f"bench_deepgemm: include directory {inc!r} missing (--dg-include / --cutlass-include)")
    uniq = {c.lib: c for c in cfgs}
    errors = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        for cfg, err in ex.map(lambda c: build_one(args.nvcc, c, includes, build_dir), uniq.values()):
            errors[cfg.lib] = err
            print(f"build {cfg.lib}: {'ok' if err is None else 'FAILED ' + err}", flush=True)
    return errors


class DgLib:
    """One configuration's shared object through its C ABI (tools/ref/deepgemm_harness.cu)."""

    CONFIG_FIELDS = ("n", "k", "bm", "bn", "stages", "swizzle_d", "cluster_m", "cluster_n", "num_sms", "smem",
                     "threads", "num_regs", "local_bytes", "static_smem", "max_threads", "ptx_version")

    def __init__(self, path: Path):
        import ctypes
        self.ct = ctypes
        self.lib = ctypes.CDLL(str(path))
        self.lib.dg_error.restype = ctypes.c_char_p
        self.lib.dg_prepare.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int]
        self.lib.dg_launch.argtypes = [ctypes.c_void_p]
        self.stream = None

    def config(self) -> dict:
        out = (self.ct.c_int * 16)()
        rc = self.lib.dg_config(out)
        d = dict(zip(self.CONFIG_FIELDS, list(out)))
        d["rc"] = rc
        return d

    def error(self) -> str:
        return self.lib.dg_error().decode(errors="replace")

    def prepare(self, a, b, d, sfa, sfb, m: int, stream: int) -> None:
        rc = self.lib.dg_prepare(a.data_ptr(), b.data_ptr(), d.data_ptr(), sfa.data_ptr(), sfb.data_ptr(), m)
        if rc:
            raise RuntimeError(f"dg_prepare = {rc}: {self.error()}")
        self.stream = self.ct.c_void_p(stream)

    def run(self) -> None:
        rc = self.lib.dg_launch(self.stream)
        if rc:
            raise RuntimeError(f"dg_launch = {rc}: {self.error()}")


class Smi:
    """nvidia-smi sampling clocks.sm and power.draw every 200 ms into a CSV beside the timing; ``window(t0, t1)``: the
    samples taken between two wall-clock times (nvidia-smi's timestamps are local time, as datetime.now())."""

    def __init__(self, path: str | None):
        self.path, self.proc = path, None
        if path and shutil.which("nvidia-smi"):
            self.fh = open(path, "w")
            line_buf = ["stdbuf", "-oL"] if shutil.which("stdbuf") else []  # lines reach the file as sampled
            self.proc = subprocess.Popen([*line_buf, "nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu",
                                          "--format=csv,noheader,nounits", "-lms", "200"], stdout=self.fh,
                                         stderr=subprocess.STDOUT)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(timeout=10)
            self.fh.close()

    def samples(self) -> list[tuple[datetime.datetime, float, float]]:
        if not self.path or not os.path.exists(self.path):
            return []
        out = []
        for line in open(self.path):
            parts = [p.strip() for p in line.split(",")]
            try:
                out.append((datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f"), float(parts[1]),
                            float(parts[2])))
            except (ValueError, IndexError):
                continue
        return out

    def window(self, t0: datetime.datetime, t1: datetime.datetime) -> dict | None:
        s = [x for x in self.samples() if t0 <= x[0] <= t1]
        if not s:
            return None
        clk, pw = [x[1] for x in s], [x[2] for x in s]
        return {"samples": len(s), "sm_mhz_median": statistics.median(clk), "sm_mhz_min": min(clk),
                "sm_mhz_max": max(clk), "power_w_median": statistics.median(pw), "power_w_max": max(pw)}


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shapes", nargs="*", default=DEFAULT_SHAPES)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--passes", type=int, default=1, help="repeat the whole measurement (a replication check)")
    ap.add_argument("--dg-include", default=os.environ.get("DG_INCLUDE", ""))
    ap.add_argument("--cutlass-include", default=os.environ.get("CUTLASS_INCLUDE", ""))
    ap.add_argument("--build-dir", default="build/deepgemm_ref")
    ap.add_argument("--nvcc", default=os.environ.get("NVCC", "nvcc"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--num-sms", type=int, default=132, help="--build-only: the SM count to compile for (H200: 132)")
    ap.add_argument("--batch-ms", type=float, default=25.0,
                    help="each timed sample launches a kernel for about this long (tools/bench_blockfp8.py: 25; "
                         "2026-12-02-deepgemm-reference's two device calls ran before this option, at runtime.check.bench's 2 ms default)")
    ap.add_argument("--extra", default="",
                    help="more configurations, comma-separated BMxBN-cCMxCN (e.g. 128x192-c1x1: the tile without "
                         "multicast), stages as DeepGEMM's rule gives them")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--no-ours", action="store_true", help="leave out our kernels")
    ap.add_argument("--ours", default=OURS_VARIANT,
                    help="comma-separated variants of ours (tools/bench_blockfp8.py's names); the default one is labelled "
                         "'ours', the others 'ours-<variant>'")
    ap.add_argument("--only", default="", help="comma-separated DeepGEMM configuration names (e.g. dg-128x192-c1x1-s4): "
                                                "time only these")
    ap.add_argument("--json", help="append one JSON line per (shape, kernel) and one summary line")
    ap.add_argument("--smi", help="sample nvidia-smi clocks.sm and power.draw into this CSV beside the timing")
    args = ap.parse_args()
    try:
        shapes = [parse_shape(s) for s in args.shapes]
    except ValueError:
        print(f"bench_deepgemm: shapes are MxNxK, got {args.shapes}", file=sys.stderr)
        return 2
    if args.rounds < 1 or args.passes < 1 or not args.batch_ms > 0:
        print("bench_deepgemm: --rounds and --passes must be >= 1, --batch-ms > 0", file=sys.stderr)
        return 2
    try:
        extra = [parse_extra(x) for x in args.extra.split(",") if x]
    except ValueError:
        print(f"bench_deepgemm: --extra takes BMxBN-cCMxCN items, got {args.extra!r}", file=sys.stderr)
        return 2

    if args.build_only:
        cfgs = [c for s in shapes for c, _ in plan_for(s, args.num_sms, extra)]
        errors = build_all(args, cfgs)
        return 1 if any(errors.values()) else 0

    import torch
    from ptxgen.runtime.launch.gpu import require_gpu, NoGPU
    from ptxgen.runtime.check.bench import alternate_medians
    try:
        dev = require_gpu()
    except NoGPU as e:
        print(f"bench_deepgemm: {e}", file=sys.stderr)
        return 3
    only = {x for x in args.only.split(",") if x}
    plan = {s: [(c, h) for c, h in plan_for(s, dev.sm_count, extra) if not only or c.name in only] for s in shapes}
    errors = build_all(args, [c for cs in plan.values() for c, _ in cs])

    import bench_blockfp8 as bb
    import ptxgen.api.fp8blocks

    def emit(row):
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")

    smi = Smi(args.smi)
    ok = True
    ratios: dict = {}   # kernel label -> [ratio per shape] (per pass)
    libs: dict = {}
    windows: list = []  # (shape, pass, t0, t1) of each timing, matched with nvidia-smi's samples at the end
    try:
        for pas in range(args.passes):
            for (m, n, k) in shapes:
                shape = f"{m}x{n}x{k}"
                a, b, sa, sb, kb4 = bb.inputs(torch, m, n, k)
                kb, nb = dgc.cdiv(k, 128), dgc.cdiv(n, 128)
                z = lambda cnt: torch.zeros(cnt, device="cuda", dtype=torch.float32)  # noqa: E731
                sfa_dg = dgc.sfa_to_deepgemm(sa, m, kb, z)   # outside the timed region
                sfb_dg = dgc.sfb_to_deepgemm(sb, nb, kb, z)
                stream = torch.cuda.current_stream().cuda_stream
                fns = {"torch": lambda: torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)}
                ref = fns["torch"]().float()
                ref_norm = torch.linalg.norm(ref)
                outs, meta = {}, {}
                launches = []
                for variant in ([] if args.no_ours else [v for v in args.ours.split(",") if v]):
                    vname, _plain, _yld, fields = bb.parse_variant(variant)
                    label = "ours" if vname == OURS_VARIANT else f"ours-{vname}"
                    spec = ptxgen.api.fp8blocks.default_spec(**fields)
                    d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
                    xargs = {"SFA": sa.data_ptr(), "SFB": sb.data_ptr(), "lds_a": m, "lds_b": kb4}
                    ours = bb.Launch(spec, m, n, k, a, b, d, xargs, dev, torch)
                    ours.run()  # once before the check (d starts as NaN)
                    launches.append(ours)
                    fns[label], outs[label] = ours.run, d
                    meta[label] = {"ptxgen_kernel": spec.kernel_name, "variant": vname}
                for cfg, heur in plan[(m, n, k)]:
                    label = cfg.name
                    info = {"config": dataclasses.asdict(cfg), "heuristic_pick": heur, "lib": cfg.lib}
                    if errors.get(cfg.lib):
                        print(f"{shape} {label}: BUILD FAILED: {errors[cfg.lib]}", flush=True)
                        emit({"shape": shape, "kernel": label, "status": "build_failed", "error": errors[cfg.lib], **info})
                        ok = False
                        continue
                    try:
                        lib = libs.get(cfg.lib) or DgLib(Path(args.build_dir) / cfg.lib)
                        libs[cfg.lib] = lib
                        d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
                        d.fill_(float("nan"))
                        lib.prepare(a, b, d, sfa_dg, sfb_dg, m, stream)
                        lib.run()
                        torch.cuda.synchronize()
                    except Exception as e:  # noqa: BLE001 - reported, the others run
                        print(f"{shape} {label}: FAILED: {type(e).__name__}: {e}", flush=True)
                        emit({"shape": shape, "kernel": label, "status": "failed", "error": str(e), **info})
                        ok = False
                        continue
                    info["attributes"] = lib.config()
                    fns[label], outs[label], meta[label] = lib.run, d, info
                for label in list(outs):
                    err = float(torch.linalg.norm(outs[label].float() - ref) / ref_norm)
                    meta[label]["rel_error_vs_torch"] = err
                    if not err < CHECK_TOL:  # NaN too
                        print(f"{shape} {label}: WRONG (rel error vs torch {err:.2e}), not timed", flush=True)
                        emit({"shape": shape, "kernel": label, "status": "wrong", **meta[label]})
                        fns.pop(label)
                        ok = False
                torch.cuda.synchronize()
                t0 = datetime.datetime.now()
                ms = alternate_medians(torch, fns, args.rounds, args.batch_ms)
                t1 = datetime.datetime.now()
                windows.append((shape, pas, t0, t1))
                # after timing: the outputs again (a kernel that raced would differ now)
                for label in outs:
                    if label in fns:
                        err2 = float(torch.linalg.norm(outs[label].float() - ref) / ref_norm)
                        meta[label]["rel_error_after_timing"] = err2
                        if not err2 < CHECK_TOL:
                            print(f"{shape} {label}: WRONG after timing ({err2:.2e})", flush=True)
                            ok = False
                flops = 2.0 * m * n * k
                tt = flops / ms["torch"] / 1e9
                print(f"{shape} pass {pas}: torch blockwise _scaled_mm {tt:.0f} TFLOP/s ({ms['torch'] * 1e3:.1f} us)",
                      flush=True)
                for label, t in sorted(ms.items(), key=lambda x: x[1]):
                    if label == "torch":
                        continue
                    r = ms["torch"] / t
                    mt = meta[label]
                    heur = " [DeepGEMM's pick]" if mt.get("heuristic_pick") else ""
                    regs = mt.get("attributes", {}).get("num_regs")
                    print(f"  {label:24s} {flops / t / 1e9:7.0f} TFLOP/s  ratio to torch {r:.3f}  rel err "
                          f"{mt['rel_error_vs_torch']:.1e}{'' if regs is None else f'  regs(launch) {regs}'}{heur}",
                          flush=True)
                    keys = [label] if label.startswith("ours") else [f"dg-{mt['config']['bm']}x{mt['config']['bn']}-c{mt['config']['cluster_m']}x{mt['config']['cluster_n']}"]
                    keys += ["dg-pick"] if mt.get("heuristic_pick") else []
                    for key in keys:
                        ratios.setdefault((pas, key), {})[shape] = r
                    emit({"shape": shape, "pass": pas, "kernel": label, "status": "timed", "ms": t, "torch_ms": ms["torch"],
                          "tflops": flops / t / 1e9, "torch_tflops": tt, "ratio": r, "rounds": args.rounds,
                          "device": dev.name, "window": [t0.isoformat(), t1.isoformat()], **mt})
                for launch in launches:
                    launch.kern.unload()
                outs.clear()
                torch.cuda.empty_cache()
    finally:
        smi.stop()
    for shape, pas, t0, t1 in windows:
        w = smi.window(t0, t1)
        print(f"smi {shape} pass {pas}: {w}")
        emit({"smi_window": True, "shape": shape, "pass": pas, "start": t0.isoformat(), "end": t1.isoformat(), "smi": w})
    nshapes = len(shapes)
    for (pas, key), per in sorted(ratios.items()):
        if len(per) == nshapes:
            g = geomean(list(per.values()))
            print(f"pass {pas} geomean ratio to torch {key:16s} {g:.3f}  ({', '.join(f'{s} {r:.3f}' for s, r in per.items())})")
            emit({"summary": True, "pass": pas, "kernel": key, "geomean_ratio": g, "per_shape": per})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
