"""Launching a grouped GEMM (ptxgen.derive.roles.grouped): problem checks, arguments in ABI order, the grid.

Nothing here reads ``offs``: the host knows M_total (A's rows), N, K and G (B's groups), and the kernel finds
each group's rows on the GPU. The tensor maps: A over M_total x K, a K-major B over its (G x N) x K rows (one
matrix), an N-major B (stored G x K x N) as one 3-D map over (N, K, G) with the group as the outer dimension, D over
M_total x N for the TMA-store epilogue. Everything but ``encode`` runs on a CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...derive.tile.kernel import KernelPlan
from ...isa.types import Grouping, Major
from .gpu import KernelArgs
from .launch import MAX_DIM, ROW_ALIGN_BYTES, ProblemError
from .params import MapSlot, ParamBlock, PtrSlot, SlotGroup


GRID_HEADROOM = 1 << 16  # more than any persistent grid (one CTA per SM)


@dataclass(frozen=True)
class GroupedProblem:
    m: int  # M_total: rows of A and D, all groups
    n: int
    k: int
    groups: int
    lda: int
    ldb: int  # B's row stride (elements); K-major: group g's rows start g x N x ldb elements in
    ldd: int
    ldb_group: int = 0  # N-major B: elements between groups (the 3-D map's group stride, >= K x ldb; any gap allowed)
    # block-scaled FP8 (--fp8-blocks with --grouped offs): scale_a's stride between K blocks (>= M), scale_b's between
    # 128-row blocks of B (>= ceil(K/128)) and between groups (>= ceil(N/128) x lds_b); 0 without block scales
    lds_a: int = 0
    lds_b: int = 0
    lds_b_group: int = 0

    def int_value(self, name: str) -> int:
        """An integer kernel parameter by its ABI name."""
        return {"M": self.m, "N": self.n, "K": self.k, "G": self.groups, "ldd": self.ldd, "lds_a": self.lds_a,
                "lds_b": self.lds_b, "lds_b_group": self.lds_b_group}[name]

    def map_value(self, name: str) -> int:
        """A tensor map's extent or stride by its plan name (a K-major B's map is over G x N rows)."""
        return {"M": self.m, "N": self.n, "K": self.k, "G": self.groups, "lda": self.lda, "ldb": self.ldb, "ldd": self.ldd,
                "ldb_group": self.ldb_group, "ldd_group": self.m * self.ldd}[name]  # ldd_group: a K-grouped out[g]'s stride


def grouped_problem_errors(plan: KernelPlan, p: GroupedProblem) -> list[str]:
    """Why the grouped kernel cannot run ``p`` (empty if it can), each naming its rule."""
    spec = plan.spec
    errs = []
    if spec.grouped is Grouping.NONE or plan.grouped is None:
        return [f"{spec.kernel_name} is not a grouped kernel (compile a spec with grouped='offs')"]
    for dim, size in (("M", p.m), ("N", p.n), ("K", p.k), ("G", p.groups)):
        if not 1 <= size <= MAX_DIM:
            errs.append(f"{dim}={size} must be in 1..{MAX_DIM}")
    n_major = spec.b.major is Major.MN
    if p.groups * p.n > MAX_DIM and not n_major:
        errs.append(f"G x N = {p.groups} x {p.n} rows of B's (G N) x K view must fit in an int ({MAX_DIM})")
    items = plan.grouped.max_work_items(p.m, p.groups, p.n)
    if items > MAX_DIM - GRID_HEADROOM:  # a CTA's item index steps past the last item by up to the grid size
        errs.append(f"up to {items} work items (ceil(M / {spec.bm}) + G - 1) x ceil(N / {spec.bn}) must fit in an int")
    esize, osize = spec.dtype.bytes, spec.out_dtype.bytes
    for name, ld in (("a", p.lda), ("b", p.ldb)):
        if name == "a" and spec.a.major is not Major.K:
            errs.append("a must be K-major for a grouped kernel")
        inner, word = (p.n, "N") if name == "b" and n_major else (p.k, "K")
        if ld < inner:
            errs.append(f"ld{name}={ld} is smaller than {word}={inner}")
        if ld * esize % ROW_ALIGN_BYTES:
            errs.append(f"ld{name}={ld} x {esize} B is not a multiple of 16 B: every row must start 16-byte aligned (TMA)")
    if n_major:  # the 3-D map's group stride: the groups apart (any gap) and 16-byte aligned
        if p.groups > 1 and p.ldb_group < p.k * p.ldb:
            errs.append(f"ldb_group={p.ldb_group} is smaller than K x ldb = {p.k} x {p.ldb}: the groups' weights overlap")
        if p.ldb_group * esize % ROW_ALIGN_BYTES:
            errs.append(f"ldb_group={p.ldb_group} x {esize} B is not a multiple of 16 B (the 3-D map's group stride)")
    if spec.fp8_blocks.value != "none":  # the block scales' strides (ptxgen.api.arrays.groupedbind.bind_block_scales)
        kb, nb = -(-p.k // 128), -(-p.n // 128)
        if p.lds_a < p.m or p.lds_b < kb or p.lds_b_group < nb * p.lds_b:
            errs.append(f"block scales need lds_a >= M ({p.lds_a} < {p.m}?), lds_b >= ceil(K/128) ({p.lds_b} < {kb}?) and "
                        f"lds_b_group >= ceil(N/128) x lds_b ({p.lds_b_group} < {nb * p.lds_b}?)")
    return errs + out_errors(p, osize)


def out_errors(p: GroupedProblem, osize: int) -> list[str]:
    """What the output's row pitch breaks: at least N, 16-byte rows (the epilogue stores 16-byte vectors)."""
    errs = []
    if p.ldd < p.n:
        errs.append(f"ldd={p.ldd} is smaller than N={p.n}")
    if p.ldd * osize % ROW_ALIGN_BYTES:
        errs.append(f"ldd={p.ldd} x {osize} B is not a multiple of 16 B (the epilogue stores 16-byte vectors)")
    return errs


