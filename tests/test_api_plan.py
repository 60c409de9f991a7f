"""``ptxgen.api.plan`` on a machine with no GPU: array-likes that expose only ``__cuda_array_interface__`` metadata.

Controls: an illegal call is refused with its rule, a narrow call reported narrow, a packed call packed, the plain call
hot. Agreement: the real doors (``ptxgen.gemm``, ``ptxgen.grouped_gemm``, ``fp8blocks.gemm``, the fused door) are run on
a simulated H100 up to the point where they ask for the kernel of the spec they chose; that spec (and whether the door
packed first) must be the plan's. The plan never reaches those calls: it is made with no GPU at all.

``CupyArray`` stands for a CuPy array (its type's module is ``cupy``): the doors copy only torch tensors and CuPy arrays,
and refuse other libraries' arrays that no kernel reads as they are.
"""

from __future__ import annotations

import pytest

import ptxgen
import ptxgen.api.launch.streams as streams
from ptxgen.api.callplan import DEVICES, Path
from ptxgen.runtime.launch.arrays import ArgumentError, _contiguous_strides
from ptxgen.runtime.launch.gpu import Device, NoGPU

SIZES = {"bfloat16": 2, "float16": 2, "float32": 4, "float8_e4m3fn": 1, "float8_e5m2": 1, "int32": 4}
F8, E5, F32, I32 = "float8_e4m3fn", "float8_e5m2", "float32", "int32"
_HEAP = [0x10000000]


class DevArray:
    """A device array as far as ptxgen can tell: __cuda_array_interface__ v3 at a made-up address, no GPU behind it."""

    def __init__(self, shape, dtype="bfloat16", strides=None, ptr=None):
        size = SIZES[dtype]
        if ptr is None:
            ptr, _HEAP[0] = _HEAP[0], _HEAP[0] + 0x10000000
        self.dtype, self.shape = dtype, tuple(shape)
        self.strides_elems = tuple(strides) if strides is not None else _contiguous_strides(self.shape)
        self.__cuda_array_interface__ = {
            "shape": self.shape, "typestr": "<i4" if dtype == I32 else {1: "|u1", 2: "<f2", 4: "<f4"}[size],
            "data": (ptr, False), "version": 3, "stream": None, "strides": tuple(s * size for s in self.strides_elems)}

    def __dlpack_device__(self):
        return (2, 0)

    @property
    def ptr(self):
        return self.__cuda_array_interface__["data"][0]

    def t(self):
        """The transposed view (same memory)."""
        return type(self)(self.shape[::-1], self.dtype, self.strides_elems[::-1], self.ptr)


class CupyArray(DevArray):
    pass


CupyArray.__module__ = "cupy"


def plan(*args, **kw):
    kw.setdefault("device", "h100")
    return ptxgen.api.plan(*args, **kw)


# ---- controls -------------------------------------------------------------------------------------------------------
def test_the_plain_call_is_hot():
    p = plan("gemm", DevArray((3000, 7000)), DevArray((5000, 7000)), DevArray((3000, 5000)))
    assert p.path is Path.HOT and p.error is None and p.packed == ()
    assert p.kernel == p.spec.kernel_name and p.spec.dtype.value == "bf16" and p.spec.loader.value == "tma"
    assert (p.device, p.arch, p.sm_count) == ("h100", "sm_90a", 132)
    assert p.to_json()["path"] == "hot" and "hot" in str(p)


