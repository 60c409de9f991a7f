"""ptxgen.author, the public authoring layer: derived values against the independent models (L1), the rendered
C expressions evaluated as the kernel would, refusals that name the rule, NVRTC + SASS (L2), and controls.

The L1 check is end to end and shares no code with the writers: the TMA model (ptxgen.model.layouts.tmamodel) performs the
plan's copies of a random global tile into a shared-memory image at the stage the RingPlan places, then the read
model (ptxgen.model.layouts.readmodel) reads every K step through the descriptor the TEMPLATE computes (the rendered C
expression, evaluated here) and must get exactly that K slice of the tile back.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ptxgen.author import (AuthorError, Kernel, Operand, Param, RegisterA, Ring, SassGateError, build, parse_operand, wgmma)
from ptxgen.isa.types import SpecError
from ptxgen.model.layouts import readmodel, tmamodel

ROOT = Path(__file__).resolve().parent.parent
CODE = {1: np.uint8, 2: np.uint16, 4: np.uint32}

# Operands of attention and of the example, and every swizzle x majorness on both MMA sides.
TOKENS = [
    "Q:k-sw128:bf16:64x128:a", "Q2:k-sw128:bf16:128x64:a", "K:k-sw128:bf16:128x64", "V:mn-sw128:bf16:128x64",
    "V64:mn-sw128:bf16:64x128", "X:k-sw64:f16:128x32:a", "W:mn-sw64:f16:64x64", "B:mn-sw32:bf16:32x64",
    "N0:k-none:f16:64x32", "N1:mn-none:f16:16x64", "A1:mn-sw128:f16:128x64:a", "E:k-sw128:e4m3:128x128",
]


def c_eval(expr: str, **env) -> int:
    """Evaluate one of the layer's rendered C expressions (unsigned integer arithmetic) with ``env``'s values."""
    py = expr.replace("(unsigned long long)", "").replace("static_cast<unsigned>", "")
    py = re.sub(r"\b(0x[0-9a-fA-F]+|\d+)(?:ull|u)\b", r"\1", py).replace("/", "//")  # integer division, as in C
    return int(eval(py, {"__builtins__": {}}, env)) & ((1 << 64) - 1)


def tile_and_global(op: Operand, rng, partial: bool):
    """(global tensor [outer, inner] of codes, tile origin (inner0, outer0), the logical MN x K tile it should give)."""
    k_major = op.major.value == "k"
    inner, outer = (op.k, op.mn) if k_major else (op.mn, op.k)
    i0, o0 = (int(x) for x in rng.integers(0, 24, size=2))
    ext = (o0 + (int(rng.integers(1, outer)) if partial else outer + 3), i0 + (int(rng.integers(1, inner)) if partial else inner + 5))
    code = CODE[op.dtype.container_bits // 8]
    g = rng.integers(1, np.iinfo(code).max, size=ext, dtype=np.uint64).astype(code)
    window = np.zeros((outer, inner), dtype=code)
    part = g[o0:o0 + outer, i0:i0 + inner]
    window[:part.shape[0], :part.shape[1]] = part
    return g, (i0, o0), (window if k_major else window.T)


def l1_problems(plan, ring, stage: int, rng, partial=False, desc_of=None) -> list[str]:
    """The stage's TMA copies (model) then every K step x slab read through the template's descriptor (model)."""
    op = plan.operand
    region = ring.regions[op.name]
    address = c_eval(region.addr("s"), base=0, s=stage)
    g, origin, tile = tile_and_global(op, rng, partial)
    img = rng.integers(0, 256, size=ring.used_bytes + 1024, dtype=np.uint8)  # garbage where nothing is written
    tmamodel.write(plan.tma.to_json(), g.itemsize, address, origin, g, img, anchor="address")
    mma_mn = plan.layout.mma_mn
    problems = []
    for i, step in enumerate(plan.k_steps):
        for slab in range(len(plan.slab_offsets_bytes)):
            expr = plan.desc_expr("st", i, slab)
            desc = c_eval(expr, st=address) if desc_of is None else desc_of(expr, address, i, slab)
            got = readmodel.read("sm_90a", desc, op.major.value, mma_mn, op.dtype.value, img)
            want = tile[slab * mma_mn:(slab + 1) * mma_mn, step.k:step.k + got.shape[1]]
            if not np.array_equal(got, want):
                problems.append(f"{op.token} stage {stage} K step {i} slab {slab}: {int(np.count_nonzero(got != want))} differ")
    return problems


def ring_with(plan):
    """A 3-stage ring where the operand is not first (its ring starts past another's)."""
    other = Operand("Pad", "k", "sw64", "f16", 64, 32).plan()
    return Ring(stages=3, operands=(other, plan), consumer_warpgroups=2).plan()


@pytest.mark.parametrize("token", TOKENS)
def test_tma_then_descriptors_read_the_tile(token):
    plan = parse_operand(token).plan()
    ring = ring_with(plan)
    rng = np.random.default_rng(sum(map(ord, token)))
    for stage, partial in ((0, False), (2, False), (1, True)):
        assert l1_problems(plan, ring, stage, rng, partial) == []


def test_a_wrong_descriptor_is_caught():
    """Control: the same check with SBO one unit off (or the start one 16-B unit off) reads the wrong elements."""
    plan = parse_operand("V:mn-sw128:bf16:128x64").plan()
    ring = ring_with(plan)
    rng = np.random.default_rng(1)
    assert l1_problems(plan, ring, 1, rng, desc_of=lambda e, a, i, s: c_eval(e, st=a) + (1 << 32))
    assert l1_problems(plan, ring, 1, rng, desc_of=lambda e, a, i, s: c_eval(e, st=a + 16))


def test_attention_operands_by_hand():
    """Values written from the PTX canonical layouts (not from the code): V (N = 128 head dim, K = 64 keys) MN-major
    SW128 bf16 has two 64-element atoms along N (LBO 1024 B) and 8-K-row groups of both atoms (SBO 2048 B); a K step of
    16 keys is two groups (4096 B). K (N = 128 keys, K = 64 of the head dim) K-major SW128: SBO = 8 rows x 128 B."""
    v = parse_operand("V:mn-sw128:bf16:128x64").plan()
    assert (v.lbo_bytes, v.sbo_bytes, v.layout_type, v.stage_bytes) == (1024, 2048, 1, 128 * 64 * 2)
    assert [s.start_offset_bytes for s in v.k_steps] == [0, 4096, 8192, 12288]
    k = parse_operand("K:k-sw128:bf16:128x64").plan()
    assert (k.sbo_bytes, k.layout_type, [s.start_offset_bytes for s in k.k_steps]) == (1024, 1, [0, 32, 64, 96])
    assert k.tma.box == (64, 128) and v.tma.box == (64, 8) and v.expect_tx_bytes == 16384


def test_ring_plan():
    x = Operand("X", "k", "sw128", "bf16", 128, 64, "a").plan()
    w = Operand("W", "k", "sw128", "bf16", 64, 64).plan()
    r = Ring(stages=4, operands=(x, w), consumer_warpgroups=2).plan()
    assert (r.regions["X"].offset_bytes, r.regions["X"].stage_stride_bytes) == (0, 16384)
    assert (r.regions["W"].offset_bytes, r.regions["W"].stage_stride_bytes) == (65536, 8192)
    assert r.full.offset_bytes == 98304 and r.empty.offset_bytes == 98304 + 32
    assert r.expect_tx_bytes == 128 * 64 * 2 + 64 * 64 * 2
    assert (r.full_arrivals, r.empty_arrivals, r.threads) == (1, 2, 384)
    # CUTLASS's budgets for one producer and two consumer warpgroups: 40 / 232 at a launch count of 168
    assert (r.producer_registers, r.consumer_registers, r.entry_registers) == (40, 232, 168)
    assert c_eval(r.stage_addr("W", "s"), base=1024, s=3) == 1024 + 65536 + 3 * 8192


@pytest.mark.parametrize("kw, field", [
    (dict(stages=0), "stages"), (dict(stages=30), "stages"), (dict(consumer_warpgroups=4), "consumer_warpgroups"),
    (dict(consumer_registers=248), "consumer_registers"), (dict(producer_registers=41), "producer_registers"),
])
def test_ring_refusals_name_the_rule(kw, field):
    x = Operand("X", "k", "sw128", "bf16", 128, 64, "a").plan()
    with pytest.raises(SpecError) as e:
        Ring(**{"stages": 2, "operands": (x,), "consumer_warpgroups": 2, **kw}).plan()
    assert e.value.field == field and "Legal" in str(e.value)


def test_wgmma_plans():
    q = parse_operand("Q:k-sw128:bf16:64x64:a").plan()
    k = parse_operand("K:k-sw128:bf16:128x64").plan()
    v = parse_operand("V:mn-sw128:bf16:128x64").plan()
    s = wgmma(q, k)
    assert s.opcode == "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" and s.immediates == ", 1, 1, 0, 0"
    assert (s.acc_regs, s.op_a_desc, s.op_b_desc, s.op_scale_d, len(s.steps), s.sass_opcode) == (64, 64, 65, 66, 4, "HGMMA")
    pv = wgmma(RegisterA(v.operand.dtype), v)  # P (registers) x V (MN-major): imm-trans-b 1, no imm-trans-a
    assert pv.register_a and pv.a_regs == 4 and pv.immediates == ", 1, 1, 1"
    assert pv.a_list == "{%64, %65, %66, %67}" and (pv.op_b_desc, pv.op_scale_d) == (68, 69)


@pytest.mark.parametrize("a, b, field", [
    ("Q:k-sw64:bf16:64x32:a", "K:k-sw128:bf16:128x64", "Q.k"),  # K per stage differs
    ("Q:k-sw128:bf16:96x64:a", "K:k-sw128:bf16:128x64", "Q.mn"),  # not m64 slabs
    ("Q:k-sw128:f16:64x64:a", "K:k-sw128:bf16:128x64", "K.dtype"),
    ("Q:k-sw128:bf16:64x64:a", "K:k-sw128:bf16:128x64:a", "K.mma_role"),
])
def test_wgmma_refusals(a, b, field):
    with pytest.raises(SpecError) as e:
        wgmma(parse_operand(a).plan(), parse_operand(b).plan())
    name, what = field.split(".")
    assert e.value.field in (field, f"operand {name} ({parse_operand(a if name == 'Q' else b).token}): {what}")


@pytest.mark.parametrize("token, field", [
    ("V:mn-sw128:bf16:100x64", "operand V (V:mn-sw128:bf16:100x64:b:sm_90a): mn"), ("V:mn-sw128:bf16", "--operand"),
    ("V:xx-sw128:bf16:128x64", "--operand"), ("V:mn-sw128:bf16:128xQ", "--operand"), ("1V:mn-sw128:bf16:128x64", "operand name"),
    ("E:mn-sw128:e4m3:128x128", "operand E (E:mn-sw128:e4m3:128x128:b:sm_90a): layout"),  # 8-bit wgmma operands are K-major
])
def test_operand_refusals(token, field):
    with pytest.raises(SpecError) as e:
        parse_operand(token).plan()
    assert e.value.field == field


# ---- the Kernel declaration and the template -------------------------------------------------------------
SMALL = """{% import "author/pieces.cuh.j2" as p %}
{{ p.mbarrier_ops() }}
{{ p.wgmma_sync_ops() }}
{{ p.fence_acc_fn(mma.acc_ctype, mma.acc_regs, mma.acc_constraint) }}
{{ p.wgmma_rs_fn("mma_pv", mma) }}
{{ p.pack_ops() }}
extern "C" __global__ void __launch_bounds__({{ kernel.threads }}, 1) {{ kernel.name }}({{ kernel.signature }}) {
{{ p.smem_base() }}
  {{ mma.acc_ctype }} acc[{{ mma.acc_regs }}];
  unsigned a[{{ mma.a_regs }}];
  for (int i = 0; i < {{ mma.a_regs }}; ++i) a[i] = pack_bf16x2(static_cast<float>(seed[2 * i]), static_cast<float>(seed[2 * i + 1]));
  for (int i = 0; i < {{ mma.acc_regs }}; ++i) acc[i] = 0.0f;
  fence_acc(acc);
  wgmma_fence();
{% for st in mma.steps %}
  mma_pv(acc, a, {{ st.b_desc("base") }}, 1u);
{% endfor %}
  wgmma_commit();
  wgmma_wait<0>();
  fence_acc(acc);
  for (int i = 0; i < {{ mma.acc_regs }}; ++i) out[threadIdx.x * {{ mma.acc_regs }} + i] = acc[i];
}
"""


def small_kernel(template=SMALL, expect=None, **context):
    v = parse_operand("V:mn-sw128:bf16:128x64").plan()
    mma = wgmma(RegisterA(v.operand.dtype), v)
    params = (Param("seed", "ptr", dtype="s32"), Param("out", "ptr", dtype="f32", const=False))
    return Kernel("author_pv_probe", template, params, block=(128, 1, 1), shared_bytes=v.stage_bytes + 1024,
                  expect_sass=expect or {"HGMMA": len(mma.steps)}, context={"mma": mma, **context})


def test_register_a_wgmma_compiles_with_its_hgmmas():
    """L2: P (registers) x V (MN-major SW128 through the plan's descriptors): 4 HGMMA, no local memory."""
    built = build(small_kernel())
    assert built.sass.ok, built.sass.problems
    assert built.sass.counts == {"HGMMA": 4} and built.sass.local_bytes == 0
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" in built.ptx


def test_the_sass_gate_fails_on_a_wrong_count():
    """Control: the gate is not a formality; the same kernel expecting 5 HGMMA (or naming no MMA) is refused."""
    with pytest.raises(SassGateError, match="4 HGMMA, expected 5"):
        build(small_kernel(expect={"HGMMA": 5}))
    report = build(small_kernel(expect={"UTMALDG": 0}), gate=False).sass
    assert not report.ok and any("did not name" in p for p in report.problems)


def test_strict_undefined_and_frozen_context():
    with pytest.raises(AuthorError, match="mmma"):
        small_kernel(template=SMALL.replace("mma.acc_regs }}];\n  unsigned", "mmma.acc_regs }}];\n  unsigned")).render()
    with pytest.raises(AuthorError, match="frozen"):
        small_kernel(extra={"bm": 128})
    with pytest.raises(AuthorError, match="syntax"):
        small_kernel(template="{% for %}").render()
    with pytest.raises(AuthorError, match="MMA instruction counts"):
        Kernel("k", "x", (), (128, 1, 1), 0, {})


def test_arguments_are_checked_before_any_gpu_work():
    from ptxgen.author.launch import Binder
    from ptxgen.runtime.launch.arrays import ArgumentError

    k = small_kernel()
    binder = Binder(k.name, k.params, k.arch, b"", k.block, k.shared_bytes)
    with pytest.raises(ArgumentError, match="takes 2 arguments"):
        binder.bind((1,))
    with pytest.raises(ArgumentError, match="device array"):
        binder.bind(([1, 2], [3]))


class FakeDeviceArray:
    """Only what the argument checks read (no memory behind it)."""

    def __init__(self, shape, dtype, strides=None, ptr=1 << 20):
        self.shape, self.dtype = shape, dtype
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<V2", "data": (ptr, False), "version": 3,
                                         "strides": strides}


