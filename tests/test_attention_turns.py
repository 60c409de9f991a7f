"""The ping-pong turns of the attention kernel (L1): the policy the rendered kernel implements, replayed by
ptxgen.model.sim.turnmodel over a persistent CTA's tiles: both warpgroups finish, their turns alternate across tile
boundaries, and no named barrier is left half-arrived at exit. Controls: the mixed policies deadlock or leave an arrival
pending."""

import re

import pytest

from ptxgen.attention.plan import plan_attention
from ptxgen.attention.render import render
from ptxgen.attention.spec import AttentionSpec
from ptxgen.model.sim.turnmodel import replay

TILES = [[4, 4, 4], [1], [3, 1, 2, 5], [2] * 7]  # key blocks per tile of one CTA (causal walks vary them)


def policy(src: str) -> tuple[str, str]:
    """(head_start, last_arrive) of the rendered kernel, read from its two turn statements."""
    head = re.search(r"if \(c == 1( && tcount == 0)?\) named_barrier_arrive\(1, 256\);", src)
    assert head, "no head start for warpgroup 0"
    both = re.search(r"if \(c == 0 \|\| \(tcount \+ 1\) \* static_cast<int>\(gridDim\.x\) .*? < m_blocks \* heads \* batch\) "
                     r"named_barrier_arrive\(2 - c, 256\);", src)
    only0 = re.search(r"if \(c == 0\) named_barrier_arrive\(2, 256\);", src)
    assert bool(both) != bool(only0), "exactly one form of the last turn"
    return ("first tile" if head.group(1) else "every tile"), ("both unless last tile" if both else "warpgroup 0 only")


def _src(persistent: bool, causal: bool = False) -> str:
    return render(plan_attention(AttentionSpec(128, 128, 128, causal=causal, schedule="pingpong", persistent=persistent)))


@pytest.mark.parametrize("causal", [False, True])
def test_the_persistent_kernel_runs_its_turns_on_across_tiles(causal):
    pol = policy(_src(True, causal))
    assert pol == ("first tile", "both unless last tile")
    for blocks in TILES:
        r = replay(blocks, *pol)
        assert r.finished and not r.pending, (blocks, r)
        assert [c for c, _, _ in r.order] == [0, 1] * (len(r.order) // 2)  # strict alternation, tiles included
        assert len(r.order) == 2 * sum(n + 1 for n in blocks)


def test_the_one_tile_kernel_keeps_the_per_tile_form():
    pol = policy(_src(False))
    assert pol == ("every tile", "warpgroup 0 only")
    r = replay([4], *pol)
    assert r.finished and not r.pending


def test_controls_the_mixed_policies_fail_on_two_tiles():
    stuck = replay([4, 4], "first tile", "warpgroup 0 only")  # no head start for the second tile
    assert not stuck.finished and "(1, 0)" in stuck.deadlock
    dangling = replay([4, 4], "every tile", "both unless last tile")  # one arrival too many per boundary
    assert dangling.finished and dangling.pending
    assert dangling.pending == {1: 128}
    with pytest.raises(ValueError):
        replay([1], "never", "warpgroup 0 only")


@pytest.mark.parametrize("causal", [False, True])
def test_the_carried_kernel_keeps_strict_turns_with_one_fewer_a_tile(causal):
    """The carried form (the next tile's first S in a tile's last turn): the rendered policy is the persistent one,
    its turns are n + 1 for the first tile and n after; both warpgroups finish in strict alternation, nothing pending."""
    src = render(plan_attention(AttentionSpec(128, 128, 128, causal=causal, schedule="pingpong", persistent=True,
                                              q_buffers=2, carry=True)))
    pol = policy(src)
    assert pol == ("first tile", "both unless last tile")
    assert src.count("named_barrier_sync(1 + c, 256)") == 3  # three issue sites: the first S, the loop, the carried turn
    for blocks in TILES:
        r = replay(blocks, *pol, carry=True)
        assert r.finished and not r.pending, (blocks, r)
        assert [c for c, _, _ in r.order] == [0, 1] * (len(r.order) // 2)
        assert len(r.order) == 2 * (sum(blocks) + 1)