@pytest.mark.parametrize("op, args, error, rule", [
    ("gemm", lambda: (DevArray((64, 64)), DevArray((64, 64), "float16"), DevArray((64, 64))), "DTypeError", "both inputs have one type"),
    ("gemm", lambda: (DevArray((64, 64)), DevArray((64, 32)), DevArray((64, 64))), "ArgumentError", "both must have K"),
    ("gemm", lambda: (DevArray((64, 64)), DevArray((64, 64))), "ArgumentError", "pass out="),
    ("gemm", lambda: (DevArray((64, 10)), DevArray((64, 10)), DevArray((64, 64))), "ArgumentError", "16-byte aligned"),
    ("grouped_gemm", lambda: (DevArray((700, 256)), DevArray((5, 300, 256)), DevArray((4,), I32), DevArray((700, 304))),
     "ArgumentError", "offs has 4 values but b has 5 groups"),
    ("blockscaled_grouped_gemm", lambda: (DevArray((700, 256), F8), DevArray((5, 300, 256), E5), DevArray((700, 2), F32, (1, 700)),
                                          DevArray((5, 2, 3), F32), DevArray((5,), I32), DevArray((700, 304))),
     "DTypeError", "block-scaled FP8 takes e4m3 A and B"),
    ("fp8blocks.gemm", lambda: (DevArray((384, 1280), F8), DevArray((256, 1280), F8), DevArray((384, 10), F32, (1, 384)),
                                DevArray((11, 2), F32, (1, 12)), DevArray((384, 256))),
     "ArgumentError", r"scale_b has shape \(11, 2\); it must be \(10, 2\) or torch's padded \(12, 2\)"),
])
def test_an_illegal_call_is_refused_with_its_rule(op, args, error, rule):
    import re

    p = plan(op, *args())
    assert p.path is Path.REFUSED and p.error == error and re.search(rule, p.why), p.why
    assert p.kernel is None and p.spec is None


def test_a_narrow_call_is_reported_narrow():
    # rows 10 bf16 = 20 B apart: only 4-byte aligned; CuPy arrays: the cp.async kernel with 4-byte copies reads them
    p = plan("gemm", CupyArray((64, 10)), CupyArray((64, 10)), CupyArray((64, 64)))
    assert p.path is Path.NARROW and p.spec.loader.value == "cp.async" and p.spec.copy_bytes == 4
    p8 = plan("gemm", CupyArray((64, 12)), CupyArray((64, 12)), CupyArray((64, 64)))
    assert p8.path is Path.NARROW and p8.spec.copy_bytes == 8
    # the control: 16-byte rows are not narrow
    assert plan("gemm", CupyArray((64, 16)), CupyArray((64, 16)), CupyArray((64, 64))).path is Path.HOT


def test_a_packed_call_is_reported_packed():
    # a transposed float32 operand: wgmma reads tf32 only K-major, so a CuPy array is copied K-major first
    p = plan("gemm", CupyArray((128, 64), F32).t(), CupyArray((96, 128), F32), CupyArray((64, 96), F32))
    assert p.path is Path.PACKED and p.packed == (("a", "the tensor cores read this type only K-major"),)
    assert p.spec.a.major.value == "k" and p.spec.dtype.value == "tf32"
    # the control: the same array of another library is refused (nothing copies it), with the majorness rule
    r = plan("gemm", DevArray((128, 64), F32).t(), DevArray((96, 128), F32), DevArray((64, 96), F32))
    assert r.path is Path.REFUSED and "tf32" in r.why and "K-major" in r.why


