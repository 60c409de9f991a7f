"""L1 for the Blackwell attention forward's tensor memory: which TMEM lanes and columns hold S, P and O.

The rendered sm_100a kernel is read for the addresses and loops its MMAs, loads and stores use (the S = Q·Kᵀ MMA's D
address, the softmax's S loads and P stores, the pack of two probabilities into one register, the P·V MMAs' A and D
addresses, the O loads), and those are run on the independent TMEM model (``ptxgen.model.layouts.tmemmodel``, from
the PTX ISA and CuTe's sm100 traits) with tagged elements: every softmax thread must read its own query row of S, and
every P·V K-step must read exactly P[:, 16 j : 16 j + 16] of the rows and keys that thread wrote. Controls mutate the
rendered source and must fail."""

from __future__ import annotations

import re

import pytest

from ptxgen.attention.plan_sm100 import plan_attention_sm100
from ptxgen.attention.render import kernel
from ptxgen.attention.spec import AttentionSpec
from ptxgen.isa.types import Arch, DType
from ptxgen.model.layouts import tmemmodel as tm

SPECS = [AttentionSpec(64, 128, 128, False, arch=Arch.SM100A), AttentionSpec(128, 128, 128, True, arch=Arch.SM100A),
         AttentionSpec(64, 128, 64, True, DType.F16, arch=Arch.SM100A), AttentionSpec(256, 128, 64, True, arch=Arch.SM100A)]


def _source(spec: AttentionSpec) -> str:
    return kernel(plan_attention_sm100(spec)).render()


def _c_int(expr: str, **names) -> int:
    """A rendered C integer expression of unsigned literals, shifts, + and * (the names bound), evaluated."""
    py = re.sub(r"\(unsigned\)", "", expr)
    py = re.sub(r"\b(\d+)u\b", r"\1", py)
    if not re.fullmatch(r"[\w\s()+*<>/]*", py):
        raise ValueError(f"not a simple C integer expression: {expr!r}")
    return int(eval(py.replace("/", "//"), {}, names))  # noqa: S307 - digits, names, + * << // only


def _one(pattern: str, src: str, what: str) -> re.Match:
    found = list(re.finditer(pattern, src, re.S))
    assert len(found) == 1, f"{what}: {len(found)} matches of {pattern!r}"
    return found[0]


