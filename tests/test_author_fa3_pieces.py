"""The pieces ptxgen.author gained for attention (docs/authoring.md, "Attention with this layer"): a ring with a
resident operand, a full barrier per operand and named barriers; N-d tensor maps with their L2 promotion; optional
pointers; PreparedLaunch with a fake driver; Values. Expected values are written by hand from the rules the doc
states (offsets, strides), each refusal names its rule, and each check has a control that must fail."""

import pytest

from ptxgen.author import (ArgumentError, AuthorError, Operand, Param, PreparedLaunch, Ring, SpecError, Values, parse_operand)


class FakeDeviceArray:
    """Only what the argument reader takes (no memory behind it): ``__cuda_array_interface__`` with byte strides."""

    def __init__(self, shape, dtype="bfloat16", strides=None, ptr=1 << 20, itemsize=2):
        self.shape, self.dtype = shape, dtype
        self.__cuda_array_interface__ = {"shape": shape, "typestr": f"<V{itemsize}", "data": (ptr, False), "version": 3,
                                         "strides": strides}


class FakeDriver:
    def __init__(self):
        self.encoded, self.launches = [], []

    def encode(self, args):
        self.encoded.append(args)
        return bytes([len(self.encoded)]) * 128

    def launch(self, *args):
        self.launches.append(args)
        return 0


def fa3_operands(d=128, bm=128, bn=128):
    q = Operand("Q", "k", "sw128", "bf16", bm, d, "a", order="mn").plan()
    k = Operand("K", "k", "sw128", "bf16", bn, d, order="mn").plan()
    v = Operand("V", "mn", "sw128", "bf16", d, bn, order="k").plan()
    return q, k, v


def test_fa3_ring_by_hand():
    """Q (128 x 64 bf16 = 16 KB) once at 0; K and V (128 x 64 = 16 KB) three stages each from 16 KB; the barriers
    after V's last stage at 16 K + 6 x 16 K = 112 KB: Q_full, full_K[3], full_V[3], empty[3], then the named ones."""
    q, k, v = fa3_operands(d=64)
    r = Ring(stages=3, operands=(k, v), resident=(q,), full_per_operand=True, consumer_warpgroups=2, empty_arrivals=8,
             barriers=("s_full", "o_ready"), words=("slot",)).plan()
    kb = 1024
    assert [(r.regions[n].offset_bytes, r.regions[n].stage_stride_bytes) for n in "QKV"] == [(0, 16 * kb), (16 * kb, 16 * kb),
                                                                                            (64 * kb, 16 * kb)]
    assert r.barriers_offset_bytes == 112 * kb
    assert {n: r.bar_offset(n) for n in r.bars} == {"Q_full": 0, "full_K": 8, "full_V": 32, "empty": 56, "s_full": 80,
                                                     "o_ready": 88, "slot": 96}
    assert r.used_bytes == 112 * kb + 104 and r.dynamic_smem_bytes == r.used_bytes + 1008
    assert r.expect_tx == {"Q_full": 16 * kb, "full_K": 16 * kb, "full_V": 16 * kb} and r.empty_arrivals == 8
    assert r.full_bar("s", "V") == f"(base + {112 * kb + 32}u + static_cast<unsigned>(s) * 8u)"
    assert r.bar("s_full") == f"(base + {112 * kb + 80}u)"
    # the plain ring keeps its one full barrier per stage and one arrival per consumer warpgroup
    plain = Ring(stages=3, operands=(k, v), consumer_warpgroups=2).plan()
    assert set(plain.bars) == {"full", "empty"} and plain.expect_tx == {"full": 32 * kb} and plain.empty_arrivals == 2


def test_empty_barrier_per_operand_by_hand():
    """empty_per_operand: K's three empty barriers, then V's, where the one shared set was (Q_full 0, full_K 8,
    full_V 32, empty_K 56, empty_V 80); empty_bar names them per operand; the one-set ring (the control) has neither."""
    q, k, v = fa3_operands(d=64)
    r = Ring(stages=3, operands=(k, v), resident=(q,), full_per_operand=True, empty_per_operand=True, consumer_warpgroups=2,
             empty_arrivals=8).plan()
    kb = 1024
    assert {n: r.bar_offset(n) for n in r.bars} == {"Q_full": 0, "full_K": 8, "full_V": 32, "empty_K": 56, "empty_V": 80}
    assert r.empty_bar("s", "K") == f"(base + {112 * kb + 56}u + static_cast<unsigned>(s) * 8u)"
    assert r.empty_bar("s", "V") == f"(base + {112 * kb + 80}u + static_cast<unsigned>(s) * 8u)"
    assert r.empty_bar("s") == r.empty_bar("s", "K")  # the first operand's stands for the ring's
    one = Ring(stages=3, operands=(k, v), resident=(q,), full_per_operand=True, consumer_warpgroups=2).plan()
    assert "empty" in one.bars and not {"empty_K", "empty_V"} & set(one.bars)