def test_grouped_paths():
    offs = DevArray((5,), I32)
    hot = plan("grouped", CupyArray((700, 256)), CupyArray((5, 300, 256)), offs, CupyArray((700, 300), strides=(304, 1)))
    assert hot.path is Path.HOT and hot.spec.grouped.value == "offs"
    m_major = plan("grouped", CupyArray((256, 700)).t(), CupyArray((5, 300, 256)), offs, CupyArray((700, 300), strides=(304, 1)))
    assert m_major.path is Path.PACKED and m_major.packed[0][0] == "a" and "not K-major" in m_major.packed[0][1]
    assert m_major.spec == hot.spec
    gaps = plan("grouped", CupyArray((700, 256)), CupyArray((5, 300, 256), strides=(2 * 300 * 256, 256, 1)), offs,
                CupyArray((700, 300), strides=(304, 1)))
    assert gaps.path is Path.PACKED and [n for n, _ in gaps.packed] == ["b"] and "no gap" in gaps.packed[0][1]
    f32 = plan("grouped", CupyArray((700, 256), F32), CupyArray((5, 300, 256), F32), offs, CupyArray((700, 300), F32))
    assert f32.path is Path.HOT and f32.spec.dtype.value == "tf32" and f32.spec.out_dtype.value == "f32"
    mixed = plan("scaled_grouped", CupyArray((700, 256), F8), CupyArray((5, 300, 256), E5), DevArray((700,), F32),
                 DevArray((5, 300), F32), offs, CupyArray((700, 300), strides=(304, 1)))
    assert mixed.path is Path.HOT and (mixed.spec.dtype.value, mixed.spec.b_dtype.value) == ("e4m3", "e5m2")
    # the control: the M-major a of a library nothing copies is refused with the binding's rule
    r = plan("grouped", DevArray((256, 700)).t(), DevArray((5, 300, 256)), offs, DevArray((700, 300), strides=(304, 1)))
    assert r.path is Path.REFUSED and "K-major" in r.why


def test_devices_and_bad_usage(monkeypatch):
    assert set(DEVICES) == {"h100", "h200"}
    a, b, o = DevArray((128, 64)), DevArray((128, 64)), DevArray((128, 128))
    assert plan("gemm", a, b, o, device="h200").device == "h200"
    with pytest.raises(ArgumentError, match="device 'b200'"):
        plan("gemm", a, b, o, device="b200")
    with pytest.raises(ArgumentError, match="op 'conv'"):
        plan("conv", a, b, o)
    with pytest.raises(TypeError):
        plan("gemm", a, b, o, bogus=1)

    def no_gpu():
        raise NoGPU("no usable NVIDIA GPU")

    monkeypatch.setattr(streams, "require_gpu", no_gpu)
    with pytest.raises(NoGPU, match="device='h100' or 'h200'"):
        ptxgen.api.plan("gemm", a, b, o, device=None)


# ---- agreement with the doors themselves (a simulated H100) ----------------------------------------------------------
class Chosen(Exception):
    pass


@pytest.fixture
def doors(monkeypatch):
    """The doors on a simulated H100 until they ask for a kernel: the spec asked for is raised as Chosen."""
    import ptxgen.api.dispatch as dispatch
    import ptxgen.api.fp8blocks as fb
    import ptxgen.api.fused as fused
    import ptxgen.grouped as grouped
    from ptxgen.api.arrays import fusedany, groupedpack, packing

    fake = Device(index=0, name="NVIDIA H100 80GB HBM3", cc=(9, 0), handle=None, context=None, sm_count=132)
    monkeypatch.setattr(streams, "require_gpu", lambda index=0: fake)

    def chosen(spec):
        raise Chosen(spec)

    for mod, name in ((dispatch, "kernel_for"), (fb, "kernel_for"), (fused, "kernel_for"), (grouped, "_kernel_for")):
        monkeypatch.setattr(mod, name, chosen)
    for table in ("_BY_KEY", "_TORCH_ENTRIES", "_SWAPPED"):
        monkeypatch.setattr(dispatch, table, type(getattr(dispatch, table))())
    for table in ("_SPECS", "_BY_TYPES", "_TORCH_KERNELS"):
        monkeypatch.setattr(grouped, table, {})
    fb._BY_INFO.clear()
    monkeypatch.setattr(dispatch, "_HOT", None)
    packed = []

    def copy(x, info):
        from ptxgen.api.arrays.packing import packed_info

        packed.append(info.name)
        p = packed_info(info)
        return CupyArray(p.shape, x.dtype, p.strides)

    monkeypatch.setattr(dispatch, "packed_copy", copy)
    monkeypatch.setattr(fusedany, "packed_copy", copy)
    monkeypatch.setattr(groupedpack, "packed_copy", copy)
    monkeypatch.setattr(packing, "_WARNED", set())
    return packed


