"""The staged O store of the persistent attention kernel (L1): O written into the tile's own Q buffer in Q's layout and
read back a 16-byte cell at a time. The two shared-memory address expressions are read from the rendered kernel and
evaluated for every thread; an independent transcription of Q's layout (K-major, 128-byte swizzle boxes of 64 columns
side by side, PTX ISA 'tensor-copy swizzle modes': 16-byte chunk c of row r at chunk c ^ (r % 8)) says where each
cell must be. Checked: every element read back is the one written for that row and column, each warpgroup stays in
its own 64-row slab and writes each byte once, no bank conflicts on either side. Controls: the layout without its
swizzle conflicts; a read with rows and cells swapped misplaces. Also the spec's refusal."""

import re

import pytest

from ptxgen.attention.plan import plan_attention
from ptxgen.attention.render import render
from ptxgen.attention.spec import AttentionSpec
from ptxgen.author import SpecError

SPECS = [AttentionSpec(128, 128, 128, schedule="pingpong", persistent=True, q_buffers=2, o_staging=True),
         AttentionSpec(128, 128, 128, True, schedule="pingpong", persistent=True, q_buffers=2, o_staging=True),
         AttentionSpec(64, 192, 128, schedule="overlap", persistent=True, q_buffers=2, o_staging=True),
         AttentionSpec(64, 128, 128, True, stages=3, schedule="pingpong", persistent=True, q_buffers=2, o_staging=True)]


def _fn(expr: str, names: str):
    py = re.sub(r"(\d+)u\b", r"\1", expr).replace("/", "//")
    return eval(f"lambda {names}: {py}")  # noqa: S307 - the expression comes from our own rendered kernel


def exprs(src: str):
    w = re.search(r"st_shared_u32\(ostage \+ (.+) \+ 4u \* \(lane % 4\), pack_b?f16x2", src)
    r = re.search(r"ld_shared_v4\(ostage \+ (.+)\);\n", src)
    col = re.search(r"o_ss \+ (\d+) \* \(i % (\d+)\)\) = cell;", src)
    chunks = re.search(r"for \(int j = 0; j < (\d+); \+\+j\)", src)
    assert w and r and col and chunks
    return (_fn(w.group(1), "c, warp, lane, r, g"), _fn(r.group(1), "c, i"), int(col.group(1)), int(col.group(2)),
            int(chunks.group(1)))


def q_layout(bm: int, row: int, cell: int) -> int:
    """Independent: where TMA put 16-byte cell ``cell`` of Q row ``row`` (boxes of 64 two-byte columns, BM rows each)."""
    return (cell // 8) * bm * 128 + row * 128 + ((cell % 8) ^ (row % 8)) * 16


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.kernel_name)
def test_every_cell_read_back_is_the_one_written_in_its_own_slab(spec):
    write, read, elems, cells, chunks = exprs(render(plan_attention(spec)))
    assert cells == spec.head_dim // 8 and elems == 8 and chunks * 128 == 64 * cells
    slab_bytes = {}
    for c in range(spec.consumers):
        written = {}
        for warp in range(4):
            for lane in range(32):
                for r in range(2):
                    for g in range(cells):
                        row = 64 * c + 16 * warp + lane // 4 + 8 * r
                        at = write(c, warp, lane, r, g)
                        assert at == q_layout(spec.bm, row, g)  # Q's layout, the cell TMA filled with Q row `row`
                        for b in range(4):
                            assert at + 4 * (lane % 4) + b not in written  # each byte once
                            written[at + 4 * (lane % 4) + b] = (row, 8 * g + 2 * (lane % 4) + b // 2)
        slab_bytes[c] = set(written)
        assert len(written) == 64 * spec.head_dim * 2
        for t in range(128):
            for j in range(chunks):
                i = t + 128 * j
                at = read(c, i)
                row, col0 = 64 * c + i // cells, elems * (i % cells)
                assert [written[at + 2 * e] for e in range(8)] == [(row, col0 + e) for e in range(8)]
    for a in range(spec.consumers):
        for b in range(a):
            assert not slab_bytes[a] & slab_bytes[b]  # the warpgroups' slabs do not meet


def _banks_distinct(addrs, width):
    return len({(a // width) % (128 // width) for a in addrs}) == len(addrs)


@pytest.mark.parametrize("spec", SPECS[:1] + SPECS[2:3], ids=lambda s: s.kernel_name)
def test_no_bank_conflicts(spec):
    write, read, _, cells, chunks = exprs(render(plan_attention(spec)))
    for c in range(spec.consumers):
        for warp in range(4):
            for r in range(2):
                for g in range(cells):  # one st.shared.u32 per lane: 32 words in 32 banks
                    assert _banks_distinct([write(c, warp, lane, r, g) + 4 * (lane % 4) for lane in range(32)], 4)
        for t0 in range(0, 128, 8):  # ld.shared.v4: eight lanes a phase, eight 16-byte bank groups
            for j in range(chunks):
                assert _banks_distinct([read(c, t + 128 * j) for t in range(t0, t0 + 8)], 16)


def test_control_without_the_swizzle_the_writes_conflict():
    spec = SPECS[0]
    plain = lambda c, warp, lane, r, g: (g // 8) * spec.bm * 128 + (64 * c + 16 * warp + lane // 4 + 8 * r) * 128 + (g % 8) * 16
    assert not all(_banks_distinct([plain(0, 0, lane, 0, g) + 4 * (lane % 4) for lane in range(32)], 4) for g in range(16))


def test_control_a_read_with_rows_and_cells_swapped_misplaces():
    spec = SPECS[0]
    write, read, _, cells, _ = exprs(render(plan_attention(spec)))
    swapped = lambda c, i: q_layout(spec.bm, 64 * c + i % 64, i // 64)
    assert any(swapped(0, i) != q_layout(spec.bm, i // cells, i % cells) for i in range(64 * cells))


def test_staging_needs_two_q_buffers():
    with pytest.raises(SpecError) as e:
        AttentionSpec(128, 128, 128, schedule="pingpong", persistent=True, o_staging=True)
    assert e.value.field == "--o-staging"
    src = render(plan_attention(SPECS[0]))
    # the buffer goes back to the producer only after the staged cells are read, not at the tile's last S
    assert src.count("mbar_arrive(Q_EMPTY(qb))") == 1 and src.index("mbar_arrive(Q_EMPTY(qb))") > src.index("= cell;")