def test_resident_stage_expressions_walk_the_stages_in_turn():
    """resident_stages=2 (a persistent walk's two Q buffers): round t uses stage t % 2; its full wait is for the
    parity of that stage's (t / 2)-th fill; the producer of round t >= 2 waits for the release of round t - 2's fill,
    which completed the empty barrier's phase that round t - 2 began. One stage: stage 0, parity t & 1. Evaluated as C
    integer expressions over rounds 0..11, against those rules written out here."""
    q, k, v = fa3_operands(d=64)

    def at(expr, t):
        return eval(expr.replace("/", "//"), {}, {"tcount": t})  # noqa: S307 - our own C of non-negative ints

    two = Ring(stages=2, operands=(k, v), resident=(q,), resident_stages=2, resident_release=True,
               consumer_warpgroups=2).plan()
    one = Ring(stages=2, operands=(k, v), resident=(q,), resident_release=True, consumer_warpgroups=2).plan()
    fills = {0: 0, 1: 0}  # completed fills of each stage before a round's own
    for t in range(12):
        b = t % 2
        assert at(two.resident_stage_of("tcount"), t) == b and at(two.resident_phase_of("tcount"), t) == fills[b] & 1
        if t >= 2:
            assert at(two.resident_release_phase_of("tcount"), t) == (fills[b] - 1) & 1
        assert at(two.resident_stage_of("tcount + 1"), t) == (t + 1) % 2
        assert at(one.resident_stage_of("tcount"), t) == 0 and at(one.resident_phase_of("tcount"), t) == t & 1
        fills[b] += 1


@pytest.mark.parametrize("kw, field", [
    (dict(empty_arrivals=9), "empty_arrivals"), (dict(empty_arrivals=0), "empty_arrivals"),
    (dict(barriers=("K",)), "ring names"), (dict(barriers=("x",), words=("x",)), "ring names"),
    (dict(stages=4, resident=("big",)), "stages"),
])
def test_fa3_ring_refusals_name_the_rule(kw, field):
    q, k, v = fa3_operands()
    if kw.get("resident") == ("big",):  # Q 32 KB + 4 x (32 + 32) KB: more than 227 KB
        kw["resident"] = (q,)
    with pytest.raises(SpecError) as e:
        Ring(**{"stages": 2, "operands": (k, v), "consumer_warpgroups": 2, **kw}).plan()
    assert e.value.field == field


def test_start_field_and_descriptors_make_desc_expr():
    """descriptors[j] + start_field(addr) is desc_expr(addr, j) for every K step (evaluated at a stage address)."""
    from tests.test_author import c_eval

    v = parse_operand("V:mn-sw128:bf16:128x64").plan()
    addr = 0x9400
    field = c_eval(v.start_field("addr"), addr=addr)
    assert field == (addr >> 4) & 0x3FFF
    for j, d in enumerate(v.descriptors):
        assert d == v.descriptor(j).encode()
        assert d + field == c_eval(v.desc_expr("addr", j), addr=addr)
    assert len(set(v.descriptors)) == len(v.descriptors)  # control: the steps differ


def test_nd_map_of_a_transposed_view_by_hand():
    """(B, S, H, D) = (2, 300, 8, 64) bf16 storage read as (B, H, S, D): dims (64, 300, 8, 2), strides in bytes
    (8 x 64 x 2, 64 x 2, 300 x 8 x 64 x 2), box (64, 128, 1, 1); 128-byte L2 promotion when the Param asks for it."""
    from ptxgen.author.launch import map_args
    from ptxgen.runtime.launch.arrays import read_array

    q = Operand("Q", "k", "sw128", "bf16", 128, 64, "a").plan()
    b, s, h, d = 2, 300, 8, 64
    x = FakeDeviceArray((b, h, s, d), strides=(s * h * d * 2, d * 2, h * d * 2, 2))
    args = map_args(read_array(x, "q"), Param("tmap_q", "tensormap", operand=q, l2_promotion_bytes=128))
    assert (args.rank, args.global_dims, args.global_strides) == (4, (d, s, h, b), (h * d * 2, d * 2, s * h * d * 2))
    assert args.box == (64, 128, 1, 1) and args.element_strides == (1, 1, 1, 1) and args.l2_promotion == 2
    default = map_args(read_array(x, "q"), Param("tmap_q", "tensormap", operand=q))
    assert default.l2_promotion == q.tma.l2_promotion
    # a head of one row: its stride is never used, so any value passes; a misaligned used stride is refused
    one = FakeDeviceArray((b, 1, s, d), strides=(s * d * 2, 6, d * 2, 2))
    assert map_args(read_array(one, "q"), Param("t", "tensormap", operand=q)).global_dims == (d, s, 1, b)
    with pytest.raises(ArgumentError, match="multiple of 16"):
        map_args(read_array(FakeDeviceArray((b, h, s, d), strides=(s * h * d * 2, d * 2, 136, 2)), "q"),
                 Param("t", "tensormap", operand=q))
    with pytest.raises(ArgumentError, match="contiguous"):
        map_args(read_array(FakeDeviceArray((b, h, s, d), strides=(s * h * d * 4, d * 4, h * d * 4, 4)), "q"),
                 Param("t", "tensormap", operand=q))