def refuse(plan: KernelPlan, p: GroupedProblem, errs: list[str]) -> None:
    """ProblemError naming the kernel, the problem and every broken rule; nothing where ``errs`` is empty."""
    if errs:
        raise ProblemError(f"{plan.spec.kernel_name} cannot run M={p.m} N={p.n} K={p.k} G={p.groups}: " + "; ".join(errs))


def check_grouped_problem(plan: KernelPlan, p: GroupedProblem) -> None:
    refuse(plan, p, grouped_problem_errors(plan, p))


def grouped_geometry(plan: KernelPlan, p: GroupedProblem, sm_count: int) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    """(grid, block, dynamic shared memory bytes): a persistent grid of min(SMs, an upper bound of the items)."""
    abi = plan.abi
    return abi.grouped_grid(p.m, p.n, p.groups, sm_count), abi.block, abi.dynamic_smem_bytes


def _map_dims(plan: KernelPlan, operand: str, p: GroupedProblem) -> tuple[tuple[int, ...], int | tuple[int, int]]:
    tma = plan.tma_plan(operand)
    dims = [p.map_value(d) for d in tma.global_dims]
    if tma.batched:  # an N-major B: one 3-D map over (N, K, G), the group stride its third dimension's
        return tuple(dims), tuple(p.map_value(x) for x in tma.stride_names)
    if operand == "b" and plan.spec.grouped.along_m:  # the G weights as one (G x N) x K matrix: dimension 1 (rows) is G x N
        assert tma.global_dims == ("K", "N"), tma.global_dims
        dims[1] = p.groups * p.n
    return tuple(dims), p.map_value(tma.ld_name)


# pointer parameters carried by another slot: a block-scaled kernel's scales, and C of the K-grouped 1D1D kernel's
# --fuse c, which accumulates in place (C is D: out[g] = out[g] + the product; kgrouped.blockscaled_grouped_gemm_k)
_CARRIED_BY = {"SFA": "scale_a", "SFB": "scale_b", "C": "d"}
# the chain's f32 parameters of that kernel: D = 1 x acc + 1 x C
_ACCUMULATE = {"alpha": 1.0, "beta": 1.0}


