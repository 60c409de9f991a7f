"""Block-scaled FP8 with --fp8-scale-load tma (derive.scaled.sfa_tma, 2026-12-02): the A scales of each stage by one TMA box
of a tensor map over torch's scale_a, the scale warp reduced to the B scales (lane 0).

L1: the independent TMA write model (ptxgen.model.layouts.tmamodel) lands the derived box's rows on the sfa slot's rows (the
rows the consumers read: bfp8model.check_scale_slots), zero past M, with controls; the ring with the new counts through
the pipeline simulator (check_spec), with controls. L2: NVRTC compiles it with the extra UTMALDG, no local memory, the
SASS gate. The rules and the launcher's refusal of a scale_a TMA cannot take."""

import re
from dataclasses import replace

import numpy as np
import pytest

from ptxgen.isa.types import SpecError
from ptxgen.model.numerics import bfp8model
from ptxgen.model.layouts import tmamodel


def _spec(**kw):
    from ptxgen.api.fp8blocks import default_spec

    return default_spec(**{"fp8_scale_load": "tma", **kw})


def _plan(**kw):
    from ptxgen.derive.tile.kernel import plan_kernel

    return plan_kernel(_spec(**kw))


# ---- L1: what the box writes into the slot (the TMA model, independent of the derivation) --------------------------------
def _scale_a(m: int, kbs: int, lds_a: int):
    """torch's scale_a as flat memory: (m, kb) at kb x lds_a + m, value 1000 kb + m + 1 (never 0); the padding between M
    and lds_a holds -1 (a kernel reading it would see a negative scale)."""
    flat = np.full(kbs * lds_a, -1.0, dtype=np.float32)
    for kb in range(kbs):
        flat[kb * lds_a: kb * lds_a + m] = 1000 * kb + np.arange(m) + 1
    return flat


def _global_view(flat: np.ndarray, tma, dims: dict, ld: int) -> np.ndarray:
    """The 2-D tensor the map describes, [dimension 1, dimension 0], built from the PLAN's dimension names and stride
    (so a map with its dimensions swapped or the wrong extent describes another tensor)."""
    inner, outer = (dims[d] for d in tma.global_dims)
    mem = np.full(max(flat.size, outer * ld + inner), -1.0, dtype=np.float32)  # memory past the array reads -1 too
    mem[:flat.size] = flat
    return np.lib.stride_tricks.as_strided(mem, (outer, inner), (ld * 4, 4), writeable=False).copy()


def _land(tma, bm: int, m: int, kbs: int, lds_a: int, m0: int, kb: int, origin=None, dims=None) -> np.ndarray:
    """Bytes of one sfa slot (at a 128-aligned address) after the stage's copy, as f32."""
    from ptxgen.derive.scaled.sfa_tma import sfa_copy_origin

    flat = _scale_a(m, kbs, lds_a)
    g = _global_view(flat, tma, dims or {"M": m, "Kb": kbs}, lds_a)
    image = np.zeros(512 + bm * 4, dtype=np.uint8)
    tmamodel.write(tma.to_json(), tma.element_bytes, 256, origin or sfa_copy_origin(m0, kb), g.view(np.uint32), image)  # bits
    return image[256:256 + bm * 4].view(np.float32)


@pytest.mark.parametrize("bm, m, lds_a, m0, kb", [(128, 1000, 1000, 0, 0), (128, 1000, 1004, 896, 3), (64, 60, 64, 0, 1),
                                                   (192, 388, 392, 192, 2), (256, 516, 520, 512, 0), (128, 4, 4, 0, 4)])
def test_the_box_lands_the_tiles_rows_of_its_k_block_on_the_slot(bm, m, lds_a, m0, kb):
    """Slot row r holds scale_a[m0 + r, kb] (the recipe's value), zero for m0 + r >= M (never the padding past M)."""
    from ptxgen.derive.scaled.sfa_tma import plan_sfa_tma

    tma = plan_sfa_tma(bm)
    slot = _land(tma, bm, m, 5, lds_a, m0, kb)
    want = np.array([1000 * kb + m0 + r + 1 if m0 + r < m else 0.0 for r in range(bm)], dtype=np.float32)
    assert np.array_equal(slot, want), np.argwhere(slot != want)[:4].tolist()


BOX_CONTROLS = {
    "coordinates swapped (kb, m0)": dict(origin=(3, 896)),
    "dimension 0 the stride (lds_a) instead of M: the padding lands past M": dict(dims={"M": 1004, "Kb": 5}),
}


