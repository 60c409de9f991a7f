"""Pure math: the setmaxnreg budgets of the warp-specialized Hopper kernel keep the register pool balanced.

A CTA keeps the registers it was launched with; setmaxnreg.inc waits until the pool has them, so if the
consumers ask for more than the producer gave back the kernel hangs (seen on an H200 with an earlier
formula: BM=256, four consumer warpgroups asking for 112 registers a thread).
"""

import pytest

from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.tile.spec import make_spec
from ptxgen.isa.shapes import (
    PRODUCER_REGISTERS,
    REGISTER_FILE,
    entry_registers,
    producer_registers,
    register_pool_balance,
    setmaxnreg_consumer_registers,
)


@pytest.mark.parametrize("consumers", [2, 3, 4])
def test_pool_never_overdrawn(consumers):
    threads = 128 * (consumers + 1)
    entry = entry_registers(threads)
    assert entry * threads <= REGISTER_FILE
    regs = setmaxnreg_consumer_registers(consumers)
    # by hand: what the producer frees must cover what the consumers take
    assert (entry - producer_registers(consumers)) * 128 >= (regs - entry) * 128 * consumers
    assert register_pool_balance(consumers) >= 0 and regs % 8 == 0 and entry < regs <= 256


def test_known_values():
    # 384 threads: launched at 168, producer 40, consumers 232 (CUTLASS and DeepGEMM use the same numbers)
    assert (entry_registers(384), setmaxnreg_consumer_registers(2)) == (168, 232)
    assert (entry_registers(640), setmaxnreg_consumer_registers(4)) == (96, 104)
    # 512 threads: launched at 128; producer 32 (not 40, which leaves 152), consumers 160, the pool exactly spent
    assert (entry_registers(512), producer_registers(3), setmaxnreg_consumer_registers(3)) == (128, 32, 160)
    assert register_pool_balance(3) == 0 and (producer_registers(2), producer_registers(4)) == (PRODUCER_REGISTERS,) * 2


def test_forty_producer_registers_at_three_consumers_would_give_152():
    """Control: the formula with the producer at 40 gives the three consumers 152, which the block-FP8 rule refuses for
    192 x 128 (accumulator + partial 128 + the 32 reserve)."""
    entry = entry_registers(512)
    assert (entry + (entry - PRODUCER_REGISTERS) // 3) // 8 * 8 == 152


def test_the_formula_that_hung_would_be_caught():
    """Control: the earlier formula (the whole register file minus the producer's share) overdraws at four
    consumer warpgroups, which the balance check rejects."""
    old = (REGISTER_FILE - 128 * PRODUCER_REGISTERS) // (128 * 4) // 8 * 8
    entry = entry_registers(640)
    assert (entry - PRODUCER_REGISTERS) * 128 - (old - entry) * 128 * 4 < 0


def test_plans_use_setmaxnreg_only_for_tma_with_several_consumers():
    def roles(**kw):
        return {r.name: r.registers for r in plan_kernel(make_spec(arch="sm_90a", bk=64, a="kmajor-sw128", b="kmajor-sw128", **kw)).pipeline.roles}

    assert roles(bm=128, bn=256) == {"consumer": 232, "producer": 40}
    assert roles(bm=256, bn=64) == {"consumer": 104, "producer": 40}
    assert roles(bm=192, bn=128) == {"consumer": 160, "producer": 32}
    assert roles(bm=64, bn=64) == {"consumer": None, "producer": None}
    assert roles(bm=128, bn=256, loader="cp.async") == {"consumer": None, "producer": None}
