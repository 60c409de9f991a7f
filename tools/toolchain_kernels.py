"""The oldest supported NVRTC (12.8, a PyPI wheel) over the kernel kinds each day of work added (2026-12-01, 2026-12-02): the SASS gate, no local memory.

Sets: ``streamk`` (stream-K, M-major D / swap-AB, the e4m3 cost model's picks, block FP8 wide tiles and halves, grouped block
FP8; runs/2026-12-01-nvrtc128-streamk), ``swap`` (the M-major TMA store of the swapped kernels, swap-AB up to M = 64 in
bf16/f16/e4m3, an f32 output's swapped direct kernel, e4m3 stream-K, the 128 x 128 small-M pick, block FP8 with its
scales staged in shared memory, alone, with halves and in a 2x1 cluster; runs/2026-12-01-nvrtc128-swap), ``scale-warp`` (the
block-FP8 kernels the 2026-12-02 scale-warp work changed: the per-warp release, half, interleave, BM = 192, TMA-loaded A scales;
runs/2026-12-02-nvrtc128-blockfp8), ``f32-store`` (the per-thread stage release in the smem- and TMA-scale block-FP8 kernels, the f32
TMA store: the block-FP8 f32 default, block-FP8 ping-pong 64 x 192, a bf16 -> f32 pick, a ping-pong and a fused chain; runs/2026-12-02-nvrtc128-f32-store),
``slabs`` (the warp-uniform warpgroup index in every wgmma kernel and the block-FP8 K loop unrolled twice: both block-FP8
picks of fp8blocks.gemm in bf16 and f32, the bf16 picks at 4096^3 and 8192^3, a ping-pong, BM = 192 bf16, the epilogue
order, block FP8 with two slabs a consumer warpgroup (--consumer-slabs 2: bf16, f32, smem scales); runs/2026-12-02-nvrtc128-slabs),
``prepared-launch`` (stream-K with TMA-loaded A scales and 192-row block-FP8 tiles: fp8blocks.gemm's few-tile picks in bf16 and f32,
the 128 x 192 TMA-scale form; runs/2026-12-02-nvrtc128-prepared-launch), ``tile-model`` (the tiles derive.scaled.bfp8tiles adds to fp8blocks.gemm's
picks: 128 x 128 and 64 x 128 with TMA-loaded A scales, whole and with stream-K, bf16 and f32; runs/2026-12-02-nvrtc128-tile-model),
``pairs-attention`` (2026-12-06: one ci-grid kernel per CTA-pair kind, the relaxed cluster barrier before the pair's TMEM
allocation among them; the attention kernels, sm_90a at head dims 64 and 128 with each schedule, causal and not, and
sm_100a, through their own SASS gate; runs/2026-12-06-nvrtc128-pairs-attention), ``one-launch`` (the 0.4.0 kernels: the
doors' split-K, promoting 3xTF32 and row-wise FP8 picks as ``ptxgen.api.plan`` names them, a fused chain with split-K,
every K-grouped variant; the attention defaults, BM 192, D 128 x BN 192 and the persistent walk;
runs/2026-12-06-nvrtc128-one-launch), ``0.4.1`` (the swapped stream-K picks, the f16-accumulate picks, attention at head dim
256 and the causal walk; runs/2026-12-06-nvrtc128-0-4-1), ``short-calls`` (after 0.4.1: the tiny split-K picks, the
persistent attention kernels with two Q buffers, O staged and the carried S, the K-grouped 128 x 256 default and the
swapped pairs in 1x2 clusters; runs/2026-12-06-nvrtc128-short-calls), ``one-pass-grad`` (after 0.4.1: ptxgen.ops.actgrad's
activation backward with its column sums and the column sum, written with ptxgen.author, and the chain's dact step with
gelu's derivative without cancellation; runs/2026-12-06-nvrtc128-one-pass-grad), ``wide-pair`` (2026-12-07: the
192-row swapped pairs the wide-pair rule picks on the H100; runs/2026-12-07-nvrtc128-wide-pair).

Usage: python tools/toolchain_matrix.py --install DIR --only 12.8
       PTXGEN_TOOLCHAINS=DIR python tools/toolchain_kernels.py [--set streamk|swap|scale-warp|f32-store|slabs|prepared-launch|tile-model|pairs-attention|training-forms|one-launch|0.4.1|short-calls|one-pass-grad|kgrouped-1d1d|all]
"""
import argparse
import dataclasses
import sys
import tempfile
from pathlib import Path

from ptxgen import make_spec
from ptxgen.isa.types import Epilogue
from ptxgen.runtime.compile import toolchains