def test_tensor_map_rules_are_checked_before_any_gpu_work():
    """A row stride of 1001 bf16 = 2002 B is no multiple of 16 B: the map is refused naming cuTensorMapEncodeTiled's
    rule, with no GPU (ProblemError: exit 2 territory). A tight 1024-element row is prepared."""
    from ptxgen.author.launch import Binder
    from ptxgen.runtime.launch.arrays import ArgumentError
    from ptxgen.runtime.launch.errors import ProblemError

    w = parse_operand("W:k-sw128:bf16:128x64").plan()
    params = (Param("tmap_w", "tensormap", operand=w), Param("K", "i32"))
    binder = Binder("k", params, w.operand.arch, b"", (128, 1, 1), 0)
    with pytest.raises(ProblemError, match="multiple of 16"):
        binder.prepare((FakeDeviceArray((300, 1001), "bfloat16"), 1001))
    prep = binder.prepare((FakeDeviceArray((300, 1024), "bfloat16"), 1024))
    assert prep.slots[0].template.global_dims == (1024, 300) and prep.slots[0].template.box == (64, 128)
    with pytest.raises(ArgumentError, match="is bf16, the array is f16"):
        binder.prepare((FakeDeviceArray((300, 1024), "float16"), 1024))
    with pytest.raises(ArgumentError, match="not 16-byte aligned"):
        binder.prepare((FakeDeviceArray((300, 1024), "bfloat16", ptr=(1 << 20) + 8), 1024))


