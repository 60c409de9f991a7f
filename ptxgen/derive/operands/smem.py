"""Where each piece of a kernel's dynamic shared memory goes.

The A stages come first, then the B stages, then the pipeline's mbarriers (a ``full`` and an ``empty``
barrier per stage; tcgen05 adds ``acc_full``, signalled when the accumulator is complete, and ``acc_empty``,
when the epilogue has read it out) and, on
tcgen05, the 4-byte slot that ``tcgen05.alloc`` writes the TMEM address into. Offsets are from the
kernel's aligned base: the dynamic shared-memory window is only guaranteed 16-byte aligned, so kernels
round its address up to ``base_alignment`` at run time and ask for ``base_alignment - 16`` bytes of slack.

>>> p = plan_smem(stages=2, a_stage_bytes=8192, a_align=512, b_stage_bytes=8192, b_align=1024, tmem=True)
>>> (p.a_offset, p.b_offset, p.barrier_offset("full"), p.barrier_offset("empty"), p.tmem_slot_offset, p.dynamic_bytes)
(0, 16384, 32768, 32784, 32816, 33828)
"""

from __future__ import annotations

from dataclasses import dataclass

# Largest dynamic shared memory a block can opt into on compute capability 9.0 and 10.x (227 KB).
SMEM_LIMIT_BYTES = 232448
MBARRIER_BYTES = 8
TMEM_SLOT_BYTES = 4
DYNAMIC_SMEM_BASE_ALIGN = 16
STORE_ALIGN = 1024  # the staging buffers are 128-byte-swizzled: start them on the pattern's repeat
SF_ALIGN_BYTES = 128


def align_up(x: int, a: int) -> int:
    return (x + a - 1) // a * a


@dataclass(frozen=True)
class SmemPlan:
    stages: int
    a_offset: int
    a_stage_bytes: int
    b_offset: int
    b_stage_bytes: int
    barrier_arrays: tuple[tuple[str, int, int], ...]  # (name, first byte, how many 8-byte mbarriers)
    tmem_slot_offset: int | None  # tcgen05 only
    used_bytes: int
    base_alignment: int
    store_offset: int | None = None  # TMA-store epilogue staging buffers (None without them)
    store_bytes: int = 0
    # Block-scaled kernels: a ring of scale-factor stages per operand after the B ring (0 bytes otherwise).
    sfa_offset: int = 0
    sfa_stage_bytes: int = 0
    sfb_offset: int = 0
    sfb_stage_bytes: int = 0

    @property
    def dynamic_bytes(self) -> int:
        """Bytes to request at launch: what the plan uses plus the slack for aligning the base."""
        return self.used_bytes + self.base_alignment - DYNAMIC_SMEM_BASE_ALIGN

    def a_stage_offset(self, stage: int) -> int:
        return self.a_offset + stage * self.a_stage_bytes

    def b_stage_offset(self, stage: int) -> int:
        return self.b_offset + stage * self.b_stage_bytes

    def ring_offset(self, operand: str) -> int:
        return self.a_offset if operand == "a" else self.b_offset

    def barrier_offset(self, name: str) -> int:
        for n, off, _ in self.barrier_arrays:
            if n == name:
                return off
        raise KeyError(name)


def plan_smem(
    stages: int,
    a_stage_bytes: int,
    a_align: int,
    b_stage_bytes: int,
    b_align: int,
    tmem: bool,
    ring_offset: int = 0,
    order_barriers: int = 0,
    acc_stages: int = 1,
    store_bytes: int = 0,
    sf_stage_bytes: tuple[int, int] = (0, 0),
    c_barriers: int = 0,
) -> SmemPlan:
    """``ring_offset`` shifts both operand rings off the aligned base (their swizzle patterns then start
    ``ring_offset`` bytes past a repeat boundary; the descriptors' base offset follows the loader's rule)."""
    # Each stage size is a whole number of swizzle atoms, so consecutive stages keep the same phase.
    assert a_stage_bytes % a_align == 0 and b_stage_bytes % b_align == 0
    a_offset = ring_offset
    b_offset = ring_offset + align_up(stages * a_stage_bytes, b_align)
    at = b_offset + stages * b_stage_bytes
    sfa_offset = sfb_offset = 0
    if any(sf_stage_bytes):
        # Scale factors: whole 512-byte atoms, 128-byte aligned (tcgen05.cp reads 16-B rows; cp.async.bulk needs 16 B).
        sfa_offset = align_up(at, SF_ALIGN_BYTES)
        sfb_offset = sfa_offset + stages * sf_stage_bytes[0]
        at = sfb_offset + stages * sf_stage_bytes[1]
    store_offset = None
    if store_bytes:  # the TMA-store epilogue's staging buffers: 128-byte swizzle rows, on a 1024-byte repeat
        store_offset = align_up(at, STORE_ALIGN)
        at = store_offset + store_bytes
    at = align_up(at, MBARRIER_BYTES)
    arrays = []
    extra = (("acc_full", acc_stages), ("acc_empty", acc_stages)) if tmem else ()
    extra += (("order", order_barriers),) if order_barriers else ()
    extra += (("c_full", c_barriers),) if c_barriers else ()  # C through TMA: one per storer (derive.store.cload)
    for name, count in (("full", stages), ("empty", stages)) + extra:
        arrays.append((name, at, count))
        at += count * MBARRIER_BYTES
    tmem_slot = None
    if tmem:
        tmem_slot = at
        at += TMEM_SLOT_BYTES
    return SmemPlan(
        stages=stages,
        a_offset=a_offset,
        a_stage_bytes=a_stage_bytes,
        b_offset=b_offset,
        b_stage_bytes=b_stage_bytes,
        barrier_arrays=tuple(arrays),
        tmem_slot_offset=tmem_slot,
        used_bytes=at,
        base_alignment=max(a_align, b_align, DYNAMIC_SMEM_BASE_ALIGN, STORE_ALIGN if store_bytes else 0),
        store_offset=store_offset,
        store_bytes=store_bytes,
        sfa_offset=sfa_offset,
        sfa_stage_bytes=sf_stage_bytes[0],
        sfb_offset=sfb_offset,
        sfb_stage_bytes=sf_stage_bytes[1],
    )
