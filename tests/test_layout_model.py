"""Pure math tier, L1: the writer (store table + descriptors) against the independent read model.

For every legal spec, a random tile written through the store table and read back through each
K-step descriptor (and each wgmma slab) must be exactly the tile's K-slices. Exhaustive over a small
grid, hypothesis over the whole legal space, plus controls that show the check can fail.
"""

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptxgen.model.layouts import readmodel
from ptxgen.isa.descriptors import SmemDescriptor
from ptxgen.derive.tile.layout import derive
from strategies import legal_specs

from ptxgen.derive.tile.spec import make_spec
from ptxgen.isa.shapes import legal_swizzles
from ptxgen.isa.types import LEGAL_ACC, Arch, DType, Major, SpecError
from ptxgen.model.bridges.verify import check_tile, random_tile, write_stage

# ---- the seed post's numbers --------------------------------------------------------------------


def test_seed_numbers():
    t = derive(make_spec(bm=128, bn=128, bk=32, a="kmajor-sw64"))
    a, b = t.a, t.b
    assert (a.sbo_bytes, a.lbo_bytes // 16, a.layout_type, a.alignment_bytes) == (512, 1, 4, 512)
    assert [s.start_offset_bytes for s in a.k_steps] == [0, 32]
    assert (b.lbo_bytes, b.sbo_bytes, b.layout_type, b.alignment_bytes) == (1024, 2048, 2, 1024)


def test_seed_store_table_is_the_seed_formula():
    """addr(band, r, q) = band*SBO + r*64 + (q ^ ((r >> 1) & 3))*16, from the seed post."""
    t = derive(make_spec(bm=128, bn=128, bk=32, a="kmajor-sw64"))
    cells = t.a.store.table()
    for m in range(128):
        band, r = divmod(m, 8)
        for q in range(4):
            assert cells[m][q] == band * 512 + r * 64 + (q ^ ((r >> 1) & 3)) * 16


def test_seed_remarks():
    # BK=64 with SW64: two K atoms per 8-row band, SBO 1024; with SW128: one atom, SBO 1024 too
    assert derive(make_spec(bm=128, bn=128, bk=64, a="kmajor-sw64")).a.sbo_bytes == 1024
    assert derive(make_spec(bm=128, bn=128, bk=64, a="kmajor-sw128")).a.sbo_bytes == 1024
    # N-major B: SBO = (BN / 64) x 1024
    for bn in (64, 128, 192, 256):
        assert derive(make_spec(bm=128, bn=bn, bk=32, a="kmajor-sw64")).b.sbo_bytes == bn // 64 * 1024


# ---- structural properties of the store table ---------------------------------------------------


def _some_specs():
    yield make_spec(bm=128, bn=128, bk=32, a="kmajor-sw64")
    yield make_spec(bm=64, bn=256, bk=128, a="mnmajor-sw32", b="kmajor-none", a_order="k", dtype="e4m3")
    yield make_spec(bm=128, bn=64, bk=32, a="kmajor-sw128", b="mnmajor-sw128b32", dtype="tf32")
    yield make_spec(bm=192, bn=96, bk=64, a="mnmajor-sw64", b="mnmajor-none", arch="sm_90a", b_order="k")


@pytest.mark.parametrize("spec", list(_some_specs()), ids=lambda s: s.kernel_name)
def test_store_table_is_a_permutation_of_the_stage(spec):
    t = derive(spec)
    for op in (t.a, t.b):
        offs = np.array(op.store.table()).ravel()
        assert offs.size * 16 == op.stage_bytes
        assert np.array_equal(np.sort(offs), np.arange(0, op.stage_bytes, 16))


# ---- writer vs reader --------------------------------------------------------------------------


def _tokens(arch, dtype, major):
    return [f"{major.token}-{s.value}" for s in legal_swizzles(arch, dtype, major)]


def small_grid():
    for arch, dtype in itertools.product(Arch, [DType.F16, DType.TF32, DType.E4M3, DType.S8]):
        acc = LEGAL_ACC[dtype][0].value
        bk = 128 // dtype.bytes  # 128 B of K: every K-major swizzle fits
        for amaj, bmaj in itertools.product(Major, Major):
            for a, b in itertools.product(_tokens(arch, dtype, amaj), _tokens(arch, dtype, bmaj)):
                for ao, bo in itertools.product(("mn", "k"), ("mn", "k")):
                    try:
                        yield make_spec(bm=128, bn=64, bk=bk, a=a, b=b, a_order=ao, b_order=bo,
                                        dtype=dtype.value, acc=acc, arch=arch.value, loader="cp.async")
                    except SpecError:
                        continue


SMALL = list(small_grid())


def test_small_grid_covers_the_space():
    seen = {(s.arch, s.dtype, s.a.major, s.a.swizzle, s.b.major, s.b.swizzle, s.a.order, s.b.order) for s in SMALL}
    assert len(SMALL) > 500 and len(seen) == len(SMALL)
    assert {s.a.swizzle.value for s in SMALL} == {"none", "sw32", "sw64", "sw128", "sw128b32"}


@pytest.mark.parametrize("shard", range(4))  # four shards, so parallel workers share the grid
def test_writer_and_reader_agree_exhaustively_on_a_small_grid(shard):
    failures = [(s.kernel_name, p) for s in SMALL[shard::4] for p in check_tile(derive(s), seed=1)]
    assert not failures, failures[:5]


# 100 random legal specs in every run (the grid above is exhaustive on its part of the space), 600 in the slow tier
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(spec=legal_specs(), seed=st.integers(0, 2**32 - 1))
def test_writer_and_reader_agree_on_any_legal_spec(spec, seed):
    assert check_tile(derive(spec), seed=seed) == []


@pytest.mark.slow
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(spec=legal_specs(), seed=st.integers(0, 2**32 - 1))
def test_writer_and_reader_agree_on_any_legal_spec_long(spec, seed):
    assert check_tile(derive(spec), seed=seed) == []


# ---- controls: the check can fail -------------------------------------------------------------


def _read_step(t, op, desc):
    tile = random_tile(op, np.random.default_rng(0))
    img = write_stage(op, tile, image_bytes=4 * op.stage_bytes)  # room for a wrong descriptor to read past the stage
    got = readmodel.read(t.spec.arch.value, desc.encode(), op.major.value, op.mma_mn, op.dtype.value, img)
    return got, tile[: op.mma_mn, : t.spec.k_per_mma]


@pytest.mark.parametrize("mutation", ["sbo", "lbo", "swizzle", "start"])
def test_a_wrong_descriptor_is_caught(mutation):
    t = derive(make_spec(bm=128, bn=128, bk=64, a="kmajor-sw64", b="mnmajor-sw128"))
    op = t.b if mutation == "lbo" else t.a
    d = op.k_steps[0].descriptor
    wrong = {
        "sbo": SmemDescriptor(d.arch, d.start_address_bytes, d.lbo_bytes, d.sbo_bytes * 2, d.swizzle),
        "lbo": SmemDescriptor(d.arch, d.start_address_bytes, d.lbo_bytes + 2048, d.sbo_bytes, d.swizzle),
        "swizzle": SmemDescriptor(d.arch, d.start_address_bytes, d.lbo_bytes, d.sbo_bytes, d.swizzle.__class__("sw128")),
        "start": d.with_start(d.start_address_bytes + 16),
    }[mutation]
    got, want = _read_step(t, op, d)
    assert np.array_equal(got, want)
    got, want = _read_step(t, op, wrong)
    assert not np.array_equal(got, want)


def test_base_offset_rule_matters():
    """With the stage off its repeat boundary, only the measured rule reads back what was written."""
    t = derive(make_spec(bm=128, bn=128, bk=64, a="kmajor-sw128", smem_offset=384, loader="cp.async"))
    op = t.a
    assert op.base_offset == 3
    tile = random_tile(op, np.random.default_rng(0))
    img = write_stage(op, tile, base=384)
    d = op.k_steps[0].descriptor
    desc = d.with_start(d.start_address_bytes + 384).encode()
    want = tile[:, :16]
    read = lambda rule: readmodel.read("sm_100a", desc, "k", 128, "f16", img, rule=rule)  # noqa: E731
    assert np.array_equal(read("subtract"), want)
    assert not np.array_equal(read("ignored"), want)
    assert not np.array_equal(read("add"), want)
