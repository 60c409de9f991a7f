"""What the MMA instructions allow: M, N and swizzle per architecture, type and majorness.

Pure ISA facts (PTX ISA 'tcgen05 .kind and shapes', 'wgmma matrix shape', 'valid combinations of type
size, majorness and swizzling'); the spec validator asks these and names the rule when it refuses.
"""

from __future__ import annotations

from .types import Arch, DType, Major, Swizzle


def legal_bm(arch: Arch, cta_group: int = 1) -> tuple[int, ...]:
    # tcgen05.mma.cta_group::1 (not .ws): M is 64 or 128; cta_group::2: M is 128 or 256 over the CTA pair
    # (PTX '.kind and shapes'; CUTLASS SM100_MMA_*_2x1SM_SS static_assert M == 128 || M == 256).
    # wgmma: M=64 per instruction, one consumer warpgroup per 64 rows, at most 4 consumer warpgroups per CTA here.
    if arch is Arch.SM100A:
        return (128, 256) if cta_group == 2 else (64, 128)
    return (64, 128, 192, 256)


def legal_bn(arch: Arch, dtype: DType, b_major: Major, cta_group: int = 1) -> tuple[int, ...]:
    if arch is Arch.SM100A and cta_group == 2:
        # cta_group::2 (PTX '.kind and shapes'): kind::f16/tf32/f8f6f4 N = 16..256 step 16, kind::i8 N = 32..256
        # step 32; 8-bit transposed (N-major) B: 32..256 step 32 (PTX Table 52). CUTLASS 2x1SM_SS: N % 16 == 0,
        # S8 2x1SM: N % 32 == 0.
        step = 32 if dtype.kind == "i8" or (dtype.bits == 8 and b_major is Major.MN) else 16
        return tuple(range(step, 257, step))
    if dtype in (DType.S8, DType.U8):
        ns = [8, 16, 24, 32] + list(range(48, 257, 16))  # step 16 after 32
    else:
        ns = list(range(8, 257, 8))
    if arch is Arch.SM100A and dtype.bits == 8 and b_major is Major.MN:
        ns = [n for n in ns if n % 16 == 0]  # 8-bit transposed B (PTX Table 52)
    return tuple(ns)


def legal_swizzles(arch: Arch, dtype: DType, major: Major) -> tuple[Swizzle, ...]:
    """Majorness x swizzle x type combinations each family accepts."""
    four = (Swizzle.NONE, Swizzle.SW32, Swizzle.SW64, Swizzle.SW128)
    if arch is Arch.SM90A:
        if major is Major.MN and dtype not in (DType.F16, DType.BF16):
            return ()  # wgmma transposes only .f16/.bf16
        return four
    if major is Major.K:
        return four  # K-major: all swizzles except 128B_base32B, every type size
    if dtype is DType.TF32:
        return (Swizzle.SW128B32,)  # MN-major 32-bit only with 128B_base32B
    return four  # MN-major 8/16-bit: all but 128B_base32B


# Registers: 64K 32-bit registers per SM; at most 255 a thread; setmaxnreg takes 24..256 in steps of 8.
REGISTER_FILE = 65536
MAX_REGS_PER_THREAD = 255
SETMAXNREG_MIN, SETMAXNREG_MAX, SETMAXNREG_STEP = 24, 256, 8
# Registers a wgmma consumer needs beside its accumulator. Measured with NVRTC 13.5 on the warp-specialized
# kernels (SASS check, no local memory): at 640 threads (96 registers) BN=128 (64 accumulator registers)
# compiles and BN=160 (80) does not; at 512 threads (128) BN=192 (96) compiles and BN=224 (112) does not.
REGISTER_RESERVE = 32