def _read_kernel(src: str) -> dict:
    """The numbers the TMEM model needs, read from the rendered source (each pattern must match exactly once)."""
    k = {}
    k["ld_num"] = int(_one(r"tcgen05\.ld\.sync\.aligned\.32x32b\.x(\d+)\.b32", src, "tmem_ld_chunk's shape").group(1))
    # tmem_st_chunk: one overload per chunk size (tmem_st_fn); the P stores pass pk, whose size picks one
    st_nums = {int(n): int(x) for n, x in re.findall(r"void tmem_st_chunk\(unsigned taddr, const unsigned \(&r\)\[(\d+)\]\) \{\s*"
                                                       r"asm volatile\(\"tcgen05\.st\.sync\.aligned\.32x32b\.x(\d+)\.b32", src)}
    k["lane_addr"] = _one(r"const unsigned lane_addr = tmem \+ (.+?);\n", src, "lane_addr").group(1)
    s_ds = {int(x) for x in re.findall(r"mma_ss\(tmem \+ (\d+)u,", src)}
    assert len(s_ds) == 1, s_ds
    k["s_d"] = s_ds.pop()
    k["ts"] = [(int(d), int(a)) for d, a in re.findall(r"mma_ts\(tmem \+ (\d+)u, tmem \+ (\d+)u,", src)]
    m = _one(r"for \(int c = 0; c < (\d+); \+\+c\) \{\s*unsigned r\[32\];\s*tmem_ld_chunk\(lane_addr \+ (\d+)u \+ (\d+)u \* c, "
             r"r\);\s*tmem_ld_wait\(r\);\s*(?:#pragma unroll\s*)?for \(int i = 0; i < (\d+); \+\+i\) srow\[(\d+) \* c \+ i\] = "
             r"__uint_as_float\(r\[i\]\);", src, "the S loads")
    k["s_chunks"], k["s_base"], k["s_step"], k["s_inner"], k["s_stride"] = map(int, m.groups())
    m = _one(r"for \(int c = 0; c < (\d+); \+\+c\) \{\s*unsigned pk\[(\d+)\];\s*(?:#pragma unroll\s*)?for \(int i = 0; i < "
             r"(\d+); \+\+i\) \{\s*const float lo = ex2_approx\(fmaf\(srow\[([^\]]+)\], scale_log2, -max_scaled\)\);\s*"
             r"const float hi = ex2_approx\(fmaf\(srow\[([^\]]+)\], scale_log2, -max_scaled\)\);.*?"
             r"pk\[i\] = (pack_b?f16x2)\((\w+), (\w+)\);\s*\}\s*tmem_st_chunk\(lane_addr \+ (\d+)u \+ (\d+)u \* c, pk\);", src,
             "the P stores")
    (k["p_chunks"], k["p_regs"], k["p_inner"], k["lo_index"], k["hi_index"], pack, k["pack_arg0"], k["pack_arg1"], k["p_base"],
     k["p_step"]) = m.groups()
    for key in ("p_chunks", "p_regs", "p_inner", "p_base", "p_step"):
        k[key] = int(k[key])
    k["st16_num"] = st_nums[k["p_regs"]]  # the shape of the store that takes pk
    m = _one(rf"unsigned {pack}\(float (\w+), float (\w+)\) \{{\s*unsigned r;\s*asm\(\"cvt\.rn\.b?f16x2\.f32 %0, %1, %2;\" : "
             r"\"=r\"\(r\) : \"f\"\((\w+)\), \"f\"\((\w+)\)\);", src, "the pack")
    k["pack_params"], k["cvt_ab"] = (m.group(1), m.group(2)), (m.group(3), m.group(4))
    k["o_loads"] = {int(x) for x in re.findall(r"tmem_ld_chunk\(lane_addr \+ (\d+)u \+ 32u \* c, r\)", src)} - {k["s_base"]}
    k["row0"] = "const int row0 = m_block * 128 + threadIdx.x;" in src
    return k


def _run(spec: AttentionSpec, src: str) -> None:
    """The S -> softmax -> P -> P·V path and the O loads on the TMEM model; AssertionError where an element is not where
    the next reader looks."""
    k = _read_kernel(src)
    bn, d = spec.bn, spec.head_dim
    t = tm.Tmem()
    t.mma_write_d(k["s_d"], [[("S", m, n) for n in range(bn)] for m in range(128)])  # S = Q·Kᵀ, lane 0 + column
    assert k["row0"], "each softmax thread owns query row threadIdx.x"
    srow = {}
    for w in range(4):
        lane_base = _c_int(k["lane_addr"], warp=w)
        for c in range(k["s_chunks"]):
            regs = t.ld_32x32b(w, lane_base + k["s_base"] + k["s_step"] * c, k["ld_num"])
            for lane in range(32):
                for i in range(k["s_inner"]):
                    srow.setdefault(32 * w + lane, {})[k["s_stride"] * c + i] = regs[lane][i]
    # explicit raises below, not bare asserts: pytest's diff of two 128 x 16 tables on a control's failure takes minutes
    for row, values in srow.items():  # thread 32 w + t = threadIdx.x holds S's row threadIdx.x, every key once
        if values != {n: ("S", row, n) for n in range(bn)}:
            raise AssertionError(f"softmax row {row} reads {sorted(values.items())[:3]}...")
    lo_name, hi_name = k["pack_params"]
    for w in range(4):
        lane_base = _c_int(k["lane_addr"], warp=w)
        for c in range(k["p_chunks"]):
            regs = []
            for lane in range(32):
                row = srow[32 * w + lane]
                pk = [None] * k["p_regs"]
                for i in range(k["p_inner"]):
                    values = {"lo": row[_c_int(k["lo_index"], c=c, i=i)], "hi": row[_c_int(k["hi_index"], c=c, i=i)]}
                    p = {name: ("P",) + v[1:] for name, v in values.items()}  # exp2 of S: P keeps S's (row, key)
                    args = {lo_name: p[k["pack_arg0"]], hi_name: p[k["pack_arg1"]]}  # pack_bf16x2(lo, hi)'s parameters
                    pk[i] = tm.cvt_bf16x2(args[k["cvt_ab"][0]], args[k["cvt_ab"][1]])
                regs.append(pk[:k["st16_num"]])
            t.st_32x32b(w, lane_base + k["p_base"] + k["p_step"] * c, regs)
    o_cols = {dd for dd, _ in k["ts"]}
    assert len(o_cols) == 1 and len(k["ts"]) == bn // 16, k["ts"]
    for j, (_, a_col) in enumerate(k["ts"]):  # K-step j of O += P·V reads P[:, 16 j .. 16 j + 15]
        a = t.mma_read_a16(a_col)
        want = [[("P", m, 16 * j + kk) for kk in range(16)] for m in range(128)]
        if a != want:
            bad = next(m for m in range(128) if a[m] != want[m])
            raise AssertionError(f"P·V K-step {j} reads {a[bad][:4]} in row {bad}, wants {want[bad][:4]}")
    o_col = o_cols.pop()
    assert k["o_loads"] == {o_col}, (k["o_loads"], o_col)  # the rescale and the output read O where P·V writes it
    t.mma_write_d(o_col, [[("O", m, n) for n in range(d)] for m in range(128)])
    for w in range(4):
        lane_base = _c_int(k["lane_addr"], warp=w)
        for c in range(d // 32):
            regs = t.ld_32x32b(w, lane_base + o_col + 32 * c, k["ld_num"])
            if any(regs[lane][i] != ("O", 32 * w + lane, 32 * c + i) for lane in range(32) for i in range(32)):
                raise AssertionError(f"warp {w} reads O chunk {c} from the wrong cells")


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.kernel_name)
def test_s_p_and_o_are_where_each_reader_looks(spec):
    """Every softmax thread reads its own row of S (lane = threadIdx.x, register j = key 32 c + j), packs keys 2i and
    2i + 1 into one register (the even key in the lower half) and stores them where each P·V K-step reads A (16 keys
    of every row, eight columns); O is loaded where P·V accumulates it."""
    _run(spec, _source(spec))


