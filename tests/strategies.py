"""Hypothesis strategies shared by the model tests: legal tile specs over the whole space."""

from hypothesis import assume
from hypothesis import strategies as st

from ptxgen.derive.tile.spec import make_spec
from ptxgen.isa.shapes import legal_bm, legal_bn, legal_swizzles
from ptxgen.isa.types import LEGAL_ACC, Arch, DType, Major, SpecError

INPUT_TYPES = [DType.F16, DType.BF16, DType.TF32, DType.E4M3, DType.E5M2, DType.S8, DType.U8]
RING_OFFSETS = list(range(0, 1024, 128))


@st.composite
def legal_specs(draw, loaders=("tma", "cp.async")):
    """Any legal spec: arch, types, majors, swizzles, tile, atom orders, stages, ring offset and loader."""
    arch = draw(st.sampled_from(list(Arch)))
    dtype = draw(st.sampled_from(INPUT_TYPES))
    acc = draw(st.sampled_from(LEGAL_ACC[dtype]))
    amaj, bmaj = draw(st.sampled_from(list(Major))), draw(st.sampled_from(list(Major)))
    aswz = draw(st.sampled_from(legal_swizzles(arch, dtype, amaj) or (None,)))
    bswz = draw(st.sampled_from(legal_swizzles(arch, dtype, bmaj) or (None,)))
    assume(aswz is not None and bswz is not None)
    try:
        return make_spec(
            bm=draw(st.sampled_from(legal_bm(arch))), bn=draw(st.sampled_from(legal_bn(arch, dtype, bmaj))),
            bk=draw(st.integers(1, 8)) * dtype.k_per_mma, a=f"{amaj.token}-{aswz.value}", b=f"{bmaj.token}-{bswz.value}",
            a_order=draw(st.sampled_from(["mn", "k"])), b_order=draw(st.sampled_from(["mn", "k"])),
            dtype=dtype.value, acc=acc.value, arch=arch.value, stages=draw(st.integers(1, 4)),
            smem_offset=draw(st.sampled_from(RING_OFFSETS)), loader=draw(st.sampled_from(loaders)),
        )
    except SpecError:
        assume(False)


@st.composite
def legal_pair_specs(draw):
    """Any legal CTA-pair spec (--cta-group 2: sm_100a, TMA): types (mixed 8-bit too), majors, swizzles, the pair's
    M and N, atom orders, stages, ring offset and schedule."""
    dtype = draw(st.sampled_from(INPUT_TYPES))
    b_dtype = draw(st.sampled_from({DType.E4M3: [DType.E4M3, DType.E5M2], DType.E5M2: [DType.E5M2, DType.E4M3],
                                     DType.S8: [DType.S8, DType.U8], DType.U8: [DType.U8, DType.S8]}.get(dtype, [dtype])))
    acc = draw(st.sampled_from(LEGAL_ACC[dtype]))
    amaj, bmaj = draw(st.sampled_from(list(Major))), draw(st.sampled_from(list(Major)))
    aswz = draw(st.sampled_from(legal_swizzles(Arch.SM100A, dtype, amaj)))
    bswz = draw(st.sampled_from(legal_swizzles(Arch.SM100A, dtype, bmaj)))
    try:
        return make_spec(
            bm=draw(st.sampled_from(legal_bm(Arch.SM100A, 2))), bn=draw(st.sampled_from(legal_bn(Arch.SM100A, dtype, bmaj, 2))),
            bk=draw(st.integers(1, 8)) * dtype.k_per_mma, a=f"{amaj.token}-{aswz.value}", b=f"{bmaj.token}-{bswz.value}",
            a_order=draw(st.sampled_from(["mn", "k"])), b_order=draw(st.sampled_from(["mn", "k"])),
            dtype=dtype.value, b_dtype=b_dtype.value, acc=acc.value, stages=draw(st.integers(1, 4)),
            smem_offset=draw(st.sampled_from(RING_OFFSETS)), schedule=draw(st.sampled_from(["tile", "persistent"])),
            cta_group=2,
        )
    except SpecError:
        assume(False)
