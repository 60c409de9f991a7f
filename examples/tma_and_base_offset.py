"""One shared-memory layout feeds both the MMA descriptors and the TMA tensor map; where the ring sits
and which loader fills it decide the descriptors' base offset. No GPU needed.

    python examples/tma_and_base_offset.py
"""

import numpy as np

from ptxgen import make_spec
from ptxgen.derive.tile.layout import derive
from ptxgen.model.bridges.verify import check_operand_tma, check_tile

for loader in ("tma", "cp.async"):
    t = derive(make_spec(128, 128, 32, a="kmajor-sw64", smem_offset=384, loader=loader))
    print(f"--loader {loader}, A's ring at +{t.a.ring_offset_bytes} B: base offset {t.a.base_offset}")
    print("  why:", next(d.reason for d in t.a.derivation if d.name == "base_offset"))
    if t.a.tma is not None:
        assert t.a.tma.layout is t.a.store  # the tensor map was derived from the descriptors' layout
        for d in t.a.tma.derivation:
            if d.name in ("box", "swizzle", "copies", "expect_tx_bytes"):
                print(f"  {d.name:<16} {d.value}: {d.formula}")
    # L1: the loader's writes (the TMA write model, or the store table) read back through every descriptor
    print("  independent models agree:", check_tile(t, seed=1) == [])

# A control: keying TMA's XOR on the copy's destination instead of the absolute address would need a
# different base offset, and the check says so.
tj = derive(make_spec(128, 128, 32, a="kmajor-sw64", smem_offset=384)).to_json()
problems = check_operand_tma(tj, "a", np.random.default_rng(0), anchor="destination")
print(f"'destination' anchor with base offset 0: {len(problems)} problem(s), e.g. {problems[0][:100]}...")