def door_spec(fn, *args, **kw):
    with pytest.raises(Chosen) as e:
        fn(*args, **kw)
    return e.value.args[0]


GEMM_CASES = [
    ((3000, 7000), (5000, 7000), "bfloat16", None),  # the tuned table
    ((16, 4096), (4096, 4096), "bfloat16", None),  # swap-ab
    ((128, 64), (256, 64), F32, None),  # tf32 default
    ((64, 10), (64, 10), "bfloat16", None),  # narrow, 4-byte copies
    ((64, 12), (64, 12), "float16", None),  # narrow, 8-byte copies
    ((64, 256), (128, 64), F32, "a_t"),  # a transposed tf32: packed K-major
    ((4, 128, 64), (4, 256, 64), "bfloat16", None),  # batched
]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("sa, sb, dtype, how", GEMM_CASES, ids=lambda x: str(x))
def test_gemm_plan_agrees_with_the_door(doors, sa, sb, dtype, how):
    a = CupyArray(sa, dtype).t() if how == "a_t" else CupyArray(sa, dtype)
    b = CupyArray(sb, dtype)
    m, n = a.shape[-2], b.shape[-2]
    out = CupyArray((*a.shape[:-2], m, n), dtype)
    p = plan("gemm", a, b, out)
    assert door_spec(ptxgen.gemm, a, b, out) == p.spec
    assert sorted(doors) == sorted(name for name, _ in p.packed)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_fused_plan_agrees_with_the_door(doors):
    a, b, out, bias = CupyArray((3000, 7000)), CupyArray((5000, 7000)), CupyArray((3000, 5000)), CupyArray((5000,))
    p = plan("gemm", a, b, out, bias=bias, activation="gelu_tanh")
    assert p.path is Path.HOT and p.spec.fuse is not None
    assert door_spec(ptxgen.gemm, a, b, out, bias=bias, activation="gelu_tanh") == p.spec


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_the_pre_activation_steps_plan_as_the_door_runs_them(doors):
    """aux= (with an activation: the kernel stores z) and dact= (reads it): the plan names the door's kernel, whose
    chain has the step; dact without aux is refused by the door's rule."""
    a, b, out, bias, z = (CupyArray((512, 256)), CupyArray((384, 256)), CupyArray((512, 384)), CupyArray((384,)),
                          CupyArray((512, 384)))
    p = plan("gemm", a, b, out, bias=bias, activation="gelu_tanh", aux=z)
    assert p.path is Path.HOT and p.spec.fuse.aux
    assert door_spec(ptxgen.gemm, a, b, out, bias=bias, activation="gelu_tanh", aux=z) == p.spec
    p = plan("gemm", a, b, out, dact="gelu_tanh", aux=z)
    assert p.path is Path.HOT and p.spec.fuse.dact.value == "gelu_tanh"
    assert door_spec(ptxgen.gemm, a, b, out, dact="gelu_tanh", aux=z) == p.spec
    refused = plan("gemm", a, b, out, dact="gelu_tanh")  # control: no z to read
    assert refused.path is Path.REFUSED and "aux=" in refused.why


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("case", ["plain", "m_major_a", "b_gaps", "f32", "mixed", "n_major_f8_b"])
def test_grouped_plan_agrees_with_the_door(doors, case):
    g, n, k, m = 5, 300, 256, 700
    dt = {"f32": F32, "mixed": F8, "n_major_f8_b": F8}.get(case, "bfloat16")
    a = CupyArray((k, m), dt).t() if case == "m_major_a" else CupyArray((m, k), dt)
    if case == "b_gaps":
        b = CupyArray((g, n, k), dt, strides=(2 * n * k, k, 1))
    elif case == "n_major_f8_b":
        b = CupyArray((g, n, k), dt, strides=(n * k, 1, n))
    else:
        b = CupyArray((g, n, k), E5 if case == "mixed" else dt)
    offs = DevArray((g,), I32)
    out = CupyArray((m, n), F32 if dt == F32 else "bfloat16", strides=(n if dt == F32 else 304, 1))
    if dt in (F8,):
        sa, sb = DevArray((m,), F32), DevArray((g, n), F32)
        p = plan("scaled_grouped", a, b, sa, sb, offs, out)
        spec = door_spec(ptxgen.scaled_grouped_gemm, a, b, sa, sb, offs, out)
    else:
        p = plan("grouped", a, b, offs, out)
        spec = door_spec(ptxgen.grouped_gemm, a, b, offs, out)
    assert p.path is not Path.REFUSED, p.why
    assert spec == p.spec and sorted(doors) == sorted(name for name, _ in p.packed)
    assert (p.path is Path.PACKED) == (case in ("m_major_a", "b_gaps", "n_major_f8_b"))