def test_public_names_match_the_docs():
    import ptxgen.author as author

    text = (ROOT / "docs" / "authoring.md").read_text()
    block = text.split("<!-- public names -->")[1].split("<!-- end public names -->")[0]
    documented = re.findall(r"^- `([A-Za-z_][A-Za-z_0-9]*)`", block, re.M)
    assert documented and sorted(documented) == sorted(author.__all__)


def test_gemm_templates_use_the_public_pieces():
    """What ptxgen's own kernels use is what users get: the GEMM templates call the pieces, and no definition of the
    shared helpers is left in them."""
    for name in ("common.cuh.j2", "mma_wgmma.cuh.j2"):
        text = (ROOT / "templates" / name).read_text()
        assert 'import "author/pieces.cuh.j2" as pieces' in text
    assert "void mbar_wait(" not in (ROOT / "templates" / "common.cuh.j2").read_text()
    assert "void wgmma_fence()" not in (ROOT / "templates" / "mma_wgmma.cuh.j2").read_text()


def test_attention_templates_use_the_public_pieces():
    """The attention templates define no PTX wrapper of their own: every inline assembly and device function they
    emit comes from the pieces (docs/attention.md)."""
    for name in ("attention_parts.cuh.j2", "attention_sm90.cu.j2", "attention_sm100.cu.j2"):
        text = (ROOT / "templates" / name).read_text()
        assert "asm" not in text and "__device__" not in text, name
    assert 'import "author/pieces.cuh.j2" as p' in (ROOT / "templates" / "attention_parts.cuh.j2").read_text()
    assert 'import "author/pieces.cuh.j2" as p' in (ROOT / "templates" / "attention_sm100.cu.j2").read_text()


