"""The fused epilogue's vocabulary: activations, bias axes, FP8 output scaling, and the numeric facts they use.

A leaf module (imports only ``isa``): the spec, the chain plan, the renderer and the runtime share these.

>>> Activation.parse("gelu").value, BiasAxis.parse("col").value
('gelu_tanh', 'col')
>>> E4M3_MAX
448.0
"""

from __future__ import annotations

from enum import Enum

from .types import DType


class Activation(Enum):
    NONE = "none"
    RELU = "relu"
    GELU_TANH = "gelu_tanh"  # 0.5 y (1 + tanh(sqrt(2/pi) (y + 0.044715 y^3)))   (torch approximate="tanh")
    GELU_ERF = "gelu_erf"  # 0.5 y (1 + erf(y / sqrt(2)))                        (torch approximate="none")
    SILU = "silu"  # y / (1 + exp(-y))

    @classmethod
    def parse(cls, text: str) -> "Activation":
        t = str(text).strip().lower().replace("-", "_")
        t = {"gelu": "gelu_tanh", "gelu_approx": "gelu_tanh", "gelu_exact": "gelu_erf", "swish": "silu", "": "none"}.get(t, t)
        return cls(t)

    @property
    def formula(self) -> str:
        return {
            "none": "y",
            "relu": "max(y, 0)",
            "gelu_tanh": "0.5 y (1 + tanh(sqrt(2/pi) (y + 0.044715 y^3)))",
            "gelu_erf": "0.5 y (1 + erf(y / sqrt(2)))",
            "silu": "y / (1 + exp(-y))",
        }[self.value]

    @property
    def derivative(self) -> str:
        """act'(z), the backward step's factor (fusion's ``dact``)."""
        return {
            "none": "1",
            "relu": "1 if z > 0 else 0",
            "gelu_tanh": "0.5 (1 + t) + 0.5 z (1 - t^2) sqrt(2/pi) (1 + 3 x 0.044715 z^2), t = tanh(sqrt(2/pi) (z + 0.044715 z^3))",
            "gelu_erf": "Phi(z) + z phi(z) = 0.5 (1 + erf(z / sqrt(2))) + z exp(-z^2 / 2) / sqrt(2 pi)",
            "silu": "s (1 + z (1 - s)), s = 1 / (1 + exp(-z))",
        }[self.value]

    @property
    def short(self) -> str:
        return {"none": "", "relu": "relu", "gelu_tanh": "gelut", "gelu_erf": "gelue", "silu": "silu"}[self.value]


class BiasAxis(Enum):
    """What a bias vector is indexed by: the output column (length N, like nn.Linear's bias) or the row (length M)."""

    COL = "col"
    ROW = "row"

    @classmethod
    def parse(cls, text: str) -> "BiasAxis":
        t = str(text).strip().lower()
        return cls({"n": "col", "column": "col", "m": "row"}.get(t, t))


class ScaleMode(Enum):
    """FP8 output: q = e4m3(y x scale), scale one f32 for the whole tensor or one per row; amax likewise."""

    TENSOR = "tensor"
    ROW = "row"

    @classmethod
    def parse(cls, text: str) -> "ScaleMode":
        t = str(text).strip().lower()
        return cls({"per_tensor": "tensor", "per_row": "row"}.get(t, t))


class Fp8Blocks(Enum):
    """Block-scaled FP8 on wgmma: none, or DeepSeek's recipes (A: one f32 scale per row per 128 of K; B: one per
    128 x 128 block (1x128x128, DeepGEMM's 1D2D) or one per row of B per 128 of K (1x128x1x128, DeepGEMM's 1D1D, the
    weight-gradient recipe); the partial sums promoted to f32 every 128 of K)."""

    NONE = "none"
    DEEPSEEK = "1x128x128"
    COLUMNS = "1x128x1x128"


class Fp8Stagger(Enum):
    """Block-scaled FP8 with two consumer warpgroups: how their K blocks' wgmma groups are ordered. none: each issues a K
    block as soon as it lands; issue: warpgroup 1 issues block kt after warpgroup 0 has issued it, and warpgroup 0 issues
    kt + 1 after warpgroup 1 has issued kt; complete: warpgroup 1 issues block kt once warpgroup 0's MMAs of kt are
    complete (so one warpgroup promotes while the other's MMAs run); half: each warpgroup commits a K block's MMAs as two
    groups (K-steps of the first and of the second half of the block) and signals after wait_group 1; warpgroup 1 issues
    kt once warpgroup 0's first half of kt is complete, warpgroup 0 issues kt + 1 once warpgroup 1's first half of kt is
    (the two held about half a K block apart)."""

    NONE = "none"
    ISSUE = "issue"
    COMPLETE = "complete"
    HALF = "half"


class Fp8Overlap(Enum):
    """Block-scaled FP8: how a consumer warpgroup overlaps its promotion with MMAs. none: a K block's MMAs into one
    partial fragment, wait_group 0, promote; halves: the MMAs of each column half (m64n(BN/2)) into their own fragment
    and commit group, each half promoted while the other half's group is in flight (wait_group 1), across K blocks;
    interleave: the same two m64n(BN/2) fragments, their MMAs issued alternately per K-step (two independent dependency
    chains) in the K block's one commit group, then wait_group 0 and both promoted (the default loop's order)."""

    NONE = "none"
    HALVES = "halves"
    INTERLEAVE = "interleave"


class Fp8ScaleLoad(Enum):
    """Block-scaled FP8: when a consumer thread loads a K block's scales (two of A, one or two of B) from global memory.
    block: in the K block that uses them (their latency is covered only by the block's own MMAs, and the last MMA's
    issue can wait on them); ahead: one K block ahead, into registers carried across the loop's back edge; smem: a
    warp of the producer warpgroup loads each stage's scales into shared memory beside the stage (counted by its full
    barrier), the consumers read them with ld.shared after the stage has landed; auto (the default): smem where the
    kernel has it (dense, cooperative consumers), else block (TileSpec.scale_load). tma: as smem, but the TMA thread
    copies each stage's A scales with one 2-D box of a tensor map over scale_a (derive.scaled.sfa_tma); the scale warp keeps
    only the B scales. cpasync: as smem, but the scale warp's lanes copy the scales with 4-byte cp.async (zero-filled
    past M and N) and arrive on full[s] with cp.async.mbarrier.arrive.noinc: the warp never waits for a load, so it
    runs up to the ring's depth ahead of the consumers."""

    AUTO = "auto"
    BLOCK = "block"
    AHEAD = "ahead"
    SMEM = "smem"
    TMA = "tma"
    CPASYNC = "cpasync"

    @property
    def staged(self) -> bool:
        """The scales reach the consumers through per-stage shared-memory slots (smem, tma, cpasync)."""
        return self in (Fp8ScaleLoad.SMEM, Fp8ScaleLoad.TMA, Fp8ScaleLoad.CPASYNC)


# e4m3 (OCP FP8, the NVIDIA "fn" variant): largest finite 448, no infinity; cvt.rn.satfinite clamps to +-448.
E4M3_MAX = 448.0
BIAS_DTYPES = (DType.F32, DType.BF16, DType.F16)
GELU_TANH_K0 = 0.7978845608028654  # sqrt(2 / pi)
GELU_TANH_K1 = 0.044715
INV_SQRT2 = 0.7071067811865476
INV_SQRT_2PI = 0.3989422804014327  # 1 / sqrt(2 pi): the normal density's factor (gelu_erf's derivative)
