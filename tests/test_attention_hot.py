"""``ptxgen.attention``'s hot key on a machine with no GPU: a fake ``torch`` (only what the call reads), the kernel
build and the prepared launch replaced by recorders. What must hold: the first call of a dispatch key runs the full
argument checks and prepares once; a repeat call of the key runs no check but the pointers' alignment and launches
with its own tensors; a key that differs in any tensor's dtype, shape, strides or device, in ``out``'s geometry or in
an option is checked in full again. Controls: a view 8 bytes off under a launched key, a k of another dtype, an out
of another shape are refused as the full check refuses them. (tests/test_attention_gpu.py runs the same on a GPU.)"""

from __future__ import annotations

import sys
import types

import pytest
from fake_torch import BF16, F16, FakeTensor, module

from ptxgen.runtime.launch.arrays import ArgumentError, DTypeError


@pytest.fixture
def rig(monkeypatch):
    """(attention, checks, prepared, runs): the entry with the fakes in place; ``checks`` counts full argument checks,
    ``prepared`` the launches prepared, ``runs`` each launch's (q pointer, out pointer, stream)."""
    import ptxgen.attention.launch as launch

    monkeypatch.setitem(sys.modules, "torch", module(stream_base=500))
    checks, prepared, runs = [], [], []
    real_check = launch.check_arguments
    monkeypatch.setattr(launch, "check_arguments", lambda *a: (checks.append(1), real_check(*a))[1])
    monkeypatch.setattr(launch, "_kernel", lambda spec, index: (types.SimpleNamespace(plan=None), 77))

    class Prepared:
        def __init__(self, spec, plan, func, p, q, k, v, out, scale):
            prepared.append(scale)
            self.spec, self.lse_shape = spec, (p.batch, p.heads, p.seqlen_q)

        def run(self, q, k, v, out, lse, stream):
            runs.append((q.data_ptr(), out.data_ptr(), stream))
            return 0

    monkeypatch.setattr(launch, "PreparedAttention", Prepared)
    monkeypatch.setattr(launch, "_PREPARED", {})
    return launch.attention, checks, prepared, runs


def qkv(dtype_k=BF16, sq=256, device=0):
    return (FakeTensor((1, 4, sq, 64), device=device), FakeTensor((1, 4, 300, 64), dtype_k, device=device),
            FakeTensor((1, 4, 300, 64), device=device))


def test_a_repeat_key_checks_only_pointers(rig):
    attention, checks, prepared, runs = rig
    attention(*qkv())
    q, k, v = qkv()
    attention(q, k, v)
    attention(q, k, v, causal=True)
    assert (len(checks), len(prepared), len(runs)) == (2, 2, 3), "the repeat call ran the full checks"
    assert runs[1][0] == q.ptr and runs[1][2] == 500
    out = FakeTensor((1, 4, 256, 64))
    attention(q, k, v, out=out)
    attention(q, k, v, out=FakeTensor((1, 4, 256, 64)))
    assert len(checks) == 3 and runs[-1][1] != out.ptr and runs[-2][1] == out.ptr


def test_other_keys_are_checked_again(rig):
    attention, checks, prepared, _ = rig
    attention(*qkv())
    attention(*qkv(sq=255))
    attention(*qkv(device=1))
    attention(*qkv(), scale=0.5)
    assert len(checks) == len(prepared) == 4


def test_controls_refusals_under_a_launched_key(rig):
    attention, checks, _, runs = rig
    attention(*qkv())
    q, k, v = qkv()
    q.ptr += 8  # the key of a launched call, a pointer the full check refuses
    with pytest.raises(ArgumentError, match="not 16-byte aligned"):
        attention(q, k, v)
    with pytest.raises(DTypeError, match="share one dtype"):
        attention(*qkv(dtype_k=F16))
    with pytest.raises(ArgumentError, match="out: shape"):
        attention(*qkv(), out=FakeTensor((1, 4, 255, 64)))
    assert len(runs) == 1 and len(checks) == 4