def test_example_compile_only():
    """L2: the example compiles on a machine without a GPU and passes its SASS gate (8 HGMMA)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "custom_kernel.py"), "--compile-only"], capture_output=True,
                       text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SASS check: ok" in r.stdout and "8 HGMMA (expected 8)" in r.stdout


@pytest.mark.gpu
def test_example_runs_and_matches_numpy():
    """L3 (H100/H200): the example's kernel against a float64 numpy reference at M, N, K off the tile sizes."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "custom_kernel.py")], capture_output=True, text=True, env=env,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ": ok" in r.stdout


# ---- ptxgen explain / show --operand -----------------------------------------------------------------------
def cli(capsys, *argv):
    from ptxgen.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_explain_operand(capsys, tmp_path):
    code, out, _ = cli(capsys, "explain", "--operand", "V:mn-sw128:bf16:128x64")
    assert code == 0 and "lbo_bytes          1024" in out and "sbo_bytes          2048" in out and "k_step[1]" in out
    f = tmp_path / "ops.txt"
    f.write_text("# attention's operands\nQ:k-sw128:bf16:64x128:a\nK:k-sw128:bf16:128x128  # keys\nV:mn-sw128:bf16:128x128\n")
    code, out, _ = cli(capsys, "explain", "--operand", f"@{f}", "--json")
    import json

    j = json.loads(out)
    assert code == 0 and sorted(j) == ["K", "Q", "V"] and j["V"]["major"] == "mn" and j["V"]["tma"]["expect_tx_bytes"] == 32768


