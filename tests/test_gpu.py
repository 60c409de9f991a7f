"""GPU tier: generated kernels on real tensor cores (marked ``gpu``; skipped without a GPU).

The kernel for the GPU present is chosen as ``ptxgen validate`` does: sm_90a on compute capability
9.0 (wgmma, checked here on an H200), sm_100a on 10.x (tcgen05; never run here: no Blackwell GPU).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from ptxgen.derive.tile.spec import make_spec
from ptxgen.isa.types import SpecError

pytestmark = pytest.mark.gpu

SWIZZLES = ("none", "sw32", "sw64", "sw128")
TOKENS = [f"{m}-{s}" for m in ("kmajor", "mnmajor") for s in SWIZZLES]


def _base_configs() -> list[dict]:
    c: list[dict] = []
    # every swizzle x both majors, on A and on B, f16 and bf16 (M, N, K span several tiles: 3 BM, 2 BN, 5 BK)
    for dtype in ("f16", "bf16"):
        for tok in TOKENS:
            c.append(dict(bm=128, bn=128, bk=64, a=tok, b="kmajor-sw128", dtype=dtype))
            c.append(dict(bm=128, bn=128, bk=64, a="kmajor-sw64", b=tok, dtype=dtype))
    # both atom orders on both operands
    for a, b in (("kmajor-none", "mnmajor-none"), ("kmajor-sw64", "mnmajor-sw32"), ("mnmajor-sw128", "kmajor-sw32")):
        for ao in ("mn", "k"):
            for bo in ("mn", "k"):
                c.append(dict(bm=128, bn=128, bk=128, a=a, b=b, a_order=ao, b_order=bo, dtype="bf16"))
    # tf32 and e4m3, K-major, every swizzle; int8
    for s in SWIZZLES:
        c.append(dict(bm=128, bn=128, bk=32, a=f"kmajor-{s}", b="kmajor-sw128", dtype="tf32"))
        c.append(dict(bm=128, bn=128, bk=128, a=f"kmajor-{s}", b="kmajor-sw128", dtype="e4m3"))
    c.append(dict(bm=128, bn=128, bk=128, a="kmajor-sw128", b="kmajor-sw64", dtype="e5m2", acc="f16"))
    c.append(dict(bm=128, bn=64, bk=128, a="kmajor-sw128", b="kmajor-sw128", dtype="s8", acc="s32", stages=3))
    c.append(dict(bm=64, bn=128, bk=64, a="kmajor-sw64", b="kmajor-none", dtype="u8", acc="s32"))
    # tile sizes, stage counts, accumulators and outputs
    for bm, bn, bk, stages in ((64, 64, 64, 1), (64, 256, 64, 2), (128, 256, 64, 3), (128, 8, 32, 4), (128, 136, 64, 2),
                               (192, 96, 64, 2), (256, 48, 32, 3), (64, 128, 128, 4), (128, 64, 16, 2)):
        a = "kmajor-sw64" if bk >= 32 else "kmajor-sw32"
        c.append(dict(bm=bm, bn=bn, bk=bk, a=a, b="mnmajor-sw64" if bn % 32 == 0 else "kmajor-sw32", stages=stages))
    # one core matrix along N (MN-major, no swizzle): SBO is unused and written 0, as CuTe does
    c.append(dict(bm=128, bn=8, bk=64, a="kmajor-sw128", b="mnmajor-none"))
    c.append(dict(bm=64, bn=16, bk=64, a="mnmajor-none", b="mnmajor-none", dtype="bf16"))
    # rings that do not start on their swizzle repeat boundary: every 128-byte placement
    for off, a, b in ((128, "kmajor-sw128", "mnmajor-sw128"), (256, "kmajor-sw64", "mnmajor-sw64"), (384, "kmajor-sw64", "mnmajor-sw32"),
                      (512, "kmajor-sw128", "kmajor-sw32"), (640, "kmajor-sw32", "mnmajor-sw64"), (768, "mnmajor-sw64", "kmajor-sw128"),
                      (896, "mnmajor-sw128", "kmajor-sw32")):
        c.append(dict(bm=128, bn=128, bk=64, a=a, b=b, smem_offset=off, stages=3))
    for acc, out in (("f16", "f16"), ("f16", "f32"), ("f32", "bf16"), ("f32", "f16")):
        c.append(dict(bm=128, bn=64, bk=64, a="mnmajor-sw128", b="kmajor-sw128", acc=acc, out_dtype=out))
    c += MIXED  # last: CP_ASYNC's indexes into the list above stay as they were
    return c


# Mixed input types (--b-dtype), K-major as wgmma's 8-bit types need: e4m3 x e5m2 and u8 x s8, both ways round,
# both FP8 accumulators, and several swizzles. ``tools/gpu_validate.py OUT.jsonl --filter b_dtype`` runs just
# these: a spec's JSON holds the key b_dtype only when B's type differs from A's.
MIXED = [
    dict(bm=128, bn=128, bk=128, a="kmajor-sw128", b="kmajor-sw128", dtype="e4m3", b_dtype="e5m2"),
    dict(bm=128, bn=128, bk=128, a="kmajor-sw64", b="kmajor-sw32", dtype="e5m2", b_dtype="e4m3", stages=3),
    dict(bm=64, bn=96, bk=64, a="kmajor-none", b="kmajor-sw64", dtype="e4m3", b_dtype="e5m2", acc="f16"),
    dict(bm=128, bn=64, bk=128, a="kmajor-sw128", b="kmajor-none", dtype="e5m2", b_dtype="e4m3", acc="f16", out_dtype="f16"),
    dict(bm=128, bn=128, bk=128, a="kmajor-sw128", b="kmajor-sw64", dtype="u8", b_dtype="s8", acc="s32"),
    dict(bm=64, bn=64, bk=128, a="kmajor-sw32", b="kmajor-sw128", dtype="s8", b_dtype="u8", acc="s32", stages=3),
]


# Odd problem shapes: partial tiles in M and N, a K tail, tiny problems (rows padded to 16 bytes).
ODD_SHAPES = [
    (dict(bm=128, bn=128, bk=64, a="kmajor-sw128", b="kmajor-sw128"), (1, 8, 8)),
    (dict(bm=128, bn=128, bk=64, a="kmajor-sw128", b="mnmajor-sw128"), (300, 200, 100)),
    (dict(bm=128, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", stages=4), (1000, 1000, 1000)),
    (dict(bm=64, bn=64, bk=64, a="mnmajor-sw64", b="mnmajor-sw32", stages=3), (77, 45, 333)),
    (dict(bm=128, bn=128, bk=128, a="kmajor-sw64", b="kmajor-sw32", a_order="k", dtype="bf16"), (129, 129, 129)),
    (dict(bm=128, bn=64, bk=32, a="kmajor-sw128", b="kmajor-sw128", dtype="tf32"), (130, 70, 37)),
    (dict(bm=128, bn=128, bk=128, a="kmajor-sw128", b="kmajor-sw128", dtype="e4m3"), (200, 136, 150)),
    (dict(bm=128, bn=64, bk=128, a="kmajor-sw128", b="kmajor-sw64", dtype="s8", acc="s32"), (65, 33, 200)),
    (dict(bm=256, bn=64, bk=64, a="kmajor-sw128", b="kmajor-none"), (257, 63, 65)),
    (dict(bm=128, bn=128, bk=64, a="kmajor-sw64", b="mnmajor-sw128", smem_offset=384, stages=3), (250, 250, 250)),
    (dict(bm=64, bn=8, bk=64, a="kmajor-sw32", b="kmajor-none"), (3, 5, 7)),
]
CP_ASYNC = [0, 2, 5, 9, 17, 33, 40, 45, 52, 56, 60, 64]  # a spread of the base configs, also with the cp.async loader
CP_ASYNC_MIXED = [0, 4, 5]  # of MIXED (appended to the base configs), also with the cp.async loader

# Persistent CTAs: more tiles than SMs (132 on an H200), so that every CTA loops over several tiles and the
# pipeline runs on across them; partial tiles and raster groups that do not divide the tile rows.
PERSISTENT = [
    (dict(bm=128, bn=128, bk=64, a="kmajor-sw128", b="kmajor-sw128", stages=4), (2048, 2048, 192)),
    (dict(bm=128, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", stages=4, raster_group=3), (1500, 4000, 300)),
    (dict(bm=64, bn=64, bk=64, a="kmajor-sw64", b="mnmajor-sw128", stages=3, raster_group=16), (1000, 1100, 130)),
    (dict(bm=256, bn=128, bk=64, a="kmajor-sw128", b="kmajor-sw128", stages=4), (2500, 2100, 64)),
    (dict(bm=128, bn=128, bk=128, a="kmajor-sw128", b="kmajor-sw128", dtype="e4m3", out_dtype="bf16", stages=4), (1800, 2000, 260)),
    (dict(bm=128, bn=128, bk=64, a="kmajor-sw128", b="kmajor-sw128", stages=1), (1200, 1300, 100)),
    # ping-pong consumers: alternate tiles, odd and even tile counts per CTA
    (dict(bm=128, bn=128, bk=64, a="kmajor-sw128", b="kmajor-sw128", stages=6, consumers="pingpong"), (2048, 2048, 192)),
    (dict(bm=64, bn=256, bk=64, a="kmajor-sw128", b="mnmajor-sw128", stages=5, consumers="pingpong", raster_group=5), (1000, 1100, 130)),
    (dict(bm=128, bn=128, bk=64, a="kmajor-sw64", b="kmajor-sw128", stages=2, consumers="pingpong"), (1900, 2100, 64)),
    (dict(bm=128, bn=64, bk=32, a="kmajor-sw64", b="kmajor-sw64", stages=3, consumers="pingpong"), (300, 200, 1000)),
]

# The TMA-store epilogue (stmatrix -> swizzled staging -> TMA store): partial tiles (TMA clips them), every consumer
# arrangement, several chunks per slab, persistent CTAs whose stores overlap the next tile, both loaders.
_S = dict(a="kmajor-sw128", b="kmajor-sw128", epilogue="tma", out_dtype="f16")
STORE_EPILOGUE = [
    (dict(_S, bm=128, bn=256, bk=64, dtype="bf16", out_dtype="bf16", stages=4, schedule="persistent"), (1000, 1528, 712)),
    (dict(_S, bm=128, bn=256, bk=64, stages=4), (1, 8, 8)),
    (dict(_S, bm=64, bn=64, bk=64, stages=3), (77, 45, 333)),
    (dict(_S, bm=256, bn=128, bk=64, stages=3, schedule="persistent", raster_group=3), (2500, 2100, 64)),
    (dict(_S, bm=128, bn=192, bk=64, b="mnmajor-sw128", stages=4, schedule="persistent"), (300, 600, 100)),
    (dict(_S, bm=128, bn=128, bk=64, stages=6, schedule="persistent", consumers="pingpong"), (2048, 2048, 192)),
    (dict(_S, bm=64, bn=256, bk=64, stages=4, schedule="persistent", consumers="pingpong", raster_group=5), (1000, 1100, 130)),
    (dict(_S, bm=128, bn=128, bk=128, dtype="e4m3", out_dtype="bf16", stages=4, schedule="persistent"), (1800, 2000, 260)),
]

# 2-CTA clusters with TMA multicast (sm_90a): both directions, tile and persistent schedules, odd tile counts
# along the cluster dimension (one CTA of the last pair has no tile), M = 1, N % 8 != 0, ping-pong, FP8.
_C = dict(_S, bm=128, bn=256, bk=64, dtype="bf16", out_dtype="bf16", stages=4, schedule="persistent")
CLUSTER = [
    (dict(_C, cluster="2x1"), (1000, 1528, 712)),
    (dict(_C, cluster="2x1"), (1100, 1528, 712)),  # 9 tile rows: the last pair has one tile
    (dict(_C, cluster="1x2"), (1000, 1100, 712)),  # 5 tile columns
    (dict(_C, cluster="1x2"), (777, 1501, 333)),
    (dict(_C, bn=192, raster_group=16, cluster="2x1"), (8192, 8192, 256)),
    (dict(_C, cluster="2x1", epilogue="direct"), (1, 8, 8)),
    (dict(_S, bm=128, bn=128, bk=64, b="mnmajor-sw128", stages=4, cluster="2x1"), (1000, 1100, 130)),
    (dict(_S, bm=128, bn=128, bk=64, b="mnmajor-sw128", stages=4, cluster="1x2"), (1000, 1100, 130)),
    (dict(_S, bm=256, bn=128, bk=64, stages=3, schedule="persistent", raster_group=3, cluster="2x1"), (2500, 2100, 64)),
    (dict(_S, bm=128, bn=128, bk=64, stages=6, schedule="persistent", consumers="pingpong", cluster="2x1"), (1900, 2100, 64)),
    (dict(_S, bm=128, bn=128, bk=64, stages=6, schedule="persistent", consumers="pingpong", cluster="1x2"), (2048, 2048, 192)),
    (dict(_S, bm=128, bn=128, bk=128, dtype="e4m3", out_dtype="bf16", stages=4, schedule="persistent", cluster="1x2"), (1800, 2000, 260)),
    (dict(_S, bm=64, bn=64, bk=64, stages=3, cluster="2x1", a="kmajor-sw64", epilogue="direct"), (77, 45, 333)),
    (dict(_S, bm=128, bn=128, bk=64, stages=1, cluster="1x2", epilogue="direct"), (1200, 1300, 100)),
    # the FP8 kernel of the tuning table with B multicast (run 16 measured it faster), at the tuned_jobs shapes
    (dict(_S, bm=128, bn=256, bk=128, dtype="e4m3", out_dtype="bf16", stages=4, schedule="persistent", cluster="2x1"), (1000, 1528, 712)),
    (dict(_S, bm=128, bn=256, bk=128, dtype="e4m3", out_dtype="bf16", stages=4, schedule="persistent", cluster="2x1"), (777, 1501, 333)),
]

# Ping-pong past 128 columns (one warpgroup a whole 128 x BN tile, setmaxnreg's 232 registers; tests/test_pingpong_wide.py):
# partial tiles on both edges, odd tile counts per CTA, the direct and the TMA-store epilogue, e4m3 and bf16.
_W = dict(_S, bm=128, bk=128, dtype="e4m3", out_dtype="bf16", stages=4, schedule="persistent", consumers="pingpong")
WIDE_PINGPONG = [
    (dict(_W, bn=160, epilogue="direct"), (1000, 1100, 300)),
    (dict(_W, bn=192), (777, 1501, 333)),
    (dict(_W, bn=192, epilogue="direct"), (6000, 768, 512)),
    (dict(_W, bn=192, bk=64, dtype="bf16"), (1900, 2100, 200)),
    (dict(_W, bn=200, bk=64, dtype="bf16", epilogue="direct"), (2048, 2000, 192)),
]


def wide_pingpong(jobs: list[dict]) -> list[dict]:
    """The jobs of a 128 x BN ping-pong tile past 128 columns."""
    return [j for j in jobs if j["spec"]["consumers"] == "pingpong" and j["spec"]["bm"] == 128 and j["spec"]["bn"] > 128]


def tuned_jobs(arch: str) -> list[dict]:
    """Every kernel of the shipped tuning table (what `ptxgen bench` and `ptxgen.gemm` pick) at an odd shape."""
    from ptxgen.derive.tile.spec import TileSpec
    from ptxgen.runtime.choose.tune import load_table

    jobs = []
    for e in load_table():
        if e["arch"] == arch:
            spec = TileSpec.from_json(e["spec"])
            jobs.append({"spec": spec.to_json(), "m": 1000, "n": 1528, "k": 712, "seed": None})
            jobs.append({"spec": spec.to_json(), "m": 777, "n": 1501, "k": 333, "seed": None})  # N % 8 != 0: the edge tiles
    return jobs


# Shapes for the kernels ptxgen.runtime.choose picks (issue 16): small M or N (64-row/column tiles, one CTA per tile), rows off a
# 32-byte sector (K x 2 B = 2064, 6000, 10000: 128-byte L2 promotion, the 2x1 multicast variant), odd M and N, the cost model's.
CHOSEN_SHAPES = [(1, 4100, 5000), (37, 1000, 1032), (100, 7000, 3000), (128, 4096, 520), (1000, 1528, 5000), (777, 1501, 3000),
                 (2500, 1000, 1032), (3001, 100, 5000), (1359, 20, 3776),
                 # the cost model's BN = 160 / 224 tiles (direct stores): 128 x 160 in a 2x1 cluster, 64 x 224 ping-pong,
                 # 128 x 224 in a 2x1 cluster (issue 16 item 4, runs/2026-12-01-cost-model)
                 (700, 1000, 3000), (700, 1000, 4000), (700, 4500, 5000)]


# e4m3's small-n kernels (128 x 128 six stages; 256 x 128 up to 64 columns) at rows and columns off their tiles
CHOSEN_E4M3_SHAPES = [(3001, 96, 5008), (2000, 112, 2048), (5001, 48, 2000), (9000, 40, 1040)]


def chosen_jobs(arch: str) -> list[dict]:
    """The kernel the chooser picks for each of CHOSEN_SHAPES (bf16) and CHOSEN_E4M3_SHAPES (e4m3), at that shape
    (validate pads rows only to 16 B, so K = 5000 keeps its 16-byte phase)."""
    from ptxgen.runtime.choose import choose

    return [{"spec": choose(dtype, arch, m, n, k).spec.to_json(), "m": m, "n": n, "k": k, "seed": None}
            for dtype, shapes in (("bf16", CHOSEN_SHAPES), ("e4m3", CHOSEN_E4M3_SHAPES)) for m, n, k in shapes]


def gpu_jobs(arch: str) -> list[dict]:
    """Every GPU validation job for ``arch``: legal configs with the TMA loader, a spread with cp.async, odd shapes."""
    jobs, base = [], _base_configs()
    spread = [base[i] for i in CP_ASYNC if i < len(base)] + [MIXED[i] for i in CP_ASYNC_MIXED]
    for loader, cfgs in (("tma", base), ("cp.async", spread)):
        for cfg in cfgs:
            _add(jobs, arch, dict(cfg, loader=loader), None)
    for loader in ("tma", "cp.async"):
        for cfg, shape in ODD_SHAPES:
            _add(jobs, arch, dict(cfg, loader=loader), shape)
        for cfg, shape in PERSISTENT:
            _add(jobs, arch, dict(cfg, loader=loader, schedule="persistent"), shape)
    for i, (cfg, shape) in enumerate(STORE_EPILOGUE):
        _add(jobs, arch, cfg, shape)
        if i < 3:
            _add(jobs, arch, dict(cfg, loader="cp.async"), shape)
    for cfg, shape in CLUSTER + WIDE_PINGPONG:
        _add(jobs, arch, cfg, shape)
    return jobs + tuned_jobs(arch) + chosen_jobs(arch)


def _add(jobs: list, arch: str, cfg: dict, shape) -> None:
    try:
        spec = make_spec(arch=arch, **cfg)
    except SpecError:
        return
    m, n, k = shape or (None, None, None)
    jobs.append({"spec": spec.to_json(), "m": m, "n": n, "k": k, "seed": None})


def test_gpu_sweep_is_broad_enough():
    jobs = gpu_jobs("sm_90a")
    tma = [j for j in jobs if j["spec"]["loader"] == "tma"]
    assert len(tma) >= 60
    assert {j["spec"]["smem_offset"] for j in tma} == set(range(0, 1024, 128))
    assert any(j["m"] == 1 for j in tma) and any(j["k"] and j["k"] % 64 for j in tma)
    assert {j["spec"]["dtype"] for j in tma} >= {"f16", "bf16", "tf32", "e4m3", "s8"}
    assert len(wide_pingpong(tma)) == len(WIDE_PINGPONG)  # every one legal (_add drops what the rules refuse)
    mixed = {(j["spec"]["dtype"], j["spec"]["b_dtype"]) for j in jobs if "b_dtype" in j["spec"]}
    assert mixed == {("e4m3", "e5m2"), ("e5m2", "e4m3"), ("u8", "s8"), ("s8", "u8")}


def test_wide_pingpong_validates_on_gpu(gpu, artifact_dir):
    """The ping-pong tiles past 128 columns alone (also among test_validate_on_gpu's jobs): tools/gpu_run.sh few-wave."""
    from ptxgen.runtime.check.batch import run_batch

    jobs = []
    for cfg, shape in WIDE_PINGPONG:
        _add(jobs, gpu.arch.value, cfg, shape)
    if not jobs:
        pytest.skip("ping-pong past 128 columns is a wgmma form (sm_90a)")
    results = run_batch(jobs, artifact_dir / "wide_pingpong.jsonl", timeout_s=90)
    assert len(results) == len(WIDE_PINGPONG)
    failed = [r["verdict"] for r in results if not r["passed"]]
    assert not failed, "\n".join(failed)


def test_validate_on_gpu(gpu, artifact_dir):
    """Every job in one hang-safe batch (ptxgen.runtime.check.batch); the log lists each verdict."""
    from ptxgen.runtime.check.batch import run_batch

    log = artifact_dir / "validate.jsonl"
    results = run_batch(gpu_jobs(gpu.arch.value), log, timeout_s=90)
    with open(artifact_dir / "validate.log", "a") as f:
        for r in results:
            f.write(r["verdict"] + "\n")
    failed = [r["verdict"] for r in results if not r["passed"]]
    assert not failed, "\n".join(failed[:20])


def test_validate_cli_done_when_command(gpu, artifact_dir):
    """The issue's command: an H200 runs the sm_90a kernel."""
    arch = gpu.arch.value
    cmd = [sys.executable, "-m", "ptxgen", "validate", "--arch", arch, "--bm", "128", "--bn", "128", "--bk", "64",
           "--a", "kmajor-sw128", "--b", "mnmajor-sw128"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    (artifact_dir / "validate_cli.log").write_text(" ".join(cmd[2:]) + "\n" + proc.stdout + proc.stderr)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("PASS")


def test_validate_refuses_other_arch(gpu):
    other = "sm_100a" if gpu.arch.value == "sm_90a" else "sm_90a"
    proc = subprocess.run([sys.executable, "-m", "ptxgen", "validate", "--arch", other, "--bm", "128", "--bn", "128",
                           "--bk", "64", "--a", "kmajor-sw128"], capture_output=True, text=True)
    assert proc.returncode == 3 and "cannot run" in proc.stderr


def test_probe_agrees_with_read_model(gpu, artifact_dir):
    if gpu.arch.value != "sm_90a":
        pytest.skip("the layout probe is a wgmma kernel (compute capability 9.0)")
    from ptxgen.runtime.check.probe import run_probe, write_report

    report = run_probe(seed=1)
    write_report(report, str(artifact_dir / "probe.json"))
    cats = report["summary"]["categories"]
    for cat in ("derived", "strides"):
        assert cats[cat]["cases"] > 0 and cats[cat]["model_disagrees"] == 0, report["summary"]
        assert cats[cat]["model_agrees"] == cats[cat]["cases"], report["summary"]
    # base offset: some hypothesis must explain every case (which one is recorded in docs/hardware-layout.md)
    hyp = report["summary"]["base_offset_hypotheses"]
    assert any(h["all_cases"].split("/")[0] == h["all_cases"].split("/")[1] for h in hyp.values()), hyp
    # the read model's base-offset rule (set from that measurement) must agree on every base_offset case
    assert cats["base_offset"]["model_disagrees"] == 0 and cats["base_offset"]["model_declines"] == 0, cats["base_offset"]


SANITIZER_SPECS = [
    ["--bm", "128", "--bn", "128", "--bk", "64", "--a", "kmajor-sw128", "--b", "mnmajor-sw128", "--m", "300", "--n", "200", "--k", "100"],
    ["--bm", "128", "--bn", "256", "--bk", "64", "--a", "kmajor-sw128", "--b", "kmajor-sw128", "--stages", "4"],
    ["--bm", "64", "--bn", "64", "--bk", "32", "--a", "mnmajor-sw64", "--b", "kmajor-none", "--stages", "3", "--loader", "cp.async"],
    ["--bm", "128", "--bn", "64", "--bk", "64", "--a", "kmajor-sw32", "--b", "kmajor-sw64", "--dtype", "bf16", "--stages", "1"],
    # the flagships: persistent cooperative and ping-pong, several tiles per CTA
    ["--bm", "128", "--bn", "256", "--bk", "64", "--a", "kmajor-sw128", "--b", "kmajor-sw128", "--dtype", "bf16", "--stages", "4",
     "--out-dtype", "bf16", "--schedule", "persistent", "--raster-group", "16", "--m", "2304", "--n", "4200", "--k", "200"],
    ["--bm", "128", "--bn", "128", "--bk", "64", "--a", "kmajor-sw128", "--b", "kmajor-sw128", "--dtype", "bf16", "--stages", "5",
     "--out-dtype", "bf16", "--schedule", "persistent", "--consumers", "pingpong", "--m", "2100", "--n", "2300", "--k", "300"],
    # the TMA-store epilogue, tuned flagships: N = 4201 sends the last tile column through the direct stores
    ["--bm", "128", "--bn", "256", "--bk", "64", "--a", "kmajor-sw128", "--b", "kmajor-sw128", "--dtype", "bf16", "--stages", "4",
     "--out-dtype", "bf16", "--schedule", "persistent", "--epilogue", "tma", "--m", "2304", "--n", "4201", "--k", "200"],
    ["--bm", "128", "--bn", "128", "--bk", "64", "--a", "kmajor-sw128", "--b", "kmajor-sw128", "--dtype", "bf16", "--stages", "5",
     "--out-dtype", "bf16", "--schedule", "persistent", "--consumers", "pingpong", "--epilogue", "tma", "--m", "2100", "--n", "2300", "--k", "300"],
    # a 2-CTA cluster with B multicast: remote empty-barrier arrivals, an odd tile-row count (an inactive CTA)
    ["--bm", "128", "--bn", "256", "--bk", "64", "--a", "kmajor-sw128", "--b", "kmajor-sw128", "--dtype", "bf16", "--stages", "4",
     "--out-dtype", "bf16", "--schedule", "persistent", "--cluster", "2x1", "--epilogue", "tma", "--m", "1100", "--n", "2300", "--k", "300"],
]


def _sanitizer():
    for p in (shutil.which("compute-sanitizer"), "/usr/local/cuda/bin/compute-sanitizer"):
        if p and os.path.exists(p):
            return p
    return None


@pytest.mark.parametrize("tool", ["memcheck", "racecheck", "synccheck"])
@pytest.mark.parametrize("flags", SANITIZER_SPECS, ids=["odd-shape", "128x256-4stage", "cp.async-3stage", "bf16-1stage",
                                                   "persistent-flagship", "pingpong-flagship", "store-flagship", "store-pingpong",
                                                   "cluster-2x1"])
def test_compute_sanitizer_clean(gpu, tool, flags, artifact_dir):
    san = _sanitizer()
    if san is None:
        pytest.skip("compute-sanitizer not installed")
    cmd = [san, "--tool", tool, "--error-exitcode", "99", sys.executable, "-m", "ptxgen", "validate", *flags, "--seed", "7"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    log = artifact_dir / "sanitizer.log"
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd[1:3])} ptxgen validate {' '.join(flags)}\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}\nexit {proc.returncode}\n\n")
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-3000:]
    clean = {"memcheck": "ERROR SUMMARY: 0 errors", "synccheck": "ERROR SUMMARY: 0 errors",
             "racecheck": "RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"}[tool]
    assert clean in text and "PASS" in text, text[-3000:]
