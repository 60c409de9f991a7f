"""The attention forward's compile-time choices, checked: head dim, tile sizes, causal, element type, arch.

Every refusal is a :class:`~ptxgen.isa.types.SpecError` naming the flag, the rule and the legal values, as the
GEMM spec's are (the CLI turns it into exit status 2 before any compile work).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..author import Arch, DType, SpecError

HEAD_DIMS = (64, 128)
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
# 32: ptxas fits D 128 x BN 192 in the two-warpgroup budget of 240 and D 64 x BN 128 in the three-warpgroup budget of
# 160 with no local memory (NVRTC 13.5 and 13.0; the SASS gate of build.py refuses any kernel that spills).
REGISTER_OVERHEAD = 32


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
                f"{c}_{self.schedule}" + ("_persistent" if self.persistent else ""))

    def to_json(self) -> dict:
        return {"head_dim": self.head_dim, "bm": self.bm, "bn": self.bn, "causal": self.causal,
                "dtype": self.dtype.value, "arch": self.arch.value, "stages": self.stages, "schedule": self.schedule,
                "persistent": self.persistent}


def consumer_registers(consumers: int) -> tuple[int, int]:
    """(producer, consumer) setmaxnreg budgets: the producer keeps 24 (CUTLASS's and FA3's load warpgroup), the
    consumers share the rest of the 64K-register file, rounded down to a multiple of 8 and at most 240."""
    threads = 128 * (1 + consumers)
    supply = (REGISTER_FILE // threads) // 8 * 8 * threads // 128  # registers per thread-of-a-warpgroup, all groups
    producer = 24
    consumer = min(240, (supply - producer) // consumers // 8 * 8)
    return producer, consumer


def smem_bytes(s: "AttentionSpec") -> int:
    esize = s.dtype.bits // 8
    return 1024 + s.bm * s.head_dim * esize + 2 * s.stages * s.bn * s.head_dim * esize + 1024


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
    if not 2 <= s.stages <= 4:
        raise SpecError("--stages", s.stages, "the K/V ring needs 2 to 4 stages", "2, 3, 4")
    _, consumer = consumer_registers(s.consumers)
    need = s.bn // 2 + s.head_dim // 2 + s.bn // 4 + REGISTER_OVERHEAD
    if s.arch is Arch.SM100A:
        # a softmax thread holds one whole row of S (BN f32) and 32 more registers at a time (a chunk of O or of P)
        consumer, need = 255, s.bn + 32 + REGISTER_OVERHEAD
    if need > consumer:
        raise SpecError("--bn", s.bn, f"a consumer thread needs about {need} registers (S {s.bn // 2} + O {s.head_dim // 2} + "
                        f"P {s.bn // 4} + {REGISTER_OVERHEAD}), more than its budget of {consumer} with {s.consumers} consumer "
                        "warpgroup(s)", ", ".join(str(b) for b in BLOCK_N if b // 2 + s.head_dim // 2 + b // 4 + REGISTER_OVERHEAD <= consumer))
    if smem_bytes(s) > SMEM_LIMIT_BYTES:
        raise SpecError("--stages", s.stages, f"Q, {s.stages} K and {s.stages} V stages and the barriers take {smem_bytes(s)} B, "
                        f"more than the {SMEM_LIMIT_BYTES} B a CTA may use", "fewer stages or a smaller --bn")
