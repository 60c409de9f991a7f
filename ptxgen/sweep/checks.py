"""The sweep's L1 checks of a configuration's stores, beyond the read model (ptxgen.sweep.run_config runs them): the
CTA pair's TMA store, an M-major D, f32 through the wgmma TMA store, C through TMA and the pair writers, each through
the independent models of ptxgen.model."""

from __future__ import annotations

from ..derive.tile.spec import TileSpec
from ..isa.types import Epilogue


def store_problems(spec: TileSpec) -> list[str]:
    """Every store check that applies to ``spec`` (an empty list: none found a problem, or none applies)."""
    return (_pair_store_problems(spec) + _store_epilogue_problems(spec) + _m_major_store_problems(spec)
            + _f32_store_problems(spec))


def _pair_store_problems(spec: TileSpec) -> list[str]:
    """A CTA pair's TMA-store epilogue through the pair model's TMEM placement and the TMA model (L1)."""
    if not spec.pair or spec.epilogue is not Epilogue.TMA:
        return []
    from ..derive.store.epilogue import plan_store
    from ..model.bridges.check_store import check_pair_store_plan

    return check_pair_store_plan(plan_store(spec), spec.bm, spec.bn)


def _m_major_store_problems(spec: TileSpec) -> list[str]:
    """An M-major D through the TMA store (stmatrix.trans, D's map over the user's row-major D) at L1: every element once
    at its address over a problem whose last tiles pass M (M % 8 != 0: those take the direct stores) and N."""
    if spec.epilogue is not Epilogue.TMA or spec.d_major.value != "m":
        return []
    from ..derive.tile.kernel import plan_kernel
    from ..model.bridges.check_mstore import check_m_major_store

    plan = plan_kernel(spec)
    m, n = spec.bm + 5, spec.bn + 3
    return check_m_major_store(plan.store, plan.direct, spec.bm, spec.bn, m, n, -(-m // 8) * 8)


def _f32_store_problems(spec: TileSpec) -> list[str]:
    """f32 through the wgmma TMA store (st.shared.v2.f32) at L1: every element of D once at its address over two problems
    whose last tiles pass M and N (N % 4 != 0: the crossing tile takes the direct stores; N % 4 == 0: through TMA, clipped)."""
    if spec.epilogue is not Epilogue.TMA or spec.out_dtype.value != "f32" or spec.arch.value != "sm_90a":
        return []
    from ..derive.tile.kernel import plan_kernel
    from ..model.bridges.check_store import check_tma_store_problem

    plan = plan_kernel(spec)
    m = spec.bm + 5
    return [p for n in (spec.bn + 3, spec.bn + 4)
            for p in check_tma_store_problem(plan.store, plan.direct, spec.bm, spec.bn, m, n, -(-n // 4) * 4 + 4)]


def _store_epilogue_problems(spec: TileSpec) -> list[str]:
    """C through TMA (--fuse c=tma: which C element each accumulator element receives, the c_full order) and e4m3 through
    the wgmma TMA store (the pair stores against the TMA read model), at L1."""
    if spec.epilogue is not Epilogue.TMA or spec.fuse is None:
        return []
    from ..derive.tile.kernel import plan_kernel

    plan = plan_kernel(spec)
    problems = []
    if plan.c_load is not None:
        from ..model.bridges.check_cload import check_c_order, check_c_reads, check_c_reads_tmem

        m, n = spec.bm * 2 + 5, spec.bn * 2 + 8  # the last tile past M and N
        if plan.store.wgmma:
            problems += check_c_reads(plan.c_load, plan.store, spec.bn, m, n, spec.bm, spec.bn, spec.bm - 64)
        else:
            problems += check_c_reads_tmem(plan.c_load, plan.store, spec.bn, m, n, spec.bm, spec.bn)
        problems += check_c_order(plan.c_load, plan.store, chunks=2 * plan.store.chunks_per_slab + 1)
    if plan.store.pair_writer:  # e4m3 (st.shared.b16) or f32 (st.shared.v2.f32)
        from ..model.bridges.check_store import check_store_plan

        problems += check_store_plan(plan.store, spec.bn)
    return problems