@pytest.mark.parametrize("argv, words", [
    (["explain", "--operand", "V:mn-sw128:bf16:100x64"], "mn=100"),
    (["explain", "--operand", "V:mn-sw999:bf16:128x64"], "swizzle"),
    (["explain", "--operand", "V:mn"], "<name>:<k|mn>"),
    (["explain", "--operand", "V:mn-sw128:bf16:128x64", "--bm", "128"], "not both"),
    (["explain"], "--bm"),
    (["explain", "--operand", "@/nonexistent/ops.txt"], "cannot be read"),
    (["show", "--operand", "q", "--bm", "128", "--bn", "128", "--bk", "32", "--a", "kmajor-sw64"], "NAME:LAYOUT"),
    (["show", "--operand", "V:mn-sw128:bf16:128x6"], "V"),
])
def test_cli_bad_operand_exits_2(capsys, argv, words):
    code, out, err = cli(capsys, *argv)
    assert code == 2 and words in err and "Traceback" not in err


def test_cli_show_operand(capsys, tmp_path):
    target = tmp_path / "v.svg"
    code, out, _ = cli(capsys, "show", "--operand", "V:mn-sw128:bf16:128x64", "--svg", str(target))
    text = target.read_text()
    assert code == 0 and text.rstrip().endswith("</svg>") and "ptxgen operand V:mn-sw128:bf16:128x64:b:sm_90a" in text