def grouped_args(plan: KernelPlan, a_ptr: int, b_ptr: int, offs_ptr: int, d_ptr: int, p: GroupedProblem,
                 encode=None, scale_ptrs: tuple[int, int] = (0, 0)) -> KernelArgs:
    """The grouped kernel's arguments in ABI order (``encode``: default the driver's tensor-map encoder;
    ``scale_ptrs``: scale_a and scale_b of a row-wise or block-scaled (SFA, SFB) kernel)."""
    from .tensormap import encode as driver_encode
    from .tensormap import tensormap_args

    for name, ptr, align in (("A", a_ptr, 16), ("B", b_ptr, 16), ("D", d_ptr, 16), ("offs", offs_ptr, 4)):
        if ptr % align:
            raise ProblemError(f"{name} at {ptr:#x} is not {align}-byte aligned")
    pointers = {"a": a_ptr, "b": b_ptr, "d": d_ptr, "c": d_ptr, "sfa": scale_ptrs[0], "sfb": scale_ptrs[1]}  # C: see _CARRIED_BY
    values = []
    for param in plan.abi.params:
        if param.kind == "tensormap":
            op = param.name[-1]
            dims, ld = _map_dims(plan, op, p)
            values.append(("tensormap", (encode or driver_encode)(tensormap_args(plan.tma_plan(op), pointers[op], dims, ld))))
        elif param.kind == "ptr":
            ptr = pointers[param.name.lower()]
            if param.name in ("SFA", "SFB") and (not ptr or ptr % 4):
                raise ProblemError(f"{param.name} at {ptr:#x}: {plan.spec.kernel_name} needs 4-byte aligned f32 block scales")
            values.append(("ptr", ptr))
        elif param.kind == "i32_ptr":
            values.append(("ptr", offs_ptr))
        elif param.kind == "f32_ptr":
            ptr = scale_ptrs[0] if param.name == "scale_a" else scale_ptrs[1]
            if not ptr or ptr % 4:
                raise ProblemError(f"{param.name} at {ptr:#x}: {plan.spec.kernel_name} needs a 4-byte aligned f32 array")
            values.append(("ptr", ptr))
        elif param.kind == "f32":
            values.append(("f32", _ACCUMULATE[param.name]))
        else:
            values.append(("i32", p.int_value("ldd" if param.name == "ldc" else param.name)))
    return KernelArgs(values)


def build_grouped_params(plan: KernelPlan, p: GroupedProblem, encode) -> tuple[ParamBlock, dict]:
    """The pre-packed parameter block for problem ``p`` (every integer written, no pointer yet) and the slot that
    carries each pointer: ``a``, ``b``, ``d`` (a tensor map, a raw pointer or a group of both), ``offs``, and
    ``scale_a``/``scale_b`` for a row-wise scaled kernel. A map is encoded by ``encode`` when its pointer is set
    (``runtime.launch.params.MapSlot``: cached per pointer). The bytes equal :func:`grouped_args`' for the same pointers."""
    from .tensormap import tensormap_args

    params = plan.abi.params
    block = ParamBlock([q.kind if q.kind not in ("i32_ptr", "f32_ptr") else "ptr" for q in params])
    slots: dict = {}
    for i, q in enumerate(params):
        if q.kind == "tensormap":
            op = q.name[-1]
            dims, ld = _map_dims(plan, op, p)
            slots.setdefault(op, []).append(MapSlot(block, i, tensormap_args(plan.tma_plan(op), 0, dims, ld), encode))
        elif q.kind == "ptr":  # D, or a block-scaled kernel's SFA / SFB (carried as scale_a / scale_b)
            slots.setdefault(_CARRIED_BY.get(q.name, q.name.lower()), []).append(PtrSlot(block, i))
        elif q.kind == "i32_ptr":
            slots.setdefault("offs", []).append(PtrSlot(block, i))
        elif q.kind == "f32_ptr":
            slots.setdefault(q.name, []).append(PtrSlot(block, i))
        elif q.kind == "f32":
            block.set(i, _ACCUMULATE[q.name])
        else:
            block.set(i, p.int_value("ldd" if q.name == "ldc" else q.name))
    missing = {"a", "b", "d", "offs"} - set(slots)
    if missing:
        raise ValueError(f"{plan.abi.name}: no parameter carries {', '.join(sorted(missing))}")
    return block, {name: group[0] if len(group) == 1 else SlotGroup(group) for name, group in slots.items()}