@pytest.mark.parametrize("name", sorted(BOX_CONTROLS))
def test_box_controls_fail(name):
    from ptxgen.derive.scaled.sfa_tma import plan_sfa_tma

    tma = plan_sfa_tma(128)
    want = np.array([1000 * 3 + 896 + r + 1 if 896 + r < 1000 else 0.0 for r in range(128)], dtype=np.float32)
    assert np.array_equal(_land(tma, 128, 1000, 5, 1004, 896, 3), want)
    assert not np.array_equal(_land(tma, 128, 1000, 5, 1004, 896, 3, **BOX_CONTROLS[name]), want)


def test_box_control_dimensions_swapped_fails():
    """A map whose dimensions are (Kb, M) (the scale array read row-major) lands other values."""
    from ptxgen.derive.scaled.sfa_tma import plan_sfa_tma

    tma = plan_sfa_tma(128)
    bad = replace(tma, global_dims=("Kb", "M"), box=(4, 32))
    want = np.array([1000 * 2 + r + 1 for r in range(128)], dtype=np.float32)
    assert np.array_equal(_land(tma, 128, 1000, 5, 1004, 0, 2), want)
    assert not np.array_equal(_land(bad, 128, 1000, 5, 1004, 0, 2), want)


def _slot_writes(plan, kp):
    """What lands in a stage's slots, as check_scale_slots takes it: the box's rows as the TMA model writes them (their
    value names the row: m0 = 0, kb = 0, 1000 x 0 + row + 1) under "lane 0", plus lane 0's B scales at the rendered
    offsets (ptxgen.emit.views.blockfp8: the scale warp's b_loads)."""
    from ptxgen.emit.views.blockfp8 import sfa_tma_view

    slot = _land(kp.sfa_tma, plan.bm, 4 * plan.bm, 1, 4 * plan.bm, 0, 0)
    rows = [("sfa", int(v) - 1, 4 * r) for r, v in enumerate(slot)]
    b = [("sfb", j, x.offset_bytes) for j, x in enumerate(sfa_tma_view(kp.sfa_tma, plan).b_loads)]
    return lambda lane: rows + b if lane == 0 else []


@pytest.mark.parametrize("kw", [dict(), dict(bn=128, stages=5, epilogue="direct"), dict(bn=160, epilogue="direct"), dict(bm=192, bn=128),
                                dict(bm=64, bn=128)])
def test_slots_the_consumers_read_hold_their_rows(kw):
    """bfp8model.check_scale_slots (fragment model) on the TMA box's rows and lane 0's B scales: every consumer thread
    finds its two rows' A scales and the B blocks in order. Control: a box one row off."""
    kp = _plan(**kw)
    plan = kp.block_fp8
    writes = _slot_writes(plan, kp)
    reads = lambda warp, lane, slab: [(r.operand, r.offset_bytes) for r in plan.consumer_reads(warp, lane, slab)]
    args = (plan.bm, plan.sfb_slots, plan.sfa_stage_bytes, plan.sfb_stage_bytes)
    assert bfp8model.check_scale_slots(writes, reads, *args) == []
    shifted = lambda lane: [(o, w + 1 if o == "sfa" else w, off) for o, w, off in writes(lane)]
    assert bfp8model.check_scale_slots(shifted, reads, *args)


def test_slot_alignment_and_stage_bytes():
    """Each stage's sfa slot (the box's destination) is 128-byte aligned (the TMA model refuses others); expect_tx
    grows by BM x 4 bytes."""
    from ptxgen.derive.tile.kernel import plan_kernel

    for kw in (dict(), dict(bm=192, bn=128), dict(bm=64, bn=128)):
        kp, smem_kp = _plan(**kw), plan_kernel(_spec(fp8_scale_load="smem", **kw))
        sm = kp.layout.smem
        assert all((sm.sfa_offset + s * sm.sfa_stage_bytes) % 128 == 0 for s in range(kp.spec.stages))
        assert kp.pipeline.expect_tx_bytes == smem_kp.pipeline.expect_tx_bytes + kp.spec.bm * 4
        assert (sm.sfa_offset, sm.sfa_stage_bytes) == (smem_kp.layout.smem.sfa_offset, smem_kp.layout.smem.sfa_stage_bytes)


# ---- L1: the ring with the new counts (ptxgen.model.sim.pipesim) -------------------------------------------------------------
@pytest.mark.parametrize("kw", [dict(), dict(stages=3), dict(bn=128, stages=5, epilogue="direct"), dict(bm=192, bn=128)],
                         ids=["default", "s3", "n128-s5", "m192"])
def test_pipeline_against_the_simulator(kw):
    from ptxgen.model.bridges.check_pipeline import check_spec

    assert check_spec(_spec(**kw)) == []