# ---- the ring's barrier protocol, on the independent mbarrier model ---------------------------------------
def simulate_ring(ring, k_tiles: int, seed: int, producer_parity=None, empty_arrivals=None) -> list[str]:
    """Producer and consumer warpgroups run the pieces' protocol (producer_acquire, load_stage's copies, consumer_wait,
    consumer_release) with the ring plan's rendered stage, parity and count expressions, interleaved at random on
    ptxgen.model.sim.mbarrier. Returns the problems: a consumer that reads a stage holding another K tile, a deadlock,
    a barrier misused."""
    from ptxgen.model.sim.mbarrier import MBarrier

    rng = np.random.default_rng(seed)
    n = ring.stages
    full = [MBarrier(f"full[{s}]", ring.full_arrivals) for s in range(n)]
    empty = [MBarrier(f"empty[{s}]", empty_arrivals or ring.empty_arrivals) for s in range(n)]
    held = [None] * n  # which K tile's bytes a stage holds
    inflight: list = []  # (stage, kt): copies issued, bytes not yet landed
    parity_expr = producer_parity or ring.producer_parity
    problems: list[str] = []

    def producer():
        for kt in range(k_tiles):
            s, ph = c_eval(ring.stage_of("kt"), kt=kt), c_eval(ring.phase_of("kt"), kt=kt)
            while not empty[s].test_wait(c_eval(parity_expr("ph"), ph=ph)):
                yield
            full[s].arrive_expect_tx(ring.expect_tx_bytes)
            inflight.append((s, kt))
            yield

    def consumer(c):
        for kt in range(k_tiles):
            s, ph = c_eval(ring.stage_of("kt"), kt=kt), c_eval(ring.phase_of("kt"), kt=kt)
            while not full[s].test_wait(ph):
                yield
            yield  # the MMAs read the stage
            if held[s] != kt:
                problems.append(f"consumer {c} read K tile {kt} from stage {s}, which holds {held[s]}")
            empty[s].arrive()
            yield

    warps = [producer()] + [consumer(c) for c in range(ring.consumer_warpgroups)]
    alive, idle = list(warps), 0
    while alive and idle < 10_000:
        if inflight and rng.random() < 0.3:  # the copy engine lands one stage's bytes
            s, kt = inflight.pop(int(rng.integers(len(inflight))))
            held[s] = kt
            full[s].complete_tx(ring.expect_tx_bytes)
        a = alive[int(rng.integers(len(alive)))]
        try:
            next(a)
            idle = idle + 1 if not inflight else 0
        except StopIteration:
            alive.remove(a)
    if alive:
        problems.append(f"deadlock: {len(alive)} warp(s) still waiting")
    return problems + [m for b in full + empty for m in b.misuse]


@pytest.mark.parametrize("stages, consumers", [(1, 1), (2, 2), (3, 1), (4, 2), (5, 3)])
def test_ring_protocol_on_the_mbarrier_model(stages, consumers):
    x = Operand("X", "k", "sw128", "bf16", 64 * consumers, 64, "a").plan()
    ring = Ring(stages=stages, operands=(x,), consumer_warpgroups=consumers).plan()
    for seed in range(20):
        assert simulate_ring(ring, 11, seed) == []


def test_ring_protocol_controls():
    """Controls: a producer waiting for the empty barrier's current parity deadlocks on the first pass; an empty
    barrier that counts one arrival with two consumer warpgroups lets the producer overwrite a stage still being read."""
    x = Operand("X", "k", "sw128", "bf16", 128, 64, "a").plan()
    ring = Ring(stages=2, operands=(x,), consumer_warpgroups=2).plan()
    assert any("deadlock" in p for p in simulate_ring(ring, 6, 0, producer_parity=lambda ph: ph))
    assert any("holds" in p or "misuse" in p or "no arrival" in p
               for seed in range(20) for p in simulate_ring(ring, 9, seed, empty_arrivals=1))


