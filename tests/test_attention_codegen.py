"""L2: the attention kernel renders, compiles for sm_90a with NVRTC and passes its SASS gate (no GPU needed)."""

import re

import pytest

from ptxgen.attention.build import build, check_attention_sass
from ptxgen.attention.plan import (m_block_expr, n_block_end, n_block_end_expr, needs_mask, needs_mask_expr, plan_attention,
                                   tile_exprs, tile_of)
from ptxgen.attention.render import render
from ptxgen.attention.spec import AttentionSpec
from ptxgen.isa.types import Arch, DType, SpecError
from ptxgen.runtime.compile.cache import sass_dumps

SPECS = [
    AttentionSpec(64, 128, 128, False, schedule="serial"),
    AttentionSpec(128, 128, 128, True, schedule="serial"),
    AttentionSpec(128, 64, 128, False, schedule="overlap"),
    AttentionSpec(128, 128, 128, True, DType.F16, schedule="overlap"),
    AttentionSpec(64, 128, 128, False, schedule="pingpong"),
    AttentionSpec(64, 128, 128, True, DType.F16, schedule="pingpong"),
    AttentionSpec(128, 128, 128, False, schedule="pingpong"),
    AttentionSpec(128, 128, 128, True, schedule="pingpong"),
    # D 256 (BN 64: FA3's head-dim-256 tile with 64 keys for its 80), each schedule, BM 64 with three stages, the walk
    AttentionSpec(256, 128, 64, True, schedule="serial"),
    AttentionSpec(256, 128, 64, False, DType.F16, schedule="overlap"),
    AttentionSpec(256, 128, 64, True, schedule="pingpong", persistent=True),
    AttentionSpec(256, 64, 64, False, stages=3, schedule="overlap"),
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.kernel_name)
def test_compiles_and_passes_the_sass_gate(spec):
    b = build(spec)
    rep = b.sass_report()
    assert rep.ok, rep.problems
    assert rep.local_bytes == 0 and rep.stack_bytes == 0
    assert rep.pv_from_registers == rep.pv_mmas == rep.pv_transposed > 0


def test_sass_gate_control_fails():
    """The gate on real SASS with one P·V HGMMA dropped, or one turned into a descriptor-A form, must refuse it."""
    spec = AttentionSpec(128, 128, 128, False, schedule="overlap")
    b = build(spec)
    sass, res = sass_dumps(b.cache_result)
    lines = sass.splitlines()
    pv = [i for i, l in enumerate(lines) if re.search(r"HGMMA.*tnspB", l)]
    dropped = "\n".join(l for i, l in enumerate(lines) if i != pv[3])
    assert not check_attention_sass(b.plan, dropped, res).ok
    swapped = "\n".join(re.sub(r"R\d+, gdesc\[(\w+)\]\.tnspB", r"gdesc[\1], gdesc[\1].tnspB", l) if i == pv[0] else l
                        for i, l in enumerate(lines))
    assert not check_attention_sass(b.plan, swapped, res).ok
    local = sass.replace("BAR.SYNC.DEFER_BLOCKING 0x0", "STL [R1], R0", 1)
    assert not check_attention_sass(b.plan, local, res).ok


def test_kernel_takes_the_planned_descriptors():
    """Every K-step descriptor of the plan appears in the source as the constant its wgmma adds the stage address to."""
    plan = plan_attention(AttentionSpec(128, 128, 128, True, schedule="pingpong"))
    src = render(plan)
    for d in plan.v.descriptors + plan.k.descriptors:
        assert f"{d:#018x}ull + " in src
    assert ".m64n128k16.f32.bf16.bf16" in src and ", 1, 1, 1, 1;" in src  # P·V: imm-trans-b = 1 (V MN-major)


