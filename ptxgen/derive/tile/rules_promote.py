"""--promote G: the rules of promoted tf32 accumulation (the legality of the spec field; the kernel is the block-FP8 promotion
structure of templates/mma_blockfp8.cuh.j2 with no scales).

A promoting wgmma kernel multiplies each G K-tiles into a fresh partial fragment (scale-d 0 at the first K-step of the
group) and adds it to the f32 accumulator in registers, an ordinary f32 add (round to nearest). The tensor core's own f32
additions (toward zero, tools/accumulation_model.py) then run over G K-tiles only, not over all of K: what 3xTF32 calls
(``ptxgen.api.arrays.precision``) need to reach float32 accuracy at large K.

>>> from ptxgen.derive.tile.spec import make_spec
>>> make_spec(bm=128, bn=128, bk=32, a="kmajor-sw128", b="kmajor-sw128", dtype="tf32", arch="sm_90a", promote=1).kernel_name[-9:]
'_promote1'
>>> make_spec(bm=128, bn=128, bk=32, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", arch="sm_90a", promote=1)
Traceback (most recent call last):
...
ptxgen.isa.types.SpecError: --promote=1 is illegal: promotion is built for tf32 inputs (A and B) with an f32 accumulator (3xTF32's kernels); bf16 x bf16 into f32 is not. Legal: --dtype tf32 --acc f32, or --promote 0
"""

from __future__ import annotations

from ...isa.shapes import consumer_register_budget, setmaxnreg_consumer_registers, uses_setmaxnreg, wgmma_accumulator_registers
from ...isa.types import Arch, DType, Grouping, Loader, SpecError

# K-tiles per promotion: 0 none, else G (G > 1: a group's K-tiles unrolled, templates/mma_blockfp8.cuh.j2). The accumulation
# model (tools/accumulation_model.py, PyTorch's test_cublas_addmm inputs at K = 10000 as 3xTF32, 400 outputs, seeds 0-2)
# puts the largest error from float64 at 0.0035-0.0059 for a promotion every 32 of K, 0.0035-0.0039 every 64, 0.0036-0.0047
# every 128 (seed 0: 0.0067 at 256, 0.014 at 512), 0.23-0.30 without, torch's f32 chain 0.025-0.033: 128 keeps the error
# of 32 with a quarter of the promotions (and of the wait_group 0 drains), so 3xTF32 calls take PROMOTE_3XTF32 K-tiles
# of 32 (block FP8 promotes every 128 of K too).
PROMOTE_EVERY = (0, 1, 2, 4)
PROMOTE_3XTF32 = 4


def promote_register_budget(t) -> int:
    """Registers a consumer thread of ``t`` has: the setmaxnreg.inc count where the kernel uses setmaxnreg (TMA, two or more
    consumer warpgroups: derive.roles.pipeline), as block FP8's accumulator + partial rule counts it; else the launch bound."""
    nc = t.consumer_warpgroups
    use = uses_setmaxnreg(t.loader is Loader.TMA, nc)
    return setmaxnreg_consumer_registers(nc) if use else consumer_register_budget(nc)


def check_promote(t, reserve: int) -> None:
    """Raise SpecError where ``t.promote`` breaks a rule; ``reserve``: the registers a consumer needs beside its fragments
    (isa.shapes.REGISTER_RESERVE)."""
    if t.promote == 0:
        return
    if t.promote not in PROMOTE_EVERY:
        raise SpecError("--promote", t.promote, "promotions every 1, 2 or 4 K-tiles are built (tools/accumulation_model.py "
                        "--promote-k: every 32 to 128 of K give about the same error)", ", ".join(map(str, PROMOTE_EVERY)))
    if t.promote > 1 and t.stages < 2:
        raise SpecError("--promote", t.promote, "a group of K-tiles keeps one wgmma group in flight (wait_group 1) before "
                        "releasing a stage: with one stage the producer could never refill it", "--stages 2 or more, or --promote 1")
    if t.dtype is not DType.TF32 or t.b_dtype is not DType.TF32 or t.acc is not DType.F32:
        raise SpecError("--promote", t.promote, "promotion is built for tf32 inputs (A and B) with an f32 accumulator (3xTF32's "
                        f"kernels); {t.dtype.value} x {t.b_dtype.value} into {t.acc.value} is not", "--dtype tf32 --acc f32, or --promote 0")
    if t.arch is not Arch.SM90A:
        raise SpecError("--promote", t.promote, "promotion adds a register partial to a register accumulator: the wgmma "
                        "(sm_90a) form only; tcgen05 (sm_100a) accumulates in tensor memory and has no promoting form",
                        "--arch sm_90a, or --promote 0")
    if t.grouped is not Grouping.NONE or t.consumer_slabs > 1:
        what = ("--grouped", t.grouped.value) if t.grouped is not Grouping.NONE else ("--consumer-slabs", t.consumer_slabs)
        raise SpecError(*what, "the promoting consumer loop is built for dense and batched kernels (not grouped ones, not "
                        "shared-partial slabs)", "--grouped none --consumer-slabs 1, or --promote 0")
    budget = promote_register_budget(t)
    need = 2 * t.consumer_accumulator_registers  # the accumulator and the partial, per slab
    if need + reserve > budget:
        fit = [n for n in range(8, t.bn, 8) if 2 * t.slabs_per_consumer * wgmma_accumulator_registers(n, t.acc) + reserve <= budget]
        raise SpecError("--bn", t.bn, f"--promote keeps a partial beside the accumulator: {need} registers ({t.slabs_per_consumer} "
                        f"slab(s)) leave less than {reserve} of the {budget} a consumer thread has (ptxas would spill)",
                        f"BN <= {max(fit)} at BM={t.bm}" if fit else "a smaller BM")