# ---- tcgen05 (sm_100a): L2 only (no Blackwell GPU here) ---------------------------------------------------
SM100 = """{% import "author/pieces.cuh.j2" as p %}
{{ p.mbarrier_ops() }}
{{ p.tcgen05_ops(1) }}
{{ p.tcgen05_mma_fn("mma_ss", 1, qk.kind) }}
{{ p.tcgen05_ts_fn("mma_ts", pv) }}
{{ p.tcgen05_commit_op() }}
{{ p.tmem_ld_fn(ld) }}
{{ p.tmem_ld_wait_fn(ld) }}
extern "C" __global__ void __launch_bounds__(128, 1) {{ kernel.name }}({{ kernel.signature }}) {
{{ p.smem_base() }}
  __shared__ unsigned tmem_slot;
  __shared__ alignas(8) unsigned long long bar;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  if (warp == 0) {
    tmem_alloc(smem_u32(&tmem_slot), {{ tm.alloc_columns }}u);
    tmem_relinquish();
  }
  if (threadIdx.x == 0) {
    mbar_init(smem_u32(&bar), 1u);
    fence_mbarrier_init();
  }
  tcgen05_fence_before();
  __syncthreads();
  tcgen05_fence_after();
  const unsigned tmem = tmem_slot;
  if (threadIdx.x == 0) {
    const unsigned sq = {{ ring.stage_addr("Q", "0") }}, sk = {{ ring.stage_addr("K", "0") }}, sv = {{ ring.stage_addr("V", "0") }};
    {{ p.tcgen05_k_tile("mma_ss", qk, "tmem + " ~ tm.column("S") ~ "u", "sq", "sk", "0u") | indent(4) }}
{% for st in pv.steps %}
    mma_ts(tmem + {{ tm.column("O") }}u, tmem + {{ tm.column("P") + loop.index0 * 8 }}u, {{ st.b_desc("sv") }}, {{ pv.idesc_hex }}u, {{ "0u" if loop.first else "1u" }});
{% endfor %}
    mma_commit(smem_u32(&bar));
  }
  mbar_wait(smem_u32(&bar), 0u);
  tcgen05_fence_after();
  unsigned r[{{ ld.chunk }}];
  tmem_ld_chunk({{ tm.address("tmem", "warp * 32", "seed[0]") }}, r);
  tmem_ld_wait(r);
  for (int i = 0; i < {{ ld.chunk }}; ++i) out[threadIdx.x * {{ ld.chunk }} + i] = r[i];
  tcgen05_fence_before();
  __syncthreads();
  if (warp == 0) tmem_dealloc(tmem, {{ tm.alloc_columns }}u);
}
"""


def test_tcgen05_pieces_compile_with_their_utchmmas():
    """L2: S = Q.K^T (both in shared memory) and O = P.V (P in TMEM, V MN-major) on tcgen05, the TMEM allocator, a
    commit, a 32x32b load: 4 + 8 UTCHMMA (K 64 and 128 in steps of 16), one LDTM, no local memory (NVRTC for sm_100a; never run: no Blackwell)."""
    from ptxgen.author import TmemA, TmemLoad, tcgen05, tmem_plan

    q = parse_operand("Q:k-sw128:bf16:128x64:a:sm_100a").plan()
    k = parse_operand("K:k-sw128:bf16:128x64:b:sm_100a").plan()
    v = parse_operand("V:mn-sw128:bf16:64x128:b:sm_100a").plan()
    qk, pv = tcgen05(q, k), tcgen05(TmemA(v.operand.dtype), v)
    assert qk.idesc_hex == "0x08200490" and dict(qk.idesc_fields)["b_major"] == 0 and dict(pv.idesc_fields)["b_major"] == 1
    tm = tmem_plan(S=qk.acc_columns, P=64, O=pv.acc_columns)
    ring = Ring(stages=1, operands=(q, k, v)).plan()
    params = (Param("seed", "ptr", dtype="s32"), Param("out", "ptr", dtype="s32", const=False))
    kernel = Kernel("author_tcgen05_probe", SM100, params, block=(128, 1, 1), shared_bytes=ring.dynamic_smem_bytes,
                    expect_sass={"UTCHMMA": len(qk.steps) + len(pv.steps), "LDTM": 1}, arch="sm_100a",
                    context=dict(qk=qk, pv=pv, tm=tm, ld=TmemLoad(32), ring=ring))
    built = build(kernel)
    assert built.sass.ok, built.sass.problems
    assert (len(qk.steps), len(pv.steps), tm.alloc_columns) == (4, 8, 256) and "tcgen05.mma.cta_group::1.kind::f16" in built.ptx


def test_tcgen05_refusals():
    from ptxgen.author import tcgen05, tmem_plan

    with pytest.raises(SpecError, match="sm_100a"):
        tcgen05(parse_operand("Q:k-sw128:bf16:128x64:a").plan(), parse_operand("K:k-sw128:bf16:128x64").plan())
    with pytest.raises(SpecError, match="512"):
        tmem_plan(S=256, O=256, X=32)


