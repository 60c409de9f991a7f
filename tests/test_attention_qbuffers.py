"""The persistent attention kernel's Q buffers (L1): the buffer index and the two parity waits read from the rendered
kernel, replayed by ptxgen.model.sim.qbufmodel over random interleavings of the producer, the loads and every consumer
warp: no Q overwritten while read, no consumer reading another tile's Q, no deadlock. Controls: a parity or a wait
changed by hand is caught. Also the spec's refusals and the default's choice of two buffers."""

import re

import pytest

from ptxgen.attention.args import AttentionProblem
from ptxgen.attention.launch import choose_spec
from ptxgen.attention.plan import plan_attention
from ptxgen.attention.render import render
from ptxgen.attention.spec import AttentionSpec
from ptxgen.author import DType, SpecError
from ptxgen.model.sim.qbufmodel import replay


def _c(expr: str):
    """A C integer expression of ``tcount`` (non-negative operands) as a Python function."""
    py = expr.replace("/", "//")
    return lambda t: eval(py, {}, {"tcount": t})  # noqa: S307 - the expression comes from our own rendered kernel


def rules(src: str):
    """(buffer, empty_wait, full_parity) of the rendered kernel: the producer's and the consumers' statements."""
    qb = set(re.findall(r"const int qb = ([^;]+);", src))
    assert len(qb) == 1, qb  # producer and consumers agree on the buffer
    empty = re.search(r"if \(tcount >= (\d+)\) mbar_wait\(Q_EMPTY\(qb\), ([^;]+)\);", src)
    full = re.search(r"mbar_wait\(Q_FULL\(qb\), ([^;]+)\);", src)
    assert empty and full
    first, par = int(empty.group(1)), _c(empty.group(2))
    return _c(qb.pop()), (lambda t: par(t) if t >= first else None), _c(full.group(1))


def _src(q_buffers: int, head_dim: int = 128, bm: int = 128, causal: bool = False) -> str:
    sched = "pingpong" if bm == 128 else "overlap"
    return render(plan_attention(AttentionSpec(head_dim, bm, 128, causal, schedule=sched, persistent=True, q_buffers=q_buffers)))


@pytest.mark.parametrize("q_buffers,head_dim,bm", [(1, 128, 128), (2, 128, 128), (2, 64, 192), (1, 64, 192)])
def test_the_rendered_q_protocol_never_overwrites_or_misreads(q_buffers, head_dim, bm):
    buffer, empty_wait, full_parity = rules(_src(q_buffers, head_dim, bm))
    assert {buffer(t) for t in range(8)} == set(range(q_buffers))
    consumers = 4 * bm // 64  # lane 0 of every consumer warp
    for tiles in (1, 2, 3, 7):
        r = replay(tiles, q_buffers, consumers, buffer, empty_wait, full_parity, runs=120, seed=tiles)
        assert r.ok, r.violation


def test_control_the_one_buffer_parity_with_two_buffers_misreads():
    buffer, empty_wait, _ = rules(_src(2))
    r = replay(6, 2, 8, buffer, empty_wait, lambda t: t & 1, runs=200)
    assert not r.ok and ("passed" in r.violation or "deadlock" in r.violation)


def test_control_no_empty_wait_overwrites():
    buffer, _, full_parity = rules(_src(2))
    r = replay(6, 2, 8, buffer, lambda t: None, full_parity, runs=300)
    assert not r.ok and "still read" in r.violation


def test_control_the_empty_wait_one_phase_late_deadlocks_or_overwrites():
    buffer, empty_wait, full_parity = rules(_src(2))
    r = replay(6, 2, 8, buffer, lambda t: None if empty_wait(t) is None else 1 - empty_wait(t), full_parity, runs=200)
    assert not r.ok


def test_two_buffers_take_their_shared_memory_and_barriers():
    one = plan_attention(AttentionSpec(128, 128, 128, schedule="pingpong", persistent=True))
    two = plan_attention(AttentionSpec(128, 128, 128, schedule="pingpong", persistent=True, q_buffers=2))
    assert two.ring.regions["Q"].nbytes == 2 * one.ring.regions["Q"].nbytes == 2 * 128 * 128 * 2
    assert two.ring.regions["K"].offset_bytes == one.ring.regions["K"].offset_bytes + 128 * 128 * 2
    # Q_full and Q_empty: two each, 8 bytes apart
    assert two.ring.bar_offset("Q_empty") - two.ring.bar_offset("Q_full") == 16
    assert one.ring.bar_offset("Q_empty") - one.ring.bar_offset("Q_full") == 8


@pytest.mark.parametrize("kw,flag", [
    (dict(head_dim=128, q_buffers=2), "--q-buffers"),  # not persistent
    (dict(head_dim=128, q_buffers=3, persistent=True), "--q-buffers"),
    (dict(head_dim=256, bn=64, q_buffers=2, persistent=True, schedule="overlap"), "--q-buffers"),  # shared memory
])
def test_refusals_name_the_flag(kw, flag):
    with pytest.raises(SpecError) as e:
        AttentionSpec(**{"bm": 128, "bn": 128, "schedule": "pingpong", **kw})
    assert e.value.field == flag


