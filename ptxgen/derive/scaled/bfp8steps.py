"""Block FP8 on wgmma: the order of a consumer warpgroup's steps per K block, as the kernel runs them.

* ``overlap_steps``: issues, waits, promotions and releases of ``--fp8-overlap`` (none, halves, interleave);
* ``scale_steps``: the scale registers' loads, moves and promotions of ``--fp8-scale-load``;
* ``stagger_steps`` and ``stagger_commit_groups``: the named-barrier protocol of ``--fp8-stagger`` between the two
  consumer warpgroups, and the K-steps of each wgmma commit group of a K block.

ptxgen.derive.scaled.blockfp8's plan holds the choices and hands them here; ptxgen.model.numerics.bfp8model checks
each order against its own model (check_overlap, check_scale_steps, check_stagger)."""

from __future__ import annotations

from dataclasses import dataclass

from ...isa.types import SpecError


@dataclass(frozen=True)
class BarrierStep:
    """One named-barrier operation of the --fp8-stagger protocol (two barriers: 0 "warpgroup 0 has issued/completed K-tile
    it", 1 "warpgroup 1 has issued K-tile it"; each generation takes 128 threads of each warpgroup)."""

    wg: int  # the consumer warpgroup that executes it
    where: str  # before_issue | after_issue | after_wait (of every K-tile) | tail (once, after the CTA's tiles)
    op: str  # sync (wait for the generation) | arrive (count in, do not wait)
    barrier: int  # 0 or 1
    not_first: bool = False  # skipped at the CTA's first K-tile (before_issue) / when the CTA had none (tail)


@dataclass(frozen=True)
class OverlapStep:
    """issue (K block kb's MMAs of column half h into fragment h, then commit: one wgmma group; with n = 1 no commit
    before it: its MMAs join the previous issue's group, interleaved with them per K-step), wait (wait_group n:
    at most n of this warpgroup's groups still in flight), promote (acc += fragment h x scales of K block kb), release
    (the stage of K block kb goes back to the producer)."""

    op: str
    kb: int = 0
    half: int = 0
    n: int = 0


def overlap_steps(k_blocks: int, halves: int, interleave: bool = False) -> tuple[OverlapStep, ...]:
    """halves = 1: per K block issue, wait 0, release, promote. interleave (halves = 2): per K block both halves' MMAs
    in one group (half 1's K-steps alternated with half 0's), wait 0, release, promote half 0 and half 1. halves = 2, per K block kb: issue half 0, promote half 1
    of kb - 1 (complete since the last wait 0) while half 0 runs, issue half 1, wait 1 (half 0 complete), promote half
    0 while half 1 runs, wait 0, release kb; after the last block, promote its half 1. No wgmma group is in flight
    between K blocks (the loop's back edge): ptxas serializes every wgmma when a group is retired in a later loop
    iteration than it was issued in (C7514, NVRTC 13.5; tried with both halves and with one in flight there)."""
    S = OverlapStep
    if halves == 1:
        return tuple(x for kb in range(k_blocks) for x in (S("issue", kb), S("wait", n=0), S("release", kb), S("promote", kb)))
    if interleave:
        return tuple(x for kb in range(k_blocks) for x in (S("issue", kb, 0), S("issue", kb, 1, n=1), S("wait", n=0),
                                                          S("release", kb), S("promote", kb, 0), S("promote", kb, 1)))
    out: list[OverlapStep] = []
    for kb in range(k_blocks):
        out.append(S("issue", kb, 0))
        out += [S("promote", kb - 1, 1)] if kb else []
        out += [S("issue", kb, 1), S("wait", n=1), S("promote", kb, 0), S("wait", n=0), S("release", kb)]
    out += [S("promote", k_blocks - 1, 1)] if k_blocks else []
    return tuple(out)


@dataclass(frozen=True)
class ScaleStep:
    """One step of a consumer thread's scale registers over a tile (--fp8-scale-load): load (K block kb's scales from
    global memory into register set ``regs``), move (set ``regs`` := set ``src``), promote (K block kb's partial
    times the scales in set ``regs``). Sets: "cur" (what the promotion reads), "next" (loaded one K block ahead)."""

    op: str
    kb: int = 0
    regs: str = "cur"
    src: str = ""


def scale_steps(k_blocks: int, scale_load: str) -> tuple[ScaleStep, ...]:
    """block (and smem, where the load is an ld.shared of the landed stage): per K block kb, load kb into cur, (MMAs),
    promote kb. ahead: load block 0 into next before the loop (only
    when the tile has a K block); per kb: cur := next, load block min(kb + 1, k_blocks - 1) into next (the last block
    reloads itself rather than read past the scale arrays' K extent), (MMAs), promote kb with cur."""
    S = ScaleStep
    if scale_load in ("block", "smem", "cpasync", "tma"):
        return tuple(x for kb in range(k_blocks) for x in (S("load", kb), S("promote", kb)))
    out = [S("load", 0, "next")] if k_blocks else []
    for kb in range(k_blocks):
        out += [S("move", kb, "cur", "next"), S("load", min(kb + 1, k_blocks - 1), "next"), S("promote", kb)]
    return tuple(out)


STAGGER_WHERE = ("before_issue", "after_issue", "after_half", "after_wait", "tail")  # after_half: after wait_group 1 (half)


def stagger_steps(stagger: str) -> tuple[BarrierStep, ...]:
    """The protocol: warpgroup 1 issues K-tile it after warpgroup 0 has issued (issue), completed (complete) or completed
    the first half of (half) it; warpgroup 0 issues it + 1 after warpgroup 1 has issued (issue, complete) or completed
    the first half of (half) it; warpgroup 0 takes warpgroup 1's last arrival at the end. With half both warpgroups
    arrive after their wait_group 1 (stagger_commit_groups: the first of a K block's two commit groups is complete), so
    the two run about half a K block apart and neither waits for the other's promotion."""
    if stagger == "none":
        return ()
    signal0 = {"issue": "after_issue", "complete": "after_wait", "half": "after_half"}[stagger]
    return (BarrierStep(0, "before_issue", "sync", 1, not_first=True), BarrierStep(1, "before_issue", "sync", 0),
            BarrierStep(0, signal0, "arrive", 0),
            BarrierStep(1, "after_half" if stagger == "half" else "after_issue", "arrive", 1),
            BarrierStep(0, "tail", "sync", 1, not_first=True))


def stagger_commit_groups(stagger: str, mmas_per_k_tile: int) -> tuple[tuple[int, ...], ...]:
    """The K-steps of a K block in each of its wgmma commit groups: one group (wait_group 0 completes it), or with half
    the first and the second half of the K-steps (wait_group 1 then completes the first: the half signal)."""
    steps = tuple(range(mmas_per_k_tile))
    if stagger != "half":
        return (steps,)
    if mmas_per_k_tile % 2:
        raise SpecError("--fp8-stagger", stagger, "two commit groups of equal K-steps per K block", "an even BK / K")
    return steps[:mmas_per_k_tile // 2], steps[mmas_per_k_tile // 2:]
