"""The attention forward's compile-time choices, checked: head dim, tile sizes, causal, element type, arch.

Every refusal is a :class:`~ptxgen.isa.types.SpecError` naming the flag, the rule and the legal values, as the
GEMM spec's are (the CLI turns it into exit status 2 before any compile work).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..author import Arch, DType, SpecError, tmem_plan

# 256: FA3's largest; on sm_90a only BN 64 keeps S, O and P in a consumer's 240 registers (below), and BM 128 with
# two stages or BM 64 with up to three fit the 227 KB of shared memory
HEAD_DIMS = (64, 128, 256)
BLOCK_M = (64, 128, 192)  # one consumer warpgroup (m64 wgmma) per 64 query rows (192: three, FA3's head-dim-64 tile)
BLOCK_N = (64, 128, 192)  # whole 128-byte swizzle atoms of P (the P·V A operand's K) and a legal wgmma N
DTYPES = (DType.BF16, DType.F16)
# How a consumer warpgroup orders its work per key block (docs/attention.md):
#   serial:   S = Q·Kᵀ, wait, softmax, O += P·V, wait
#   overlap:  FA3's intra-warpgroup overlap: S of block n and P·V of block n-1 issued together; the softmax of S
#             runs while P·V is still in flight; O is rescaled (by block n-1's factor) between the two issues
#   pingpong: overlap, and the two consumer warpgroups take turns issuing their MMAs (two named barriers), so one's
#             softmax hides behind the other's MMAs
SCHEDULES = ("serial", "overlap", "pingpong")
WGMMA_REF = "PTX ISA 9.7.15 'wgmma.mma_async' (#asynchronous-warpgroup-level-matrix-instructions-wgmma-mma-async)"
SMEM_LIMIT_BYTES = 227 * 1024  # H100/H200: the most dynamic shared memory one CTA may opt into
REGISTER_FILE = 65536
# A consumer thread holds the S accumulator (BN/2 f32), the O accumulator (D/2 f32) and P as packed 16-bit
# pairs (BN/4); this many more registers cover addresses, loop state, row statistics and the exp2 temporaries.
# 32: ptxas fits D 128 x BN 192 and D 256 x BN 64 (estimate 208, every schedule, BM 64 and 128) in the budget of
# 240 and D 64 x BN 128 in the three-warpgroup budget of 160 with no local memory (NVRTC 13.5 and 13.0; the SASS gate
# of build.py refuses any kernel that spills).
REGISTER_OVERHEAD = 32
MIN_STAGES, MAX_STAGES = 2, 4


@dataclass(frozen=True)
class AttentionSpec:
    head_dim: int
    bm: int = 128
    bn: int = 128
    causal: bool = False
    dtype: DType = DType.BF16
    arch: Arch = Arch.SM90A
    stages: int = 2  # K/V ring depth
    schedule: str = "serial"
    # one CTA per SM walks the (query block, head, batch) tiles: the next tile's Q, K and V load while this one's
    # last blocks and epilogue run (Q released once the tile's last S has landed: a Q_empty barrier)
    persistent: bool = False
    # Q buffers of the persistent walk: 2 loads the next tile's Q while this tile's blocks run (the producer issues it
    # once this tile's last K and V are in flight; with one buffer it waits for this tile's last S)
    q_buffers: int = 1
    # the epilogue stages O in this tile's Q buffer (free once its last S has landed; with two buffers the producer
    # reloads it only for the next tile but one) and stores whole 16-byte cells, rows contiguous, instead of 4-byte
    # pieces straight from the accumulator registers
    o_staging: bool = False
    # the persistent consumer issues the next tile's first S = Q·Kᵀ with this tile's last P·V (one turn) and runs this
    # tile's epilogue while it does (two Q buffers; an overlapped schedule)
    carry: bool = False

    def __post_init__(self):
        check(self)

    @property
    def consumers(self) -> int:
        return self.bm // 64 if self.arch is Arch.SM90A else 1

    @property
    def tcgen05(self) -> bool:
        return self.arch is Arch.SM100A

    @property
    def threads(self) -> int:
        # sm_90a: a producer warpgroup and a consumer warpgroup per 64 rows; sm_100a: the softmax warpgroup, a TMA warp
        # and an MMA warp
        return 128 * (1 + self.consumers) if self.arch is Arch.SM90A else 192

    @property
    def kernel_name(self) -> str:
        c = "causal" if self.causal else "full"
        return (f"ptxgen_attn_{self.arch.value.replace('_', '')}_{self.dtype.value}_d{self.head_dim}_{self.bm}x{self.bn}_s{self.stages}_"
                f"{c}_{self.schedule}" + ("_persistent" if self.persistent else "") + ("_q2" if self.q_buffers == 2 else "") + ("_os" if self.o_staging else "") + ("_cs" if self.carry else ""))

    def to_json(self) -> dict:
        return {"head_dim": self.head_dim, "bm": self.bm, "bn": self.bn, "causal": self.causal,
                "dtype": self.dtype.value, "arch": self.arch.value, "stages": self.stages, "schedule": self.schedule,
                "persistent": self.persistent, "q_buffers": self.q_buffers,
                "o_staging": self.o_staging, "carry": self.carry}


def consumer_registers(consumers: int) -> tuple[int, int]:
    """(producer, consumer) setmaxnreg budgets: the producer keeps 24 (CUTLASS's and FA3's load warpgroup), the
    consumers share the rest of the 64K-register file, rounded down to a multiple of 8 and at most 240."""
    threads = 128 * (1 + consumers)
    supply = (REGISTER_FILE // threads) // 8 * 8 * threads // 128  # registers per thread-of-a-warpgroup, all groups
    producer = 24
    consumer = min(240, (supply - producer) // consumers // 8 * 8)
    return producer, consumer


def smem_bytes(s: "AttentionSpec") -> int:
    return _smem(s.bm, s.bn, s.head_dim, s.stages, s.dtype.bits // 8, s.q_buffers)


def _smem(bm: int, bn: int, d: int, stages: int, esize: int, q_buffers: int = 1) -> int:
    """Q resident (``q_buffers`` of it), ``stages`` K and V stages and the barriers (1024 B each side for the alignment
    and the words)."""
    return 1024 + q_buffers * bm * d * esize + 2 * stages * bn * d * esize + 1024


def _need(s: "AttentionSpec", bn: int) -> int:
    """Registers a consumer thread needs at ``bn``: sm_90a S (BN/2 f32) + O (D/2) + P (BN/4 packed pairs); sm_100a a
    whole row of S (BN f32) and 32 more at a time (a chunk of O or of P); both plus REGISTER_OVERHEAD."""
    if s.arch is Arch.SM100A:
        return bn + 32 + REGISTER_OVERHEAD
    return bn // 2 + s.head_dim // 2 + bn // 4 + REGISTER_OVERHEAD


def _budget(s: "AttentionSpec", consumers: int) -> int:
    return 255 if s.arch is Arch.SM100A else consumer_registers(consumers)[1]


def _tmem_columns_fit(bn: int, d: int) -> bool:
    try:
        tmem_plan(S=bn, O=d, P=bn // 2)
    except SpecError:
        return False
    return True


def _fits(s: "AttentionSpec", bn: int) -> bool:
    """Whether key blocks of ``bn`` fit this spec's registers, shared memory (at the fewest stages) and, on sm_100a,
    tensor memory: the legal values each of those refusals lists."""
    smem = _smem(s.bm, bn, s.head_dim, MIN_STAGES, s.dtype.bits // 8, s.q_buffers)
    return (_need(s, bn) <= _budget(s, s.consumers) and smem <= SMEM_LIMIT_BYTES
            and (s.arch is not Arch.SM100A or _tmem_columns_fit(bn, s.head_dim)))


def _legal_bns(s: "AttentionSpec") -> str:
    return ", ".join(str(b) for b in BLOCK_N if _fits(s, b)) or "none at this --bm"


def check(s: AttentionSpec) -> None:
    if s.arch is Arch.SM100A and (s.bm != 128 or s.schedule != "serial"):
        raise SpecError("--bm" if s.bm != 128 else "--schedule", s.bm if s.bm != 128 else s.schedule,
                        "the tcgen05 form holds 128 query rows in the 128 TMEM lanes (M = 128, one softmax warpgroup) and has "
                        "one schedule", "--bm 128 --schedule serial")
    if s.arch is Arch.SM100A and s.persistent:
        raise SpecError("--persistent", True, "the tcgen05 form launches one CTA per query tile", "leave --persistent off")
    if s.head_dim not in HEAD_DIMS:
        raise SpecError("--head-dim", s.head_dim, "the head dim must fill whole 128-byte swizzle atoms of Q, K and V and "
                        "keep the O accumulator in registers", ", ".join(map(str, HEAD_DIMS)))
    if s.dtype not in DTYPES:
        raise SpecError("--dtype", s.dtype.value, "P·V takes P from registers (wgmma RS) and V MN-major: 16-bit types only",
                        ", ".join(d.value for d in DTYPES), WGMMA_REF)
    if s.bm not in BLOCK_M:
        raise SpecError("--bm", s.bm, "one consumer warpgroup per 64 query rows (wgmma is m64), at most three",
                        ", ".join(map(str, BLOCK_M)))
    if s.bn not in BLOCK_N:
        raise SpecError("--bn", s.bn, "BN is the N of S = Q·Kᵀ and the K of O += P·V: a multiple of 64 (whole 128-byte "
                        "atoms of K and V rows per stage) and at most 192", ", ".join(map(str, BLOCK_N)), WGMMA_REF)
    if s.schedule not in SCHEDULES:
        raise SpecError("--schedule", s.schedule, "a consumer schedule this template has", ", ".join(SCHEDULES))
    if s.schedule == "pingpong" and s.consumers != 2:
        raise SpecError("--schedule", s.schedule, f"ping-pong alternates two consumer warpgroups (--bm 128), not {s.consumers}",
                        "serial, overlap")
    if s.q_buffers not in (1, 2) or (s.q_buffers == 2 and not s.persistent):
        raise SpecError("--q-buffers", s.q_buffers, "a second Q buffer holds the next tile's Q: only a persistent kernel "
                        "walks tiles", "1" + (", 2" if s.persistent else " (2 with --persistent)"))
    if s.o_staging and s.q_buffers != 2:
        raise SpecError("--o-staging", True, "O is staged in the tile's own Q buffer, which a single buffer hands back "
                        "to the producer at the tile's last S", "with --persistent --q-buffers 2")
    if s.carry and (s.q_buffers != 2 or s.schedule == "serial"):
        raise SpecError("--carry", True, "the next tile's first S is issued from the other Q buffer with this tile's "
                        "last P·V (an overlapped schedule's last issue)",
                        "with --persistent --q-buffers 2 and --schedule overlap or pingpong")
    if not MIN_STAGES <= s.stages <= MAX_STAGES:
        raise SpecError("--stages", s.stages, f"the K/V ring needs {MIN_STAGES} to {MAX_STAGES} stages",
                        ", ".join(map(str, range(MIN_STAGES, MAX_STAGES + 1))))
    if s.arch is Arch.SM100A and not _tmem_columns_fit(s.bn, s.head_dim):
        raise SpecError("--bn", s.bn, f"S ({s.bn}), O ({s.head_dim}) and P ({s.bn // 2}) take {s.bn + s.head_dim + s.bn // 2} "
                        "32-bit tensor-memory columns, more than a CTA's 512", _legal_bns(s), "PTX ISA 'Tensor Memory'")
    _check_registers(s)
    _check_smem(s)


def _check_registers(s: AttentionSpec) -> None:
    need, budget = _need(s, s.bn), _budget(s, s.consumers)
    if need <= budget:
        return
    parts = (f"S {s.bn} + 32 at a time" if s.arch is Arch.SM100A
             else f"S {s.bn // 2} + O {s.head_dim // 2} + P {s.bn // 4}") + f" + {REGISTER_OVERHEAD}"
    rule = (f"a consumer thread needs about {need} registers ({parts}), more than its budget of {budget} with "
            f"{s.consumers} consumer warpgroup(s)")
    if any(_need(s, b) <= budget for b in BLOCK_N):
        raise SpecError("--bn", s.bn, rule, _legal_bns(s))
    # no key block fits this many consumer warpgroups: fewer (a smaller BM) give each a larger budget
    bms = [m for m in BLOCK_M if _need(s, BLOCK_N[0]) <= _budget(s, m // 64)]
    raise SpecError("--bm", s.bm, rule + f" at any --bn (the least, {BLOCK_N[0]}, needs {_need(s, BLOCK_N[0])})",
                    ", ".join(map(str, bms)))


def _check_smem(s: AttentionSpec) -> None:
    esize = s.dtype.bits // 8
    if smem_bytes(s) <= SMEM_LIMIT_BYTES:
        return
    q = "two Q buffers" if s.q_buffers == 2 else "Q"
    rule = (f"{q}, {s.stages} K and {s.stages} V stages and the barriers take {smem_bytes(s)} B, more than the "
            f"{SMEM_LIMIT_BYTES} B a CTA may use")
    stages = [n for n in range(MIN_STAGES, s.stages) if _smem(s.bm, s.bn, s.head_dim, n, esize, s.q_buffers) <= SMEM_LIMIT_BYTES]
    if s.q_buffers == 2 and smem_bytes(replace(s, q_buffers=1)) <= SMEM_LIMIT_BYTES and not stages:
        raise SpecError("--q-buffers", 2, rule, "1")
    if stages:
        raise SpecError("--stages", s.stages, rule, ", ".join(map(str, stages)))
    raise SpecError("--bn", s.bn, rule + f" even with {MIN_STAGES} stages", _legal_bns(s))