@pytest.mark.parametrize("d,seqlen,causal,want", [
    (128, 512, False, 2), (128, 2048, True, 2), (64, 512, False, 2),
    (128, 8192, False, 1),  # one CTA per tile: one buffer
    (256, 2048, False, 1),  # not persistent (and no room)
])
def test_the_default_takes_two_q_buffers_where_it_walks_and_they_fit(d, seqlen, causal, want):
    p = AttentionProblem(16384 // seqlen, 2048 // d, 2048 // d, seqlen, seqlen, d, DType.BF16)
    assert choose_spec(p, causal).q_buffers == want
    assert choose_spec(p, causal, q_buffers=1).q_buffers == 1


def test_the_ring_piece_refuses_a_second_stage_nobody_releases():
    """Ring(resident_stages=2) needs resident_release (a second buffer the producer reloads needs its empty barrier);
    three stages are refused; with the release the resident region doubles and both barrier sets are per stage."""
    from ptxgen.author import Ring

    p = plan_attention(AttentionSpec(128, 128, 128, schedule="pingpong", persistent=True))
    q, k, v = p.q, p.k, p.v
    for kw in (dict(resident_stages=2), dict(resident_stages=3, resident_release=True)):
        with pytest.raises(SpecError) as e:
            Ring(stages=2, operands=(k, v), resident=(q,), full_per_operand=True, **kw).plan()
        assert e.value.field == "resident_stages"
    r = Ring(stages=2, operands=(k, v), resident=(q,), full_per_operand=True, resident_stages=2, resident_release=True).plan()
    assert r.regions["Q"].nbytes == 2 * q.stage_bytes and r.regions["K"].offset_bytes == 2 * q.stage_bytes
    assert r.bars["Q_full"].stage_stride_bytes == r.bars["Q_empty"].stage_stride_bytes == 8
    assert r.bar_offset("Q_empty") == 16 and r.bar_offset("full_K") == 32


class _Out:
    """A tensor's pointer and strides (``launch.cells_ok`` reads nothing else)."""

    def __init__(self, ptr, strides):
        self.ptr, self.strides = ptr, strides

    def data_ptr(self):
        return self.ptr

    def stride(self, i):
        return self.strides[i]


def test_o_is_staged_at_d128_walks_only_and_only_into_16_byte_rows():
    from ptxgen.attention.launch import cells_ok

    def spec(d, seqlen, **kw):
        return choose_spec(AttentionProblem(16384 // seqlen, 2048 // d, 2048 // d, seqlen, seqlen, d, DType.BF16), False, **kw)
    assert spec(128, 512).o_staging and spec(128, 2048).o_staging
    assert not spec(64, 2048).o_staging  # the D 64 overlap walk: measured slower staged
    assert spec(64, 512).o_staging and spec(64, 1024).o_staging  # D 64 short non-causal: the ping-pong 128 x 128 walk
    assert not spec(64, 512, schedule="overlap").o_staging  # the overlap walk asked for: no staging (control)
    assert not spec(128, 8192).o_staging  # one CTA per tile: one Q buffer
    assert not spec(128, 512, o_staging=False).o_staging and spec(64, 512, o_staging=True).o_staging
    assert not spec(128, 512, q_buffers=1).o_staging  # staging needs the second buffer
    assert cells_ok(_Out(256, (8 * 512 * 128, 512 * 128, 128, 1)))
    assert not cells_ok(_Out(256 + 8, (8 * 512 * 128, 512 * 128, 128, 1)))  # rows 8 bytes off 16
    assert not cells_ok(_Out(256, (8 * 512 * 132, 512 * 132, 132, 1)))  # row stride 264 bytes: odd rows off 16


def test_the_plan_names_the_kernel_the_call_takes():
    """``ptxgen.api.plan`` on meta tensors: the two-buffer, O-staged, carried kernel at D 128, 512 keys non-causal, and
    the direct store for an ``out=`` whose rows start 8 bytes past 16 (as ``attention`` decides from
    ``launch.cells_ok``); causal, nothing carried (``launch.CARRY_*``)."""
    torch = pytest.importorskip("torch")
    import ptxgen.api as api

    q = torch.empty(32, 16, 512, 128, device="meta", dtype=torch.bfloat16)
    plan = api.plan("attention", q, q, q, device="h100")
    assert plan.kernel.endswith("_persistent_q2_os_cs") and "2 Q buffers, O staged" in plan.why
    assert "first S issued with this tile's last P·V" in plan.why
    out = torch.empty(32 * 16 * 512 * 128 + 4, device="meta", dtype=torch.bfloat16)[4:].view(32, 16, 512, 128)
    assert api.plan("attention", q, q, q, out=out, device="h100").kernel.endswith("_persistent_q2_cs")
    assert api.plan("attention", q, q, q, causal=True, device="h100").kernel.endswith("_persistent_q2_os")


@pytest.mark.parametrize("kw", [dict(q_buffers=1), dict(q_buffers=2, schedule="serial", bm=128)])
def test_the_carried_form_needs_two_q_buffers_and_an_overlapped_schedule(kw):
    with pytest.raises(SpecError) as e:
        AttentionSpec(**{"head_dim": 128, "bm": 128, "bn": 128, "schedule": "pingpong", "persistent": True, "carry": True, **kw})
    assert e.value.field == "--carry"


@pytest.mark.parametrize("spec", [
    AttentionSpec(128, 128, 128, True, schedule="pingpong", persistent=True, q_buffers=2, o_staging=True, carry=True),
    AttentionSpec(64, 192, 128, False, schedule="overlap", persistent=True, q_buffers=2, carry=True),
    AttentionSpec(64, 128, 192, True, schedule="pingpong", persistent=True, q_buffers=2, carry=True),
], ids=lambda s: s.kernel_name)
def test_the_carried_kernels_pass_the_sass_gate(spec):
    """L2: one more D/16 HGMMA for S (the next tile's, beside the last P·V), S and P·V still in flight together in the
    loop (wait_group 1), ptxas not serializing the wgmmas (a wgmma under a branch would), no local memory."""
    from ptxgen.attention.build import build

    rep = build(spec).sass_report()
    assert not rep.problems, rep.problems
    assert rep.qk_mmas == 3 * spec.head_dim // 16 and rep.pv_mmas == 2 * spec.bn // 16 and rep.local_bytes == 0


def carried_rule(src: str):
    """(carried, hold_both) of a rendered carried kernel: the wait its consumers issue for the next tile's first S
    (buffer ``qbn``, the parity flipped when no tile follows: ``more ? phase_q : 1u - phase_q``) as ``carried(t, last) -> (buffer,
    parity)``, and whether it comes before the release of this tile's buffer (text order = program order here: one
    release, one carried wait, neither in a loop the other is not)."""
    qbn = re.search(r"const int qbn = ([^,;]+)", src)
    phase = re.search(r"const unsigned phase_q = ([^,;]+)", src)
    wait = re.search(r"mbar_wait\(Q_FULL\(qbn\), more \? phase_q : 1u - phase_q\);", src)
    assert qbn and phase and wait
    assert set(re.findall(r"\n\s*qb = ([^;]+);", src)) == set(re.findall(r"const int qb = ([^;]+);", src))  # the next tile's
    releases = [m.start() for m in re.finditer(r"mbar_arrive\(Q_EMPTY\(qb\)\)", src)]
    assert len(releases) == 1
    b, par = _c(qbn.group(1)), _c(phase.group(1))
    return (lambda t, last: (b(t), par(t) ^ int(last))), releases[0] > wait.start()


CARRIED = [AttentionSpec(128, 128, 128, False, schedule="pingpong", persistent=True, q_buffers=2, o_staging=True, carry=True),
           AttentionSpec(64, 192, 128, False, schedule="overlap", persistent=True, q_buffers=2, carry=True),
           AttentionSpec(128, 128, 128, True, schedule="pingpong", persistent=True, q_buffers=2, carry=True)]


@pytest.mark.parametrize("spec", CARRIED, ids=lambda s: s.kernel_name)
def test_the_carried_q_protocol_never_overwrites_misreads_or_hangs(spec):
    """L1 of the carried form: the consumers wait for the next tile's Q before (O staged in this tile's buffer) or after
    (Q released at the tile's last S) they release this tile's buffer, and after the CTA's last tile once more on a
    buffer no load fills; replayed with the producer's rules from the same rendered kernel."""
    src = render(plan_attention(spec))
    buffer, empty_wait, full_parity = rules(src)
    carried, hold_both = carried_rule(src)
    assert hold_both == spec.o_staging
    consumers = 4 * spec.bm // 64
    for tiles in (1, 2, 3, 7):
        r = replay(tiles, 2, consumers, buffer, empty_wait, full_parity, runs=120, seed=tiles, carried=carried,
                   hold_both=hold_both)
        assert r.ok, r.violation


def _carried_control(change):
    src = render(plan_attention(CARRIED[0]))
    buffer, empty_wait, full_parity = rules(src)
    carried, hold_both = carried_rule(src)
    return [replay(tiles, 2, 8, buffer, empty_wait, full_parity, runs=60, seed=tiles, carried=change(carried),
                   hold_both=hold_both) for tiles in (1, 3, 7)]


def test_control_the_carried_wait_without_the_flip_after_the_last_tile_hangs():
    rs = _carried_control(lambda carried: (lambda t, last: carried(t, False)))
    assert all(not r.ok and "deadlock" in r.violation for r in rs)


def test_control_the_carried_wait_on_this_tiles_buffer_misreads():
    rs = _carried_control(lambda carried: (lambda t, last: (t % 2, carried(t, last)[1])))
    assert any(not r.ok and "carried S passed" in r.violation for r in rs)


def test_control_the_carried_parity_of_this_tile_misreads_or_hangs():
    rs = _carried_control(lambda carried: (lambda t, last: (carried(t, last)[0], ((t // 2) & 1) ^ int(last))))
    assert all(not r.ok for r in rs[1:])