@pytest.mark.parametrize("m, n, k, sa_ld", [(4096, 7168, 1280, 4096), (384, 256, 1280, 384), (130, 7168, 512, 130)])
def test_fp8blocks_plan_agrees_with_the_door(doors, m, n, k, sa_ld):
    kb, nb = -(-k // 128), -(-n // 128)
    l4 = -(-kb // 4) * 4
    args = (DevArray((m, k), F8), DevArray((n, k), F8), DevArray((m, kb), F32, (1, sa_ld)), DevArray((l4, nb), F32, (1, l4)),
            DevArray((m, n)))
    p = plan("fp8blocks.gemm", *args)
    assert p.path is Path.HOT
    import ptxgen.api.fp8blocks as fb

    assert door_spec(fb.gemm, *args) == p.spec


def test_meta_tensors_stand_for_cuda_tensors():
    torch = pytest.importorskip("torch")
    meta = dict(device="meta", dtype=torch.bfloat16)
    a, b, out = torch.empty(3000, 7000, **meta), torch.empty(5000, 7000, **meta), torch.empty(3000, 5000, **meta)
    cai = plan("gemm", DevArray((3000, 7000)), DevArray((5000, 7000)), DevArray((3000, 5000)))
    p = plan("gemm", a, b, out)
    assert p.path is Path.HOT and p.spec == cai.spec
    # a view one element into its storage: data 2-byte aligned only, rows 14000 B apart: a torch tensor is packed
    q = plan("gemm", torch.empty(3000 * 7000 + 1, **meta)[1:].view(3000, 7000), b, out)
    assert q.path is Path.PACKED and q.packed == (("a", "its data does not start 16-byte aligned"),)
    # the control: a CPU tensor is refused (the doors read CUDA device memory)
    r = plan("gemm", torch.empty(64, 64, dtype=torch.bfloat16), torch.empty(64, 64, dtype=torch.bfloat16))
    assert r.path is Path.REFUSED and "cpu" in r.why


# ---- the command line: ptxgen plan ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, code, text", [
    (["plan", "gemm", "3000x7000:bf16", "5000x7000:bf16", "--device", "h100"], 0, "hot"),
    (["plan", "gemm", "64x10:bf16", "64x10:bf16", "out=64x64:bf16", "--device", "h100"], 0, "narrow"),
    (["plan", "gemm", "64x128:f32:1,128", "96x128:f32", "precision=tf32", "--device", "h100"], 0,
     "packed a: the tensor cores read"),
    (["plan", "gemm", "64x128:f32:1,128", "96x128:f32", "--device", "h100"], 0, "float32 precision: 3xtf32"),  # torch's default
    (["plan", "gemm", "64x128:f32", "96x128:f32", "precision=fp64", "--device", "h100"], 1, "precision 'fp64'"),
    (["plan", "gemm", "64x10:bf16", "64x10:bf16", "out=64x64:bf16", "--device", "h100", "--library", "other"], 1,
     "refused (ArgumentError): a: its rows start 10 elements"),
    (["plan", "bfp8", "384x1280:e4m3", "128x1280:e4m3", "384x10:f32:1,384", "12x1:f32:1,12", "--device", "h200", "--json"], 0,
     '"op": "fp8blocks.gemm"'),
    (["plan", "gemm", "3x3:bf16", "3x3:bf16", "bogus=1", "--device", "h100"], 2, "unexpected keyword argument 'bogus'"),
    (["plan", "gemm", "3x3:bogus", "--device", "h100"], 2, "dtype 'bogus'"),
    (["plan", "conv", "3x3:bf16", "--device", "h100"], 2, "op 'conv'"),
    (["plan", "gemm", "3x3:bf16", "3x3:bf16"], 3, "device='h100' or 'h200'"),
])
def test_the_cli(monkeypatch, capsys, argv, code, text):
    from ptxgen.cli import main

    def no_gpu(index=0):
        raise NoGPU("no usable NVIDIA GPU")

    monkeypatch.setattr(streams, "require_gpu", no_gpu)
    assert main(argv) == code
    out = capsys.readouterr()
    assert text in out.out + out.err