def _c_eval(expr: str, **values) -> int:
    """Evaluate one of the plan's C expressions with C's integer semantics for the non-negative values used here."""
    py = expr.replace("||", " or ").replace("static_cast<int>", "int").replace("/", "//")
    return eval(py, {"min": min, "int": int}, values)  # noqa: S307 - our own three expressions


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("bm,bn", [(64, 64), (128, 128), (128, 192), (192, 128)])
def test_c_expressions_agree_with_the_plan(causal, bm, bn):
    for sk in (1, 7, 128, 129, 1000):
        nb = -(-sk // bn)
        for m in range(0, 12):
            assert _c_eval(n_block_end_expr(bm, bn, causal), n_blocks=nb, m_block=m) == n_block_end(m, bm, bn, sk, causal)
            for n in range(nb):
                assert bool(_c_eval(needs_mask_expr(bm, bn, causal), n_block=n, m_block=m, seqlen_k=sk)) == \
                    needs_mask(m, n, bm, bn, sk, causal)
    grid = 5
    got = [_c_eval(m_block_expr(causal).replace("gridDim.x", "g").replace("blockIdx.x", "b"), g=grid, b=b) for b in range(grid)]
    assert sorted(got) == list(range(grid))


@pytest.mark.parametrize("causal", [False, True])
def test_persistent_walk_visits_every_tile_once(causal):
    """Every (query block, head, batch) tile exactly once, for small grids exhaustively; the C the template reads
    agrees with tile_of; a head's query blocks are consecutive tiles, the longest first when causal."""
    for m_blocks in range(1, 5):
        for heads in range(1, 4):
            for batch in range(1, 4):
                n = m_blocks * heads * batch
                got = [tile_of(t, m_blocks, heads, batch, causal) for t in range(n)]
                assert sorted(got) == [(m, h, b) for m in range(m_blocks) for h in range(heads) for b in range(batch)]
                for t, want in enumerate(got):
                    vals = dict(tile=t, m_blocks=m_blocks, heads=heads, batch=batch)
                    assert tuple(_c_eval(tile_exprs(causal)[x], **vals) for x in ("m_block", "head", "batch")) == want
                for hb in range(heads * batch):
                    ms = [m for m, h, b in got[hb * m_blocks:(hb + 1) * m_blocks]]
                    assert ms == (list(range(m_blocks - 1, -1, -1)) if causal else list(range(m_blocks)))
                    assert len({(h, b) for _, h, b in got[hb * m_blocks:(hb + 1) * m_blocks]}) == 1


@pytest.mark.parametrize("causal", [False, True])
def test_each_cta_walks_its_rounds_and_every_tile_is_taken_once(causal):
    """walk_tile over every CTA and round covers tiles 0..n-1 once each (small grids and counts exhaustively); a CTA's
    tiles grow from round to round (the kernel stops at the first past the end); the template's C agrees."""
    from ptxgen.attention.plan import walk_exprs, walk_tile

    for grid in range(1, 9):
        for n in range(0, 3 * grid + 2):
            seen = []
            for cta in range(grid):
                r, mine = 0, []
                while (t := walk_tile(r, cta, grid, causal)) < n:
                    mine.append(t)
                    c_tile = _c_eval(walk_exprs(causal)["tile"].replace("gridDim.x", "g").replace("blockIdx.x", "b"),
                                     tcount=r, g=grid, b=cta)
                    c_next = _c_eval(walk_exprs(causal)["next"].replace("gridDim.x", "g").replace("blockIdx.x", "b"),
                                     tcount=r, g=grid, b=cta)
                    assert (c_tile, c_next) == (t, walk_tile(r + 1, cta, grid, causal))
                    r += 1
                assert mine == sorted(mine) and walk_tile(r + 1, cta, grid, causal) >= n
                seen += mine
            assert sorted(seen) == list(range(n))


def test_causal_walk_balances_the_ctas_where_striding_did_not():
    """Causal tiles of a head run longest first (lengths m_blocks .. 1 key blocks of BM/BN each); 132 CTAs. The walk
    reverses every other round: the busiest CTA within 12% of the mean at B·S = 16k from 300 to 4096 keys (D 128: BM
    128, heads·D 2048; D 64: BM 192). Control: plain striding (the non-causal walk) over the same lengths gives one
    length per CTA at seqlen 512 (4 blocks, 132 a multiple of 4): 1.47."""
    from ptxgen.attention.plan import walk_balance

    def lengths(seqlen, bm, heads):
        m_blocks = -(-seqlen // bm)
        return [min(seqlen, (m + 1) * bm) / 128 for _ in range(heads) for m in range(m_blocks - 1, -1, -1)]

    for seqlen, d, bm in ((300, 128, 128), (512, 128, 128), (1000, 128, 128), (2048, 128, 128), (4096, 128, 128),
                          (512, 64, 192), (2048, 64, 192)):
        heads = 16384 // seqlen * 2048 // d
        assert walk_balance(lengths(seqlen, bm, heads), 132, True) <= 1.12, (seqlen, d)
    assert walk_balance(lengths(512, 128, 512), 132, False) > 1.4


def test_persistent_walk_control_a_wrong_order_is_caught():
    """Control: the non-causal walk read for a causal one visits a head's short query blocks first."""
    ms = [tile_of(t, 3, 2, 1, False)[0] for t in range(3)]
    assert ms != sorted(ms, reverse=True)


@pytest.mark.parametrize("kw,flag", [
    (dict(head_dim=96), "--head-dim"), (dict(head_dim=64, bm=256), "--bm"), (dict(head_dim=64, bn=96), "--bn"),
    (dict(head_dim=128, bm=192), "--bn"), (dict(head_dim=64, bm=192, bn=192), "--bn"), (dict(head_dim=64, dtype=DType.E4M3), "--dtype"),
    (dict(head_dim=64, bm=192, schedule="pingpong"), "--schedule"), (dict(head_dim=64, arch=Arch.SM100A, persistent=True), "--persistent"),
    (dict(head_dim=64, bm=64, arch=Arch.SM100A), "--bm"), (dict(head_dim=64, arch=Arch.SM100A, schedule="overlap"), "--schedule"), (dict(head_dim=64, bm=64, schedule="pingpong"), "--schedule"),
    (dict(head_dim=64, schedule="fast"), "--schedule"), (dict(head_dim=128, stages=4), "--stages"),
    (dict(head_dim=256, bn=128), "--bn"), (dict(head_dim=256, bm=192, bn=64), "--bm"),
    (dict(head_dim=256, bn=64, stages=3), "--stages"),
    (dict(head_dim=256, bm=64, bn=64, stages=4), "--stages"), (dict(head_dim=256, bn=192, arch=Arch.SM100A), "--bn"),
    (dict(head_dim=256, bn=128, arch=Arch.SM100A), "--bn"), (dict(head_dim=512, bn=64), "--head-dim"),
])
def test_illegal_specs_are_refused_naming_the_flag(kw, flag):
    with pytest.raises(SpecError) as e:
        AttentionSpec(**kw)
    assert str(e.value).startswith(flag + "=")


# D 256's refusals, each naming its rule and the legal values that pass every budget. sm_90a: S BN/2 + O D/2 + P BN/4 +
# 32 registers per consumer thread within setmaxnreg's 240 (two or one consumer warpgroups) or 160 (three); Q
# BM x D and per stage K and V BN x D, 2 bytes each, plus 2 KB within 227 KB. sm_100a: S BN + O D + P BN/2 columns
# within tensor memory's 512.
D256_REFUSALS = [
    (dict(bn=128), "--bn=128", ["about 256 registers", "budget of 240"], "Legal: 64"),
    (dict(bm=64, bn=192), "--bn=192", ["about 304 registers", "budget of 240"], "Legal: 64"),
    (dict(bm=192, bn=64), "--bm=192", ["about 208 registers", "budget of 160", "at any --bn"], "Legal: 64, 128"),
    (dict(bn=64, stages=3), "--stages=3", ["264192 B", "232448 B"], "Legal: 2"),
    (dict(bm=64, bn=64, stages=4), "--stages=4", ["296960 B"], "Legal: 2, 3"),
    (dict(bn=192, arch=Arch.SM100A), "--bn=192", ["544 32-bit tensor-memory columns", "512"], "Legal: 64"),
    (dict(bn=128, arch=Arch.SM100A), "--bn=128", ["329728 B", "even with 2 stages"], "Legal: 64"),
]


@pytest.mark.parametrize("kw,head,words,legal", D256_REFUSALS)
def test_head_dim_256_refusals_name_the_rule(kw, head, words, legal):
    with pytest.raises(SpecError) as e:
        AttentionSpec(256, **kw)
    msg = str(e.value)
    assert msg.startswith(head + " is illegal: ") and msg.endswith(legal), msg
    for w in words:
        assert w in msg, (w, msg)


def test_head_dim_256_legal_tiles():
    """Exactly these D 256 tiles are legal (each dtype, causal or not; the walk on sm_90a): BM 128 x BN 64 with two
    stages in every schedule, BM 64 x BN 64 with two or three stages (no ping-pong: one warpgroup), and the tcgen05
    form at BN 64. The budgets by hand: 208 registers at BN 64 (<= 240), 256 at BN 128; shared memory 198656 B at
    BM 128 with two stages, 231424 B at BM 64 with three (<= 232448)."""
    from itertools import product

    legal = set()
    for bm, bn, st, sch, arch in product((64, 128, 192), (64, 128, 192), (2, 3, 4), ("serial", "overlap", "pingpong"),
                                         (Arch.SM90A, Arch.SM100A)):
        try:
            AttentionSpec(256, bm, bn, True, DType.F16, arch, st, sch)
        except SpecError:
            continue
        legal.add((bm, bn, st, sch, arch.value))
    assert legal == {(128, 64, 2, s, "sm_90a") for s in ("serial", "overlap", "pingpong")} | \
        {(64, 64, st, s, "sm_90a") for st in (2, 3) for s in ("serial", "overlap")} | {(128, 64, 2, "serial", "sm_100a")}
    assert AttentionSpec(256, 128, 64, persistent=True).persistent


SM100_SPECS = [AttentionSpec(64, 128, 128, False, arch=Arch.SM100A), AttentionSpec(128, 128, 128, True, arch=Arch.SM100A),
               AttentionSpec(64, 128, 64, True, DType.F16, arch=Arch.SM100A), AttentionSpec(256, 128, 64, True, arch=Arch.SM100A)]


@pytest.mark.parametrize("spec", SM100_SPECS, ids=lambda s: s.kernel_name)
def test_tcgen05_form_compiles_and_passes_its_gate(spec):
    """L2 only: NVRTC for sm_100a; D/16 UTCHMMA reading A through a descriptor and BN/16 reading A from TMEM, all in
    the key-block loop; LDTM, STTM, three commits; no local memory."""
    rep = build(spec).sass_report()
    assert rep.ok, rep.problems
    assert (rep.qk_mmas, rep.pv_mmas) == (spec.head_dim // 16, spec.bn // 16)


def test_tcgen05_gate_control_fails():
    from ptxgen.attention.build import check_attention_sass_sm100

    b = build(SM100_SPECS[1])
    sass, res = sass_dumps(b.cache_result)
    first_ts = next(l for l in sass.splitlines() if re.search(r"UTCHMMA\s+tmem", l))
    assert not check_attention_sass_sm100(b.plan, sass.replace(first_ts, "", 1), res).ok


@pytest.mark.parametrize("bn,d", [(64, 64), (128, 64), (128, 128), (64, 128), (64, 256)])
def test_tmem_column_plan(bn, d):
    """S, O and P's columns are disjoint and inside the allocation (a power of two in 32..512); P·V's K-step j reads
    P's columns p + 8j .. p + 8j + 7 (16 16-bit elements of each lane's row, two a column), which together are
    exactly the BN/2 columns the softmax writes."""
    from ptxgen.attention.plan_sm100 import plan_attention_sm100

    t = plan_attention_sm100(AttentionSpec(d, 128, bn, arch=Arch.SM100A)).tmem
    s_col, o_col, p_col = t.column("S"), t.column("O"), t.column("P")
    spans = [(s_col, s_col + bn), (o_col, o_col + d), (p_col, p_col + bn // 2)]
    cols = [c for a, b in spans for c in range(a, b)]
    assert len(cols) == len(set(cols)) and max(cols) < t.alloc_columns
    assert t.alloc_columns in (32, 64, 128, 256, 512)
    read = sorted(p_col + 8 * j + c for j in range(bn // 16) for c in range(8))
    assert read == list(range(p_col, p_col + bn // 2))


def _legal_d256_specs():
    from itertools import product

    out = []
    for bm, st, sch, arch, causal, dt, walk in product((64, 128), (2, 3), ("serial", "overlap", "pingpong"),
                                                       (Arch.SM90A, Arch.SM100A), (False, True), (DType.BF16, DType.F16),
                                                       (False, True)):
        try:
            out.append(AttentionSpec(256, bm, 64, causal, dt, arch, st, sch, walk))
        except SpecError:
            pass
    return out


@pytest.mark.slow
def test_every_legal_head_dim_256_kernel_passes_the_sass_gate():
    """The SASS gate is the final word on the register estimate: every legal D 256 spec (60: sm_90a's seven tiles and
    schedules x causal x dtype x walk, sm_100a's BN 64 x causal x dtype) compiles with no local memory."""
    specs = _legal_d256_specs()
    assert len(specs) == 60
    bad = {s.kernel_name: build(s).sass_report().problems for s in specs}
    assert not {k: v for k, v in bad.items() if v}