def a_fragment_coords(warp: int, lane: int, half: int) -> tuple[int, int]:
    """(row, column) of the 16-bit element ``half`` (0..7) of an m64 x k16 wgmma A register fragment, transcribed from
    PTX 'Register fragment layout for matrix A (wgmma .m64nNk16)': a0, a1 at row groupID, columns 2 threadID_in_group
    + 0, 1; a2, a3 at row groupID + 8; a4, a5 at row groupID, 8 columns on; a6, a7 at row groupID + 8, 8 columns on;
    each warp owns 16 rows."""
    group, tig = lane // 4, lane % 4
    row = 16 * warp + group + (8 if half in (2, 3, 6, 7) else 0)
    col = 2 * tig + (half % 2) + (8 if half >= 4 else 0)
    return row, col


def acc_pairs_problems(pairs_of) -> list[str]:
    from ptxgen.model.layouts.fragmodel import wgmma_d_coords

    out = []
    for k_step in range(4):
        for warp in range(4):
            for lane in range(32):
                for w, (lo, hi) in enumerate(pairs_of(k_step)):
                    for half, d in ((2 * w, lo), (2 * w + 1, hi)):
                        r, c = a_fragment_coords(warp, lane, half)
                        if wgmma_d_coords(warp, lane, d) != (r, 16 * k_step + c):
                            out.append(f"K step {k_step} warp {warp} lane {lane} word {w}: d[{d}] is not A's element {half}")
    return out


def test_register_a_from_the_accumulator():
    """L1: the accumulator elements RegisterA.acc_pairs packs into A's words sit, in the D fragment (the independent
    fragment model), exactly where the A fragment wants them. Control: the words in another order fail."""
    ra = RegisterA(parse_operand("V:mn-sw128:bf16:128x64").dtype)
    assert ra.acc_pairs(1) == ((8, 9), (10, 11), (12, 13), (14, 15))
    assert acc_pairs_problems(ra.acc_pairs) == []
    assert acc_pairs_problems(lambda k: tuple(reversed(ra.acc_pairs(k))))


def test_two_rings_share_the_window_without_overlap():
    """FA3 keeps K and V in rings of their own (each with its barriers): the second starts where the first ends."""
    k = parse_operand("K:k-sw128:bf16:128x128").plan()
    v = parse_operand("V:mn-sw128:bf16:128x128").plan()
    rk = Ring(stages=2, operands=(k,), consumer_warpgroups=2).plan()
    rv = Ring(stages=2, operands=(v,), consumer_warpgroups=2, start_bytes=rk.next_start_bytes).plan()
    spans = sorted((r.offset_bytes, r.offset_bytes + r.nbytes) for p in (rk, rv) for r in (*p.regions.values(), p.full, p.empty))
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    assert rv.regions["V"].offset_bytes == 2 * 32768 + 1024 and rv.regions["V"].offset_bytes % 1024 == 0
    with pytest.raises(SpecError, match="start_bytes"):
        Ring(stages=2, operands=(v,), start_bytes=100).plan()


@pytest.mark.gpu
def test_example_on_torch_tensors_and_in_a_cuda_graph():
    """L3 (H100/H200), torch with CUDA: the example's kernel on torch bf16 tensors, eagerly (against a float64
    reference) and captured into a CUDA graph (the replay is bit-identical to the eager call)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    import importlib.util

    spec = importlib.util.spec_from_file_location("custom_kernel", ROOT / "examples" / "custom_kernel.py")
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    built = build(ex.make_kernel())
    m, n, k = 517, 320, 264
    g = torch.Generator(device="cuda").manual_seed(0)
    x, w1, w3 = (torch.randn(s, device="cuda", generator=g).to(torch.bfloat16) for s in ((m, k), (n, k), (n, k)))
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    grid = (-(-n // ex.BN), -(-m // ex.BM), 1)
    built(x, w1, w3, out, m, n, k, grid=grid)
    torch.cuda.synchronize()
    want = ex.reference(*(t.double().cpu().numpy() for t in (x, w1, w3)))
    got = out.double().cpu().numpy()
    assert np.isfinite(got).all() and np.allclose(got, want, rtol=2e-2, atol=2e-2 * np.abs(want).max())
    eager = out.clone()
    out.fill_(float("nan"))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        built(x, w1, w3, out, m, n, k, grid=grid)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, eager)