def test_the_3d_forms_with_meta_tensors():
    """grouped_gemm(a, b) and scaled_grouped_gemm(a, b, scale_a, scale_b) with 3-D a (offs None): torch's 3-D x 3-D forms,
    a strided a (every other batch) copied contiguous first."""
    torch = pytest.importorskip("torch")
    g, m, n, k = 4, 16, 32, 64
    bf = dict(device="meta", dtype=torch.bfloat16)
    p = plan("grouped", torch.empty(g, m, k, **bf), torch.empty(g, n, k, **bf))
    assert p.path is Path.HOT and p.why.startswith("the batched form")
    q = plan("grouped", torch.empty(2 * g, m, k, **bf)[::2], torch.empty(g, n, k, **bf))
    assert q.path is Path.PACKED and q.packed[0][0] == "a" and q.spec == p.spec
    f8 = dict(device="meta", dtype=torch.float8_e4m3fn)
    f32 = dict(device="meta", dtype=torch.float32)
    s = plan("scaled_grouped", torch.empty(g, m, k, **f8), torch.empty(g, n, k, **f8), torch.empty(g, m, **f32),
             torch.empty(g, n, **f32))
    assert s.path is Path.HOT and s.spec.grouped.value == "offs_rowwise"
    bad = plan("scaled_grouped", torch.empty(g, m, k, **f8), torch.empty(g, n, k, **f8), torch.empty(g * m + 1, **f32),
               torch.empty(g, n, **f32))
    assert bad.path is Path.REFUSED and "scale_a has shape" in bad.why


def test_attention_plan_names_its_kernel_and_refuses_by_rule():
    torch = pytest.importorskip("torch")
    meta = dict(device="meta", dtype=torch.bfloat16)
    q, k, v = torch.empty(2, 16, 1000, 128, **meta), torch.empty(2, 4, 1000, 128, **meta), torch.empty(2, 4, 1000, 128, **meta)
    p = plan("attention", q, k, v, causal=True, device="h100")
    assert p.path is Path.HOT and p.kernel.startswith("ptxgen_attn_sm90a_bf16_d128") and "causal" in p.kernel
    assert "K/V heads 4" in p.why
    bad = plan("attention", q, torch.empty(2, 3, 1000, 128, **meta), torch.empty(2, 3, 1000, 128, **meta), device="h100")
    assert bad.path is Path.REFUSED and "must divide" in bad.why  # the control: GQA heads that do not divide
    d96 = torch.empty(2, 16, 1000, 96, **meta)
    assert plan("attention", d96, d96, d96, device="h200").path is Path.REFUSED
