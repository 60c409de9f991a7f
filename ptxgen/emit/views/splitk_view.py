"""Split-K in C: the K-range statements of the MMA kernel's prologue and the reduction kernel's view, rendered from
the frozen SplitPlan (ptxgen.derive.store.splitk); tests/test_splitk.py runs the statements against the plan."""

from __future__ import annotations

from dataclasses import dataclass

from ...derive.tile.kernel import KernelPlan
from ...derive.store.splitk import REDUCE_THREADS, WORKSPACE_ELEMENT_BYTES, WORKSPACE_VECTOR, SplitPlan
from ...isa.types import DType
from ..cexpr import OUT_CTYPE, convert_c_expr


@dataclass(frozen=True)
class SplitView:
    """The split-K reduction kernel: its name, signature, the constants of its loop, and the f32 -> D conversion."""

    name: str
    signature: str
    abi_doc: tuple[str, ...]
    splits: int
    threads: int
    vector: int
    out_ctype: str
    convert_expr: str
    vector_store: str  # a statement storing s0..s3 (converted) at p as one vector
    doc: str


def k_range_c(split: SplitPlan | None, bk: int) -> tuple[str, ...]:
    """C statements defining num_k_tiles, the K-tiles this CTA multiplies; with split-K also kt_first (its first K-tile:
    SplitPlan.k_range for split k_split = blockIdx.z)."""
    total = f"(K + {bk - 1}) / {bk}"
    if split is None:
        return (f"const int num_k_tiles = {total};",)
    s = split.splits
    return (
        f"const int k_tiles_total = {total};",
        f"const int kt_first = k_split * (k_tiles_total / {s}) + min(k_split, k_tiles_total % {s});  // split k_split of {s}: whole K-tiles, balanced",
        f"const int num_k_tiles = k_tiles_total / {s} + (k_split < k_tiles_total % {s});",
    )


def k_range_prologue_c(split: SplitPlan | None, bk: int) -> tuple[str, ...]:
    """The prologue's K-range statements: k_range_c, and with split-K the split index before them and the workspace
    slice (D advanced by k_split x M x ldd floats) after them."""
    if split is None:
        return k_range_c(None, bk)
    return (("const int k_split = static_cast<int>(blockIdx.z);  // grid z: this CTA's split of K",)
            + k_range_c(split, bk)
            + (f"D += static_cast<size_t>(k_split) * static_cast<size_t>(M) * static_cast<size_t>(ldd) * {WORKSPACE_ELEMENT_BYTES};"
               "  // this split's slice of the f32 workspace",))


def k0_c(split: SplitPlan | None, bk: int) -> str:
    """The first K element of the kt-th K-tile this CTA loads."""
    return f"kt * {bk}" if split is None else f"(kt_first + kt) * {bk}"


def split_view(plan: KernelPlan) -> SplitView | None:
    sp, s, r = plan.split, plan.spec, plan.reduce_abi
    if sp is None:
        return None
    out = s.out_dtype
    if out.bytes == 4:
        store = "*reinterpret_cast<uint4*>(p) = make_uint4(sum_to_out(s0), sum_to_out(s1), sum_to_out(s2), sum_to_out(s3));"
    else:
        store = ("*reinterpret_cast<uint2*>(p) = make_uint2(static_cast<unsigned>(sum_to_out(s0)) | (static_cast<unsigned>(sum_to_out(s1)) << 16), "
                 "static_cast<unsigned>(sum_to_out(s2)) | (static_cast<unsigned>(sum_to_out(s3)) << 16));")
    return SplitView(
        name=r.name,
        signature=", ".join(p.c_decl for p in r.params),
        abi_doc=tuple(r.doc_lines()),
        splits=sp.splits,
        threads=REDUCE_THREADS,
        vector=WORKSPACE_VECTOR,
        out_ctype=OUT_CTYPE[out],
        convert_expr=convert_c_expr(DType.F32, out),
        vector_store=store,
        doc=(f"grid = (ceil(M x ldw / {WORKSPACE_VECTOR} / {REDUCE_THREADS}), 1, 1), block = ({REDUCE_THREADS}, 1, 1): one thread per "
             f"{WORKSPACE_VECTOR} columns of one row; the {sp.splits} partials added in the order 0..{sp.splits - 1}"),
    )