def streamk_specs() -> dict:
    from ptxgen.api.fp8blocks import default_spec as bfp8_default
    from ptxgen.grouped import blockscaled_grouped_spec
    from ptxgen.runtime.choose import choose_spec

    base = dict(a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", acc="f32", arch="sm_90a", out_dtype="bf16")
    specs = {f"chosen {s}": choose_spec("bf16", "sm_90a", *s)[0]
             for s in [(5000, 5000, 5000), (2500, 10000, 4000), (1500, 9000, 3000), (1, 16384, 4096), (16, 7168, 16384)]}
    specs.update({f"chosen e4m3 {s}": choose_spec("e4m3", "sm_90a", *s)[0]
                  for s in [(4096, 4096, 5008), (5120, 5120, 5008), (64, 7168, 16384)]})
    specs["swap d_major m 128x16"] = make_spec(bm=128, bn=16, bk=64, stages=10, d_major="m", **base)
    specs["block fp8 default"] = bfp8_default(fp8_scale_load="block")  # the default of 2026-12-01
    specs["block fp8 halves"] = bfp8_default(fp8_overlap="halves", fp8_scale_load="block")
    specs["block fp8 direct f32"] = bfp8_default("f32", fp8_scale_load="block")
    specs["grouped block fp8"] = blockscaled_grouped_spec()
    return specs


def swap_specs() -> dict:
    from ptxgen.api.fp8blocks import default_spec as bfp8_default
    from ptxgen.api.select import select_choice
    from ptxgen.runtime.choose import choose

    specs = {}
    for dtype, shape in [("bf16", (333, 8192, 8192)), ("bf16", (200, 8192, 8192)), ("bf16", (16, 16384, 4096)),
                         ("bf16", (1, 7168, 16384)), ("bf16", (64, 16384, 4096)), ("f16", (64, 4096, 4096)),
                         ("e4m3", (16, 7168, 16384)), ("e4m3", (2512, 10000, 4000)), ("e4m3", (5120, 5120, 5120)),
                         ("bf16", (128, 16384, 4096))]:
        c = choose(dtype, "sm_90a", *shape)
        specs[f"chosen {dtype} {shape} ({c.chosen_by})"] = c.spec
    spec, _, _ = select_choice("bf16", "sm_90a", 64, 16384, 4096, out_dtype="f32")
    specs["swapped, f32 output (direct stores)"] = spec
    specs["block fp8 default (smem scales)"] = bfp8_default()
    specs["block fp8 smem scales, halves"] = bfp8_default(fp8_overlap="halves")
    specs["block fp8 smem scales, 2x1 cluster"] = bfp8_default(cluster="2x1")
    return specs


def scale_warp_specs() -> dict:
    """The block-FP8 kernels the 2026-12-02 scale-warp work changed or added (the leaner scale warp and the per-warp release in
    every smem-scale kernel; half, interleave, three consumer warpgroups, TMA-loaded A scales)."""
    from ptxgen.api.fp8blocks import default_spec as bfp8_default

    return {"block fp8 default (per-warp release)": bfp8_default(),
            "block fp8 --fp8-stagger half": bfp8_default(fp8_stagger="half"),
            "block fp8 --fp8-overlap interleave": bfp8_default(fp8_overlap="interleave"),
            "block fp8 BM = 192 (three consumer warpgroups)": bfp8_default(bm=192, bn=128),
            "block fp8 --fp8-scale-load tma": bfp8_default(fp8_scale_load="tma"),
            "block fp8 stream-K 4": bfp8_default(stream_k=4),
            "block fp8 2x1 cluster": bfp8_default(cluster="2x1")}


def f32_store_specs() -> dict:
    """The 2026-12-02 f32-store kernels: every consumer thread releases a stage it read scales from; f32 through the TMA store."""
    from ptxgen.api.fp8blocks import default_spec as bfp8_default
    from ptxgen.api.fused import fused_spec
    from ptxgen.api.select import select_choice
    from ptxgen.derive.store.chainspec import parse_chain

    base = dict(a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", acc="f32", arch="sm_90a", out_dtype="f32", epilogue="tma")
    pick, _, _ = select_choice("bf16", "sm_90a", 4096, 4096, 4096, out_dtype="f32")
    return {"block fp8 default (per-thread release)": bfp8_default(),
            "block fp8 --fp8-scale-load tma (per-thread release)": bfp8_default(fp8_scale_load="tma"),
            "block fp8 BM = 192 (per-thread release)": bfp8_default(bm=192, bn=128),
            "block fp8 f32 default (TMA store)": bfp8_default("f32"),
            "block fp8 ping-pong 64x192 (TMA store)": bfp8_default(bm=64, bn=192, consumers="pingpong", stages=6),
            "block fp8 ping-pong 64x192 (direct)": bfp8_default(bm=64, bn=192, consumers="pingpong", stages=7, epilogue="direct"),
            "bf16 -> f32 pick 4096^3 (TMA store)": pick,
            "f32 TMA store ping-pong 128x128": make_spec(bm=128, bn=128, bk=64, stages=5, schedule="persistent",
                                                         consumers="pingpong", **base),
            "f32 TMA store bias+gelu": fused_spec(make_spec(bm=128, bn=256, bk=64, stages=4, schedule="persistent", **base),
                                                  parse_chain("bias=col:bf16,act=gelu_tanh"), "f32")}


def slabs_specs() -> dict:
    """The 2026-12-02 slab kernels: every wgmma kernel's warpgroup index through __shfl_sync; block FP8's unrolled loop."""
    from ptxgen.api.fp8blocks import default_spec as bfp8_default, slabs_spec, tma_scales_spec
    from ptxgen.api.select import select_choice

    base = dict(a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", acc="f32", arch="sm_90a", out_dtype="bf16")
    picks = {f"bf16 pick {m}^3": select_choice("bf16", "sm_90a", m, m, m)[0] for m in (4096, 8192)}
    return {"block fp8 tma_scales_spec bf16 (192 x 128)": tma_scales_spec(),
            "block fp8 tma_scales_spec f32": tma_scales_spec("f32"),
            "block fp8 default bf16 (128 x 192, unrolled)": bfp8_default(),
            "block fp8 default f32": bfp8_default("f32"),
            "block fp8 consumer slabs bf16 (256 x 128, two slabs a warpgroup, one partial)": slabs_spec(),
            "block fp8 consumer slabs f32": slabs_spec("f32"),
            "block fp8 consumer slabs, scale warp (smem)": slabs_spec(fp8_scale_load="smem"),
            **picks,
            "bf16 ping-pong 128x128": make_spec(bm=128, bn=128, bk=64, stages=5, schedule="persistent", consumers="pingpong",
                                                epilogue="tma", **base),
            "bf16 BM = 192 (three consumer warpgroups)": make_spec(bm=192, bn=128, bk=64, stages=4, schedule="persistent",
                                                                   epilogue="tma", **base),
            "bf16 epilogue order alternate-uniform": make_spec(bm=128, bn=256, bk=64, stages=4, schedule="persistent",
                                                               epilogue="tma", epilogue_order="alternate-uniform", **base)}


def prepared_launch_specs() -> dict:
    """The 2026-12-02 prepared-launch kernels: stream-K with --fp8-scale-load tma, at BM = 192 (what fp8blocks.gemm picks for few tiles)."""
    from ptxgen.api.fp8blocks import FEW_TILES_STREAM_K, default_spec as bfp8_default, tma_scales_spec

    return {"block fp8 tma_scales_spec bf16 stream-K 8 (few tiles)": tma_scales_spec(stream_k=FEW_TILES_STREAM_K),
            "block fp8 tma_scales_spec f32 stream-K 8": tma_scales_spec("f32", stream_k=FEW_TILES_STREAM_K),
            "block fp8 default bf16 stream-K 8 (scale warp, few tiles)": bfp8_default(stream_k=FEW_TILES_STREAM_K),
            "block fp8 128 x 192 TMA scales stream-K 4": bfp8_default(fp8_scale_load="tma", stream_k=4)}


def tile_model_specs() -> dict:
    """The 2026-12-02 tile-model picks of fp8blocks.gemm (derive.scaled.bfp8tiles.TMA_SCALE_TILES past the 192 x 128 one)."""
    from ptxgen.api.fp8blocks import FEW_TILES_STREAM_K, default_spec as bfp8_default
    from ptxgen.derive.scaled.bfp8tiles import TMA_SCALE_TILES

    out = {}
    for t in TMA_SCALE_TILES[1:]:
        for dt in ("bf16", "f32"):
            for sk in (1, FEW_TILES_STREAM_K):
                out[f"block fp8 {t.bm} x {t.bn} TMA scales {dt} stream-K {sk}"] = bfp8_default(
                    dt, bm=t.bm, bn=t.bn, stages=t.stages, fp8_scale_load="tma", stream_k=sk)
    return out


def pair_specs() -> dict:
    """One ci-grid configuration per CTA-pair kernel kind (the MMA kind, the pair's M, schedule, epilogue)."""
    from ptxgen.sweep import load_grid

    kinds: dict = {}
    for t in load_grid("ci").specs:
        if t.pair:
            key = (t.scale.value if t.block_scaled else t.dtype.kind, t.bm, t.schedule.value, t.epilogue.value)
            kinds.setdefault(key, t)
    return {f"pair {'-'.join(map(str, k))}": t for k, t in sorted(kinds.items())}


def training_forms_specs() -> dict:
    """The 2026-12-06 (0.3.0) kernels: one ci-grid configuration per K-grouped kind (bf16/f16 x operand majorness,
    row-wise FP8) and per 1D1D block-FP8 kernel, the chain's aux and dact steps, the small-n 128 x 64 2x1 kernel."""
    from ptxgen.derive.tile.spec import make_spec
    from ptxgen.runtime.choose.narrow import small_n_wide_kernel
    from ptxgen.sweep import load_grid

    out: dict = {}
    for t in load_grid("ci").specs:
        if t.grouped.value in ("offs_k", "offs_k_rowwise"):
            out.setdefault(f"{t.grouped.value} {t.dtype.value} a {t.a.major.value} b {t.b.major.value}", t)
        elif t.fp8_blocks.value == "1x128x1x128":
            out.setdefault(f"1d1d {t.bm}x{t.bn} {t.out_dtype.value}", t)
    base = dict(bm=128, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", acc="f32", out_dtype="bf16",
                arch="sm_90a", stages=4, schedule="persistent")
    out["chain bias + aux + gelu, TMA store"] = make_spec(**base, epilogue="tma", fuse="bias=col:bf16,aux,act=gelu_tanh")
    out["chain dact gelu, B N-major"] = make_spec(**{**base, "b": "mnmajor-sw128", "b_order": "k"}, fuse="dact=gelu_tanh")
    out["small-n 128 x 64 2x1"] = small_n_wide_kernel(64).spec()
    return out


def one_launch_specs() -> dict:
    """The 0.4.0 kernels the doors pick (read from ``ptxgen.api.plan`` on meta tensors, so the list follows the
    chooser) and every K-grouped variant."""
    import torch

    import ptxgen.api
    from ptxgen.derive.tile.spec import make_spec
    from ptxgen.kgrouped import KGROUPED_VARIANTS, kgrouped_spec

    def meta(*shape, dt=torch.bfloat16):
        return torch.empty(*shape, dtype=dt, device="meta")

    f32, e4m3 = torch.float32, torch.float8_e4m3fn
    out = {"split-K 128x4096x4096": ptxgen.api.plan("gemm", meta(128, 4096), meta(4096, 4096), device="h100").spec,
           "3xTF32 promoting 4096^3": ptxgen.api.plan("gemm", meta(4096, 4096, dt=f32), meta(4096, 4096, dt=f32),
                                                      device="h100").spec}
    for shape in ((2048, 7168, 4096), (4096, 7168, 16384)):
        m, n, k = shape
        out[f"row-wise FP8 + bias {shape}"] = ptxgen.api.plan(
            "scaled_gemm", meta(m, k, dt=e4m3), meta(n, k, dt=e4m3), meta(m, 1, dt=f32), meta(1, n, dt=f32), bias=meta(n),
            device="h100").spec
    out["split-K with bias + gelu"] = make_spec(bm=64, bn=128, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", acc="f32",
                                                out_dtype="bf16", arch="sm_90a", stages=8, split_k=2, fuse="bias=col:bf16,act=gelu_tanh")
    out.update({f"kgrouped {v}": kgrouped_spec("bf16", "bf16", "sm_90a", "mn", "mn", variant=v) for v in KGROUPED_VARIANTS})
    return out


def release_0_4_1_specs() -> dict:
    """The 0.4.1 kernels: the swapped stream-K picks (400x10000x6000 as the chooser takes it on the H100, 128 x 168
    split 2 with direct stores) and the f16-accumulate picks of ``ptxgen.gemm`` (read from ``ptxgen.api.plan``)."""
    import torch

    import ptxgen.api
    from ptxgen.runtime.choose import Problem, choose
    from ptxgen.runtime.choose.calibration import shipped
    from ptxgen.runtime.choose.swap import _swapped_streamk
    from ptxgen.runtime.choose.tune import default_spec

    def meta(*shape, dt=torch.float16):
        return torch.empty(*shape, dtype=dt, device="meta")

    out = {"swap stream-K 400x10000x6000 (H100 pick)": choose(Problem("bf16", "sm_90a", 400, 10000, 6000),
                                                              shipped()["h100-80gb-hbm3"].device).spec}
    direct = dataclasses.replace(_swapped_streamk(default_spec("bf16", "sm_90a"), 168, 2), epilogue=Epilogue.DIRECT)
    out["swap stream-K 128x168 split 2, direct"] = direct
    for m, n, k in ((4096, 4096, 4096), (400, 10000, 6000), (16, 7168, 16384)):
        out[f"f16 accumulate {m}x{n}x{k}"] = ptxgen.api.plan("gemm", meta(m, k), meta(n, k), accumulate="f16",
                                                             device="h100").spec
    return out


# D, BM, BN, stages, schedule, walk: head dim 256's tiles and the causal default (ping-pong 128 x 128 with the walk)
ATTENTION_0_4_1 = ((256, 128, 64, 2, "overlap", False), (256, 128, 64, 2, "pingpong", True), (256, 64, 64, 3, "serial", False),
                   (64, 128, 128, 2, "pingpong", True), (128, 128, 128, 2, "pingpong", True))


def tiny_split_specs() -> dict:
    """The tiny split-K rule's picks (few tiles, a long K; 2026-12-06 after 0.4.1), as the chooser takes them."""
    from ptxgen.runtime.choose import choose

    return {f"tiny split {d} {m}x{n}x{k}": choose(d, "sm_90a", m, n, k).spec
            for d, m, n, k in (("bf16", 5, 2, 6816), ("bf16", 1, 1088, 8192), ("bf16", 200, 2, 8192), ("e4m3", 5, 2, 6816))}


def after_0_4_1_gemm_specs() -> dict:
    """The GEMM-side kernels that became defaults after 0.4.1 besides the tiny splits: the K-grouped 128 x 256 TMA-store
    default (MN-major operands as autograd's dW hands them, bf16 and f32 out) and the swapped pairs in 1x2 clusters, as
    the chooser takes them on the H100."""
    from ptxgen.kgrouped import kgrouped_spec
    from ptxgen.runtime.choose import Problem, choose
    from ptxgen.runtime.choose.calibration import shipped

    h100 = shipped()["h100-80gb-hbm3"].device
    out = {f"kgrouped default {o}": kgrouped_spec("bf16", o) for o in ("bf16", "f32")}
    out.update({f"swap pair {m}x{n}x{k}": choose(Problem("bf16", "sm_90a", m, n, k), h100).spec
                for m, n, k in ((400, 10000, 6000), (333, 8192, 8192))})
    return out


def wide_pair_specs() -> dict:
    """The 192-row swapped pairs of rules.SWAP_WIDE_PAIR (2026-12-07), as the chooser takes them on the H100."""
    from ptxgen.runtime.choose import Problem, choose
    from ptxgen.runtime.choose.calibration import shipped

    h100 = shipped()["h100-80gb-hbm3"].device
    return {f"wide pair {m}x{n}x{k}": choose(Problem("bf16", "sm_90a", m, n, k), h100).spec
            for m, n, k in ((300, 12288, 6000), (280, 12288, 8192))}


def scale_copies_specs() -> dict:
    """The cp.async scale warp (--fp8-scale-load cpasync, 2026-12-07) on both recipes, the 1D1D tiles that read their
    column scales inside the promotion (128 x 192, 192 x 128, with and without C), the 1D1D door's picks and the 1D1D
    kernels with stream-K."""
    from ptxgen.api.fp8blocks import columns_spec, default_spec

    return {"cpasync 1d1d 128x128": columns_spec("f32", bm=128, fp8_scale_load="cpasync"),
            "cpasync 1d1d 128x192": columns_spec("f32", bm=128, bn=192, fp8_scale_load="cpasync"),
            "cpasync 1d1d 192x128": columns_spec("f32", bm=192, fp8_scale_load="cpasync"),
            "cpasync 1d1d 192x128 c": columns_spec("f32", c=True, bm=192, fp8_scale_load="cpasync"),
            "smem 1d1d 192x128": columns_spec("f32", bm=192, fp8_scale_load="smem"),
            "cpasync 1d1d 192x128 bf16 (the door's pick)": columns_spec("bf16"),
            "cpasync 1d1d 128x128 bf16 (the door's pick, few rows)": columns_spec("bf16", bm=128),
            "cpasync 1d1d 64x128 bf16 (the door's pick, fewer rows)": columns_spec("bf16", bm=64, stages=6),
            "cpasync 1d1d 64x64 bf16 (the door's pick, fewer rows)": columns_spec("bf16", bm=64, bn=64, stages=6),
            "cpasync 1d1d 64x64 c": columns_spec("f32", c=True, bm=64, bn=64, stages=6),
            "cpasync 1d1d 128x192 stream-K 4": columns_spec("f32", bm=128, bn=192, stream_k=4),
            "cpasync 1d1d 64x64 stream-K 8": columns_spec("f32", bm=64, bn=64, stages=6, stream_k=8),
            "smem 1d1d 128x128 stream-K 8": columns_spec("f32", bm=128, fp8_scale_load="smem", stream_k=8),
            "cpasync 1d2d 128x192": default_spec("bf16", fp8_scale_load="cpasync")}


def blocks_on_a_specs() -> dict:
    """The 128x128 x 1x128 recipe's kernels (2026-12-07): the 1x128x128 kernels with an M-major D that
    ptxgen.api.fp8blocks picks for the swapped problem (bf16 through the M-major TMA store, f32 through the direct stores,
    few tiles with stream-K)."""
    from ptxgen.api.fp8blocks import _swapped_spec
    from ptxgen.runtime.launch.arrays import ArrayInfo

    def picked(m, n, k, out_dtype):
        ksa = ArrayInfo("scale_b", 0x1000, (n, -(-k // 128)), (1, n), "f32", 4, (2, 0), "torch", "torch")
        return _swapped_spec(None, out_dtype, ksa, n, n, m, k, 132)

    return {f"blocks on A {m}x{n}x{k} {o}": picked(m, n, k, o)
            for m, n, k, o in ((4096, 7168, 4096, "bf16"), (4096, 7168, 4096, "f32"), (384, 272, 768, "bf16"))}


def kgrouped_fp8_tma_specs() -> dict:
    """The row-wise FP8 K-grouped kernels scaled_grouped_gemm picks since 2026-12-07 (kgrouped.fp8_variant: the TMA store,
    128 x 256 for long groups of a 16-bit output) and the f32-output form."""
    from ptxgen.kgrouped import kgrouped_spec

    return {f"kgrouped fp8 {v} {o}": kgrouped_spec("e4m3", o, "sm_90a", "k", "k", rowwise=True, variant=v)
            for v, o in (("tma", "bf16"), ("tma-n256", "bf16"), ("tma", "f32"))}


def kgrouped_fp8_pingpong_specs() -> dict:
    """The row-wise FP8 K-grouped kernels with ping-pong consumers (2026-12-07: pp-tma, pp-tma-s5; bf16 and f32 out)."""
    from ptxgen.kgrouped import kgrouped_spec

    return {f"kgrouped fp8 {v} {o}": kgrouped_spec("e4m3", o, "sm_90a", "k", "k", rowwise=True, variant=v)
            for v, o in (("pp-tma", "bf16"), ("pp-tma-s5", "bf16"), ("pp-tma", "f32"))}


def kgrouped_cluster_specs() -> dict:
    """The K-grouped kernels with 2x1 clusters multicasting B (2026-12-07): every ``-c2`` variant of
    ptxgen.kgrouped's tables, 16-bit (bf16, MN-major operands) and row-wise FP8 (bf16 out; and tma-c2 with the f32
    output scaled_grouped_gemm takes it for)."""
    from ptxgen.kgrouped import KGROUPED_FP8_VARIANTS, KGROUPED_VARIANTS, kgrouped_spec

    specs = {f"kgrouped bf16 {v}": kgrouped_spec("bf16", "bf16", "sm_90a", "mn", "mn", variant=v)
             for v in KGROUPED_VARIANTS if v.endswith("-c2")}
    specs.update({f"kgrouped fp8 {v} bf16": kgrouped_spec("e4m3", "bf16", "sm_90a", "k", "k", rowwise=True, variant=v)
                  for v in KGROUPED_FP8_VARIANTS if v.endswith("-c2")})
    specs["kgrouped fp8 tma-c2 f32"] = kgrouped_spec("e4m3", "f32", "sm_90a", "k", "k", rowwise=True, variant="tma-c2")
    return specs


def pingpong_wide_specs() -> dict:
    """Ping-pong 128 x BN past 128 columns (2026-12-07): with setmaxnreg and two consumer warpgroups a consumer thread
    has the setmaxnreg.inc count (232), not the launch bound (168), so BN 136-200 is legal; e4m3 and bf16, direct stores
    (BN 160, 200) and the TMA store (BN 192)."""
    from ptxgen.derive.tile.spec import make_spec

    out = {}
    for dtype, bk in (("e4m3", 128), ("bf16", 64)):
        for bn, epilogue in ((160, "direct"), (192, "tma"), (200, "direct")):
            out[f"pingpong {dtype} 128x{bn} {epilogue}"] = make_spec(
                bm=128, bn=bn, bk=bk, a="kmajor-sw128", b="kmajor-sw128", dtype=dtype, acc="f32", out_dtype="bf16",
                arch="sm_90a", stages=4, schedule="persistent", consumers="pingpong", epilogue=epilogue)
    return out


def kgrouped_1d1d_specs() -> dict:
    """The K-grouped kernel with 1 x 128 scales on both operands (2026-12-08, ptxgen.blockscaled_grouped_gemm_k): f32 and
    bf16 out, and accumulating into c (--fuse c, f32)."""
    from ptxgen.kgrouped import kgrouped_spec

    out = {f"kgrouped 1d1d {o}": kgrouped_spec("e4m3", o, "sm_90a", "k", "k", blocks=True) for o in ("f32", "bf16")}
    out["kgrouped 1d1d f32 c"] = kgrouped_spec("e4m3", "f32", "sm_90a", "k", "k", blocks=True, accumulate=True)
    return out


def rowwise_scale_loads_specs() -> dict:
    """The row-wise FP8 grouped kernels after 2026-12-07's epilogue change (each row's scale_a and each column pair's
    scale_b loaded once): the K-grouped picks (128 x 256 bf16, 128 x 128 f32), the ping-pong form (two slabs a
    warpgroup) and the M-grouped row-wise kernel."""
    from ptxgen.grouped import grouped_spec
    from ptxgen.kgrouped import kgrouped_spec

    specs = {f"kgrouped fp8 {v} {o}": kgrouped_spec("e4m3", o, "sm_90a", "k", "k", rowwise=True, variant=v)
             for v, o in (("tma-n256", "bf16"), ("tma", "f32"), ("pp-tma", "bf16"))}
    specs["grouped fp8 rowwise bf16"] = grouped_spec("e4m3", rowwise=True)
    return specs


def attention_q_buffer_specs() -> list:
    """The persistent attention kernels with two Q buffers (the defaults from 2026-12-06 after 0.4.1: D 128 ping-pong
    with O staged, D 64's three walks) and O staged at D 64, causal and not."""
    from ptxgen.attention.spec import AttentionSpec

    tiles = ((128, 128, 128, 2, "pingpong", True), (64, 192, 128, 2, "overlap", False), (64, 192, 128, 2, "overlap", True),
             (64, 128, 128, 3, "pingpong", False), (64, 128, 192, 2, "pingpong", False))  # D, BM, BN, stages, schedule, O staged
    plain = [AttentionSpec(d, bm, bn, c, stages=st, schedule=sch, persistent=True, q_buffers=2, o_staging=os_)
             for d, bm, bn, st, sch, os_ in tiles for c in (False, True)]
    carried = [AttentionSpec(d, bm, bn, c, stages=st, schedule=sch, persistent=True, q_buffers=2, o_staging=os_, carry=True)
               for d, bm, bn, st, sch, os_ in tiles[:2] for c in (False, True)]  # the carried S (D 128: the default)
    # D 64's short non-causal default (launch.D64_PINGPONG_KEYS): ping-pong 128 x 128, two stages, O staged, S carried
    carried += [AttentionSpec(64, 128, 128, c, stages=2, schedule="pingpong", persistent=True, q_buffers=2, o_staging=True,
                              carry=True) for c in (False, True)]
    return plain + carried


def author_results(toolchain, workdir: Path, kernels) -> list[tuple[str, bool, str]]:
    """Kernels written with ptxgen.author (``ptxgen.author.Kernel`` declarations) compiled by ``toolchain``'s NVRTC and
    gated by their author's SASS counts and no local memory."""
    from ptxgen.runtime.compile.sass import check_counts

    kernels = {k.name: k for k in kernels}
    out = []
    for name, version, sass, res in compiled(toolchain, workdir, {n: (k.arch.value, k.render()) for n, k in kernels.items()}):
        if sass is None:
            out.append((name, False, version))
            continue
        rep = check_counts(name, dict(kernels[name].expect_sass), sass, res)
        out.append((name, rep.ok and rep.local_bytes == 0, f"{version} {rep.counts} local={rep.local_bytes} {rep.problems}"))
    return out


def tail_kernels() -> list:
    """ptxgen.ops.tailzero's kernels (the expert bank's dx tail), one per output type."""
    from ptxgen.ops import tailzero

    return [tailzero.kernel_for(d) for d in ("bf16", "f16", "f32")]


def one_pass_grad_kernels() -> list:
    """ptxgen.ops.actgrad's kernels: the activation backward with per-CTA column sums (each activation, bf16 and f16)
    and the column sum into each bias type."""
    from ptxgen.ops import actgrad

    return ([actgrad.grad_kernel(a, d) for a in actgrad.ACTIVATIONS for d in actgrad.DTYPES]
            + [actgrad.sum_kernel(o) for o in actgrad.BIAS_DTYPES])


def one_pass_grad_gemm_specs() -> dict:
    """The chain's dact step with gelu's derivative rewritten without cancellation (tanh and erf forms)."""
    from ptxgen.derive.tile.spec import make_spec

    base = dict(bm=128, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", acc="f32", out_dtype="bf16",
                arch="sm_90a", stages=4, schedule="persistent")
    return {f"chain dact {a}": make_spec(**base, fuse=f"dact={a}") for a in ("gelu_tanh", "gelu_erf")}


def compiled(toolchain, workdir: Path, sources: dict):
    """(name, NVRTC version, SASS, resource usage) of each ``sources`` entry (name -> (arch, CUDA source)) compiled by
    ``toolchain``'s NVRTC in a process of its own; (name, the error, None, None) for one that does not compile."""
    import json
    import os
    import subprocess

    from ptxgen.runtime.compile.toolchain import run_tool

    jobs = []
    for name, (arch, source) in sources.items():
        cu = workdir / f"{name}.cu"
        cu.write_text(source)
        jobs.append({"name": name, "arch": arch, "cu": str(cu)})
    proc = subprocess.run([sys.executable, "-m", "ptxgen.runtime.compile.toolchains", str(toolchain.library), str(workdir)],
                          input=json.dumps(jobs), capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    for line in proc.stdout.splitlines():
        rec = json.loads(line)
        if "error" in rec:
            yield rec["name"], rec["error"][:300], None, None
            continue
        cubin = (workdir / f"{rec['name']}.cubin").read_bytes()
        yield (rec["name"], rec["version"], run_tool("cuobjdump", ["--dump-sass"], cubin),
               run_tool("cuobjdump", ["--dump-resource-usage"], cubin))


ATTENTION_0_4 = ((64, 192, 128, 2, "overlap", False), (64, 192, 128, 2, "overlap", True), (128, 128, 192, 2, "pingpong", False),
                 (128, 128, 128, 2, "pingpong", True), (64, 128, 192, 2, "pingpong", True))  # D, BM, BN, stages, schedule, walk


def attention_results(toolchain, workdir: Path, new_tiles: bool = False, tiles=None,
                      specs=None) -> list[tuple[str, bool, str]]:
    """Each attention kernel compiled by ``toolchain``'s NVRTC and gated by its own SASS check (no local memory)."""
    from ptxgen.attention.build import check_attention_sass, check_attention_sass_sm100
    from ptxgen.attention.plan import plan_attention
    from ptxgen.attention.plan_sm100 import plan_attention_sm100
    from ptxgen.attention.render import render, render_sm100
    from ptxgen.attention.spec import AttentionSpec
    from ptxgen.isa.types import Arch

    given = specs
    specs = [AttentionSpec(head_dim=d, causal=c, schedule=s) for d in (64, 128) for c in (False, True)
             for s in ("serial", "overlap", "pingpong")]
    specs += [AttentionSpec(head_dim=d, arch=Arch.SM100A) for d in (64, 128)]
    if given:
        specs = list(given)
    elif new_tiles or tiles:  # the 0.4.0 tiles and walk (or ``tiles``), causal and not
        specs = [AttentionSpec(d, bm, bn, c, stages=st, schedule=sch, persistent=walk)
                 for d, bm, bn, st, sch, walk in (tiles or ATTENTION_0_4) for c in (False, True)]
    plans, sources = {}, {}
    for spec in specs:
        plan = plan_attention_sm100(spec) if spec.tcgen05 else plan_attention(spec)
        sources[spec.kernel_name] = (spec.arch.value, render_sm100(plan) if spec.tcgen05 else render(plan))
        plans[spec.kernel_name] = plan
    out = []
    for name, version, sass, res in compiled(toolchain, workdir, sources):
        if sass is None:
            out.append((name, False, version))
            continue
        plan = plans[name]
        rep = check_attention_sass_sm100(plan, sass, res) if plan.spec.tcgen05 else check_attention_sass(plan, sass, res)
        out.append((name, not rep.problems, f"{version} {rep.problems}"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=("streamk", "swap", "scale-warp", "f32-store", "slabs", "prepared-launch", "tile-model",
                                      "pairs-attention", "training-forms", "one-launch", "0.4.1", "short-calls", "one-pass-grad",
                                      "wide-pair", "blocks-on-a", "kgrouped-fp8-tma", "scale-copies", "kgrouped-fp8-pingpong",
                                      "rowwise-scale-loads", "kgrouped-cluster", "pingpong-wide", "kgrouped-1d1d", "all"),
                    default="all")
    args = ap.parse_args()
    specs = {}
    if args.set in ("streamk", "all"):
        specs.update(streamk_specs())
    if args.set in ("swap", "all"):
        specs.update(swap_specs())
    if args.set in ("scale-warp", "all"):
        specs.update(scale_warp_specs())
    if args.set in ("f32-store", "all"):
        specs.update(f32_store_specs())
    if args.set in ("slabs", "all"):
        specs.update(slabs_specs())
    if args.set in ("prepared-launch", "all"):
        specs.update(prepared_launch_specs())
    if args.set in ("tile-model", "all"):
        specs.update(tile_model_specs())
    if args.set in ("pairs-attention", "all"):
        specs.update(pair_specs())
    if args.set in ("training-forms", "all"):
        specs.update(training_forms_specs())
    if args.set in ("one-launch", "all"):
        specs.update(one_launch_specs())
    if args.set in ("0.4.1", "all"):
        specs.update(release_0_4_1_specs())
    if args.set in ("short-calls", "all"):
        specs.update(tiny_split_specs())
        specs.update(after_0_4_1_gemm_specs())
    if args.set in ("one-pass-grad", "all"):
        specs.update(one_pass_grad_gemm_specs())
    if args.set in ("wide-pair", "all"):
        specs.update(wide_pair_specs())
    if args.set in ("blocks-on-a", "all"):
        specs.update(blocks_on_a_specs())
    if args.set in ("kgrouped-fp8-tma", "all"):
        specs.update(kgrouped_fp8_tma_specs())
    if args.set in ("kgrouped-cluster", "all"):
        specs.update(kgrouped_cluster_specs())
    if args.set in ("scale-copies", "all"):
        specs.update(scale_copies_specs())
    if args.set in ("kgrouped-fp8-pingpong", "all"):
        specs.update(kgrouped_fp8_pingpong_specs())
    if args.set in ("rowwise-scale-loads", "all"):
        specs.update(rowwise_scale_loads_specs())
    if args.set in ("pingpong-wide", "all"):
        specs.update(pingpong_wide_specs())
    if args.set in ("kgrouped-1d1d", "all"):
        specs.update(kgrouped_1d1d_specs())
    for name, s in specs.items():
        print(name, s.kernel_name)
    found = [t for t in toolchains.installed() if t.name == toolchains.OLDEST]
    if not found:
        print(f"no NVRTC {toolchains.OLDEST} under $PTXGEN_TOOLCHAINS: run tools/toolchain_matrix.py --install DIR --only "
              f"{toolchains.OLDEST}", file=sys.stderr)
        return 2
    res = toolchains.compile_and_check(found[0], list(specs.values()), Path(tempfile.mkdtemp()))
    bad = 0
    for r in res:
        ok = not r.problems and r.local_instructions == 0 and r.stack_bytes == 0
        bad += not ok
        print(f"{'PASS' if ok else 'FAIL'} {r.version} {r.kernel} problems={r.problems} local={r.local_instructions} "
              f"stack={r.stack_bytes}")
    for kind in ("pairs-attention", "one-launch", "0.4.1", "short-calls"):
        if args.set not in (kind, "all"):
            continue
        for name, ok, detail in attention_results(found[0], Path(tempfile.mkdtemp()), new_tiles=kind == "one-launch",
                                                  tiles=ATTENTION_0_4_1 if kind == "0.4.1" else None,
                                                  specs=attention_q_buffer_specs() if kind == "short-calls" else None):
            bad += not ok
            res.append(name)
            print(f"{'PASS' if ok else 'FAIL'} {name} {detail}")
    authored = (tail_kernels() if args.set in ("short-calls", "all") else []) + \
        (one_pass_grad_kernels() if args.set in ("one-pass-grad", "all") else [])
    if authored:
        for name, ok, detail in author_results(found[0], Path(tempfile.mkdtemp()), authored):
            bad += not ok
            res.append(name)
            print(f"{'PASS' if ok else 'FAIL'} {name} {detail}")
    print(f"{len(res) - bad} of {len(res)} pass under NVRTC {toolchains.OLDEST}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