def register_budget(threads: int) -> int:
    """Registers per thread when ``threads`` share the register file (at most 255, in steps of 8)."""
    return min(MAX_REGS_PER_THREAD, REGISTER_FILE // threads // 8 * 8)


def wgmma_accumulator_registers(bn: int, acc: DType) -> int:
    """32-bit registers per thread of an m64nN accumulator over 128 threads; f16 packs two per register."""
    return bn // 4 if acc is DType.F16 else bn // 2


# Warp specialization on Hopper: the producer warpgroup gives registers back with setmaxnreg.dec and the
# consumer warpgroups take them with setmaxnreg.inc (CUTLASS and DeepGEMM use 40 and 232 at 384 threads).
PRODUCER_REGISTERS = 40
# The producer's count where 40 is not the one: at three consumer warpgroups (512 threads, launched at 128) 40 leaves
# the consumers 128 + 88 / 3 -> 152, and block-scaled FP8 at BM = 192 (accumulator + partial = 128 registers) needs
# 160 there. Measured with NVRTC 13.5 (192 x 128 x 128, scales in shared memory, 2026-12-02): at 152 ptxas
# spills two tile counters of the consumer branch (11 LDL/STL), at 160 none (highest register R154); the producer's TMA
# thread and scale warp compile at 32 without local memory. 32 gives the consumers exactly 160 (pool balance 0).
PRODUCER_REGISTERS_BY_CONSUMERS = {3: 32}
WARP_THREADS = 32
WARPGROUP_THREADS = 128
WARPS_PER_WARPGROUP = WARPGROUP_THREADS // WARP_THREADS  # a warpgroup is four consecutive warps (PTX 'warpgroup')


def entry_registers(threads: int) -> int:
    """Registers a thread gets at launch under __launch_bounds__(threads, 1), in setmaxnreg's steps of 8."""
    return min(MAX_REGS_PER_THREAD, REGISTER_FILE // threads) // SETMAXNREG_STEP * SETMAXNREG_STEP


def uses_setmaxnreg(tma_loader: bool, consumer_warpgroups: int) -> bool:
    """Whether a wgmma kernel moves registers from its producer to its consumers at run time (setmaxnreg): a TMA
    producer with two or more consumer warpgroups (the cp.async producer needs its registers for addressing: at 40 it
    spills, measured with NVRTC 13.5)."""
    return tma_loader and consumer_warpgroups >= 2


def consumer_register_budget(consumer_warpgroups: int, setmaxnreg: bool = False) -> int:
    """Registers ptxas lets a consumer thread use. Without setmaxnreg, and with it beside four consumer warpgroups: the
    launch budget of all warpgroups (consumers plus the producer); measured with NVRTC 13.5, ptxas allocates the consumer
    branch within that bound even after setmaxnreg.inc (BM=256, BN=160: 'Insufficient registers (96)'). With setmaxnreg
    and two consumer warpgroups: the setmaxnreg.inc count; measured with NVRTC 13.5 and 12.8, ptxas allocates the branch
    up to it (ping-pong 128 x 192, 192 accumulator registers a thread: no local memory, launch count 168)."""
    if setmaxnreg and consumer_warpgroups == 2:
        return setmaxnreg_consumer_registers(consumer_warpgroups)
    return entry_registers(WARPGROUP_THREADS * (consumer_warpgroups + 1))


def producer_registers(consumer_warpgroups: int) -> int:
    """setmaxnreg.dec target of the producer warpgroup: PRODUCER_REGISTERS, or the measured count for this many
    consumer warpgroups (PRODUCER_REGISTERS_BY_CONSUMERS)."""
    return PRODUCER_REGISTERS_BY_CONSUMERS.get(consumer_warpgroups, PRODUCER_REGISTERS)


def setmaxnreg_consumer_registers(consumer_warpgroups: int) -> int:
    """setmaxnreg.inc target of the consumers. The CTA keeps the registers it was launched with (the entry
    count E for every thread); what the producer gives back, (E - P) x 128 with P = producer_registers, is all the
    consumers can take: E + (E - P) / C, in steps of 8 (CUTLASS: 232 at C = 2, P = 40). Asking for more blocks
    setmaxnreg.inc forever (seen on an H200: BM=256 with C = 4 hung at 112)."""
    entry = entry_registers(WARPGROUP_THREADS * (consumer_warpgroups + 1))
    extra = (entry - producer_registers(consumer_warpgroups)) // consumer_warpgroups
    return min(SETMAXNREG_MAX, (entry + extra) // SETMAXNREG_STEP * SETMAXNREG_STEP)


def register_pool_balance(consumer_warpgroups: int) -> int:
    """Registers left in the CTA's pool after the producer's dec and every consumer's inc (must be >= 0)."""
    entry = entry_registers(WARPGROUP_THREADS * (consumer_warpgroups + 1))
    freed = (entry - producer_registers(consumer_warpgroups)) * WARPGROUP_THREADS
    taken = (setmaxnreg_consumer_registers(consumer_warpgroups) - entry) * WARPGROUP_THREADS * consumer_warpgroups
    return freed - taken


# What the epilogues' warp roles rest on (PTX: 'wgmma .m64nNk* D fragments'; tcgen05 'Data path layout organization').
WGMMA_D_ROWS = 64  # one wgmma D fragment is m64: the rows a consumer warpgroup holds per slab
TMEM_WARP_LANES = 32  # warp w of a warpgroup may access TMEM lanes 32w..32w+31 (rows of D at M=128, cta_group::1)
TCGEN05_EPILOGUE_WARPS = 4  # one warpgroup of epilogue warps reaches all 128 lanes