def test_param_refusals():
    q = Operand("Q", "k", "sw128", "bf16", 128, 64, "a").plan()
    with pytest.raises(AuthorError, match="L2 promotion"):
        Param("t", "tensormap", operand=q, l2_promotion_bytes=96)
    with pytest.raises(AuthorError, match="L2 promotion"):
        Param("n", "i32", l2_promotion_bytes=128)
    with pytest.raises(AuthorError, match="null pointer"):
        Param("n", "i32", optional=True)


def test_prepared_launch_with_a_fake_driver():
    """Maps encoded once per pointer, an optional pointer left out is 0, scalars packed, one launch with the block."""
    q = Operand("Q", "k", "sw128", "bf16", 128, 64, "a").plan()
    params = (Param("tmap_q", "tensormap", operand=q), Param("lse", "ptr", dtype="f32", const=False, optional=True),
              Param("n", "i32"), Param("scale", "f32"))
    x = FakeDeviceArray((2, 8, 300, 64))
    drv = FakeDriver()
    prep = PreparedLaunch.of(params, (x, None, 300, 0.5), driver=drv)
    assert drv.encoded == []  # pointers are written by point()
    prep.point(0, 1 << 20)
    prep.point(0, 1 << 20)
    prep.point(1, None)
    assert len(drv.encoded) == 1 and drv.encoded[0].global_address == 1 << 20 and drv.encoded[0].rank == 4
    vals = prep.block.read_back()
    assert vals[1:] == [0, 300, 0.5]
    prep.point(1, 4096)
    assert prep.block.read_back()[1] == 4096
    assert prep.launch(7, (3, 8, 2), (384,), 1000, 5) == 0
    assert drv.launches == [(7, 3, 8, 2, 384, 1, 1, 1000, 5, prep.address, None)]
    with pytest.raises(ArgumentError, match="takes 4 arguments"):
        PreparedLaunch.of(params, (x, None, 300), driver=drv)


def test_values_are_frozen():
    v = Values(a=1, q={"b": [1, 2]})
    assert v.a == 1 and v.q.b == (1, 2) and "q" in v and v["a"] == 1
    with pytest.raises(AttributeError):
        v.a = 2
    with pytest.raises(AttributeError):
        _ = v.missing
    with pytest.raises(AuthorError, match="frozen"):
        Values(s={1, 2})


def test_load_checks_the_arch_and_passes_the_device_index(monkeypatch):
    """BuiltKernel.load(i) asks for GPU i, refuses one of another arch (NoGPU naming both), and loads the cubin once per
    device (fakes stand for the driver: no GPU needed)."""
    from types import SimpleNamespace

    from ptxgen.api.launch import streams
    from ptxgen.author import Arch, BuiltKernel, Kernel, NoGPU
    from ptxgen.runtime.launch import gpu

    asked, loaded = [], []
    devices = {0: SimpleNamespace(arch=Arch.SM90A, name="H100"), 1: SimpleNamespace(arch=Arch.SM100A, name="B200")}
    monkeypatch.setattr(streams, "require_gpu", lambda i=None: asked.append(i) or devices[i])
    monkeypatch.setattr(streams, "ensure_current", lambda dev: None)
    monkeypatch.setattr(gpu, "Kernel", lambda cubin, name, smem: loaded.append((name, smem)) or SimpleNamespace(func=1234))
    k = Kernel("k", "x", (), (128, 1, 1), 4096, {"HGMMA": 1})
    built = BuiltKernel(k, "x", SimpleNamespace(compiled=SimpleNamespace(ptx="", cubin=b"", log=""), hit=True))
    assert built.load(0) == 1234 and built.load(0) == 1234
    assert asked == [0] and loaded == [("k", 4096)]
    with pytest.raises(NoGPU, match="built for sm_90a; the GPU \\(B200\\) runs sm_100a"):
        built.load(1)