PIPE_CONTROLS = {
    "full[s] still counts 33 arrivals": (dict(full_arrivals=33), "deadlock"),
    "full[s] counts the TMA thread only": (dict(full_arrivals=1), "stale"),
    "expect_tx without the A scales' box": (dict(expect_tx_bytes=-512), "tx-count -512"),
    "the TMA thread issues no scale_a box": (dict(copy_bytes="drop"), "tx-count 512"),
    "the lane does not wait empty[s]": (dict(scale_lane_waits=False), "overwrites stage"),
}


@pytest.mark.parametrize("name", sorted(PIPE_CONTROLS))
def test_pipeline_controls_fail(name):
    from ptxgen.model.sim import pipesim
    from ptxgen.model.bridges.check_pipeline import config_of, tma_copy_bytes

    s = _spec()
    kp = _plan()
    cfg = config_of(kp.pipeline, 6, tma_copy_bytes(s), 2)
    assert (cfg.scale_lanes, cfg.full_arrivals, cfg.consumer_warps, cfg.release_per_warp) == (1, 2, 4, True)
    assert sum(cfg.copy_bytes) == cfg.expect_tx_bytes and 512 in cfg.copy_bytes
    assert pipesim.explore(cfg, range(8)).problems == []
    change, expect = PIPE_CONTROLS[name]
    if "expect_tx_bytes" in change:
        change = dict(expect_tx_bytes=cfg.expect_tx_bytes + change["expect_tx_bytes"])
    if change.get("copy_bytes") == "drop":
        change = dict(copy_bytes=tuple(b for b in cfg.copy_bytes if b != 512))
    problems = pipesim.explore(replace(cfg, **change), range(8)).problems
    assert problems and any(expect in p for p in problems), problems[:3]


# ---- rules, ABI ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [dict(cluster="2x1"), dict(bn=64, consumers="pingpong")])
def test_rules_refuse_what_is_not_built(kw):
    from ptxgen.derive.tile.spec import make_spec

    with pytest.raises(SpecError) as e:
        make_spec(**{**_spec().to_json(), **kw})
    assert e.value.field == "--fp8-scale-load"


def test_abi_and_default_unchanged():
    """tmap_sfa is a parameter of the tma kernel only; auto stays smem (the default kernel's parameters and counts)."""
    import ptxgen.api.fp8blocks as fb
    from ptxgen.derive.tile.kernel import plan_kernel

    assert [q.name for q in _plan().abi.params if q.kind == "tensormap"] == ["tmap_a", "tmap_b", "tmap_d", "tmap_sfa"]
    d = plan_kernel(fb.default_spec())
    assert "tmap_sfa" not in [q.name for q in d.abi.params] and d.sfa_tma is None and d.pipeline.full_arrivals == 33
    assert fb.default_spec().scale_load.value == "smem"


# ---- runtime: the map's arguments and the refusal ------------------------------------------------------------------------
def test_sfa_map_args_and_refusal():
    """The encode arguments: dims (M, ceil(K/128)), stride lds_a x 4 B, box (BM, 1), f32, no swizzle; a scale_a TMA
    cannot take (M % 4 != 0 in torch's layout, or an address not 16-byte aligned) is a ProblemError (a ValueError:
    exit 2), and ptxgen.api.fp8blocks refuses it before any launch (ArgumentError, a ValueError)."""
    from ptxgen.api.fp8blocks import tma_lds_a
    from ptxgen.runtime.launch.arrays import ArrayInfo
    from ptxgen.runtime.launch.errors import ProblemError
    from ptxgen.runtime.launch.launch import Problem, sfa_map_args

    kp = _plan()
    p = Problem(m=1000, n=512, k=400, lda=400, ldb=400, ldd=512)
    args = sfa_map_args(kp, 0x10000, 1004, p)
    assert (args.global_dims, args.global_strides, args.box, args.element_bytes, args.swizzle) == ((1000, 4), (4016,), (128, 1), 4, 0)
    for ptr, lds in ((0x10000, 1001), (0x10004, 1004)):
        with pytest.raises(ProblemError, match="M % 4 == 0"):
            sfa_map_args(kp, ptr, lds, p)
    info = lambda ptr: ArrayInfo("scale_a", ptr, (1001, 4), (1, 1001), "f32", 4, None, "torch", "torch")
    with pytest.raises(ValueError, match="M % 4 == 0"):
        tma_lds_a(info(0x10000), 1001, "k")
    with pytest.raises(ValueError, match="16-byte"):
        tma_lds_a(info(0x10008), 1004, "k")
    assert tma_lds_a(info(0x10000), 1004, "k") == 1004