MUTATIONS = {  # name: (rendered text, its mutation, what the model reports)
    "pack operands swapped": ('"f"(hi), "f"(lo)', '"f"(lo), "f"(hi)', "P·V K-step 0 reads"),
    "P stores 8 columns apart": ("u + 16u * c, pk);", "u + 8u * c, pk);", "P·V K-step|read before it was written"),
    "lane offset of 16 lanes a warp": ("(unsigned)(32u * warp)", "(unsigned)(16u * warp)", "may access lanes"),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_control_a_mutated_kernel_fails(name):
    spec = SPECS[1]
    src = _source(spec)
    old, new, report = MUTATIONS[name]
    assert old in src
    with pytest.raises(AssertionError, match=report):  # the model's finding, not a pattern that stopped matching
        _run(spec, src.replace(old, new))


def test_control_a_p_v_step_one_column_late_fails():
    spec = SPECS[1]
    src = _source(spec)
    _, a1 = _read_kernel(src)["ts"][1]
    bad = src.replace(f"tmem + {a1}u,", f"tmem + {a1 + 1}u,", 1)
    assert bad != src
    with pytest.raises(AssertionError, match="P·V K-step 1 reads"):
        _run(spec, bad)


def test_model_facts():
    """The model's own rules, checked by hand: the address split, the warp's lane quarter, cvt's halves."""
    assert tm.split((96 << 16) | 300) == (96, 300)
    assert [tm.warp_lane_quarter(w) for w in range(8)] == [0, 32, 64, 96, 0, 32, 64, 96]
    assert tm.cvt_bf16x2("a", "b") == ("b", "a")
    t = tm.Tmem()
    for m in range(8):
        for c in range(4):
            t.put(m, 10 + c, (("lo", m, c), ("hi", m, c)))
    a = t.mma_read_a16(10, rows=8, k=8)  # A at column 10: k = 2c in the lower half of column 10 + c, 2c + 1 upper
    assert a[5][6:8] == [("lo", 5, 3), ("hi", 5, 3)] and a[0][0] == ("lo", 0, 0)
    with pytest.raises(AssertionError):
        t.ld_32x32b(1, 0, 1)  # warp 1 may not address lane 0
    with pytest.raises(AssertionError):
        t.get(0, 0)  # never written