def test_gemm_without_a_spec_takes_tma_scales_where_tma_reads_scale_a():
    """ptxgen.api.fp8blocks.gemm without a spec (chosen_spec): 192 x 128 with scale_a by TMA where TMA can read scale_a
    (16-byte aligned, K-block stride a multiple of 4 floats) and the output goes through the TMA store (bf16, f16, f32);
    the scale warp's 128 x 192 (any M) otherwise: M % 4 != 0, a misaligned scale_a."""
    from ptxgen.api.fp8blocks import chosen_spec, default_spec, tma_scales_spec
    from ptxgen.runtime.launch.arrays import ArrayInfo

    info = lambda ptr, lds: ArrayInfo("scale_a", ptr, (lds, 4), (1, lds), "f32", 4, None, "torch", "torch")  # noqa: E731
    for out in ("bf16", "f16", "f32"):
        s = chosen_spec(out, info(0x10000, 1004), 1004)
        assert s == tma_scales_spec(out) and (s.bm, s.bn, s.fp8_scale_load.value, s.consumer_warpgroups) == (192, 128, "tma", 3)
        for ptr, lds in ((0x10000, 1001), (0x10008, 1004)):
            assert chosen_spec(out, info(ptr, lds), lds) == default_spec(out)
    assert default_spec().fp8_scale_load.value == "auto" and (default_spec().bm, default_spec().bn) == (128, 192)


# ---- L2: NVRTC ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [dict(), dict(bn=128, stages=5, epilogue="direct"), dict(bm=192, bn=128),
                                dict(fp8_overlap="interleave")], ids=["n192-tma", "n128-direct", "m192", "interleave"])
def test_compiles_with_the_extra_tma_copy(kw):
    """The producer issues one more UTMALDG a stage (A, B, scale_a) than the smem kernel, the scale warp loads only B's
    scales (fewer LDG), no local memory, no serialized wgmma; the SASS gate passes."""
    from ptxgen.derive.tile.kernel import plan_kernel
    from ptxgen.emit.render import render_kernel
    from ptxgen.runtime.compile.sass import check_sass
    from ptxgen.runtime.compile.toolchain import compile_cuda, run_tool

    def build(load):
        s = _spec(fp8_scale_load=load, **kw)
        src = render_kernel(plan_kernel(s))
        c = compile_cuda(src, s.kernel_name, "sm_90a")
        rep = check_sass(s, c.cubin)
        assert rep.ok and rep.local_bytes == 0, rep.problems
        assert "C7514" not in c.log
        return src, run_tool("cuobjdump", ["--dump-sass"], c.cubin)

    src, sass = build("tma")
    smem_src, smem_sass = build("smem")
    assert "&tmap_sfa, m0, kt, full);" in src and "tma_prefetch(&tmap_sfa);" in src and "tmap_sfa" not in smem_src
    assert sass.count("UTMALDG") == smem_sass.count("UTMALDG") + 1
    assert sass.count("LDG.E") < smem_sass.count("LDG.E")  # the scale warp's A-scale loads are gone
    assert re.search(r"\bSTS[ .]", sass) and re.search(r"\bLDS[ .]", sass)  # lane 0's B scales; the consumers' reads


def test_bench_token():
    """tools/bench_blockfp8.py: tmasf selects --fp8-scale-load tma (tma alone is still the epilogue)."""
    import importlib.util
    from pathlib import Path

    from ptxgen.api.fp8blocks import default_spec

    path = Path(__file__).resolve().parent.parent / "tools" / "bench_blockfp8.py"
    mod_spec = importlib.util.spec_from_file_location("bench_blockfp8", path)
    bench = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(bench)
    assert default_spec(**bench.parse_variant("n192-s4-tma-tmasf")[3]) == _spec(bn=192, stages=4, epilogue="tma")
    assert bench.parse_variant("n192-s4-tma")[3]["fp8_scale_load"] == "auto"


def test_cli_explain_and_the_refusal(capsys):
    """ptxgen explain lists the map's derivation (exit 0); --fp8-scale-load tma with --cluster is refused (exit 2, a
    message, no traceback)."""
    from ptxgen.cli import main

    args = ["explain", "--bm", "128", "--bn", "192", "--bk", "128", "--a", "kmajor-sw128", "--b", "kmajor-sw128", "--dtype",
            "e4m3", "--out-dtype", "bf16", "--arch", "sm_90a", "--stages", "4", "--epilogue", "tma", "--schedule",
            "persistent", "--fp8-blocks", "1x128x128", "--fp8-scale-load", "tma"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "sfa_box            128 x 1" in out and "tmap_sfa" in out and "full_arrivals      2" in out
    assert main(args + ["--cluster", "2x1"]) == 2
    err = capsys.readouterr().err
    assert "--fp8-scale-load=tma is illegal" in err and "Traceback" not in err
