"""The TMA probe: tensor-map arguments, their marshalling and the probe kernel on a CPU; the probe itself on a GPU."""

import ctypes
import re

import numpy as np
import pytest

from ptxgen.derive.tile.layout import derive
from ptxgen.derive.tile.spec import make_spec
from ptxgen.isa.tensormap import TmaDataType, TmaSwizzle
from ptxgen.runtime.launch.gpu import KernelArgs
from ptxgen.runtime.launch.launch import ProblemError
from ptxgen.runtime.check.probe_tma import (
    ANCHORS,
    ProbePlan,
    TmaCase,
    alignment_cases,
    compare,
    global_bytes,
    global_tensor,
    model_image,
    summarize,
    tma_cases,
)
from ptxgen.runtime.launch.tensormap import TensorMapArgs, encode, map_bytes, tensormap_args

ADDR = 0x7F0000010000


def _plan(box=(64, 16), esize=2, swizzle=TmaSwizzle.B128, **kw):
    return ProbePlan({1: TmaDataType.UINT8, 2: TmaDataType.FLOAT16, 4: TmaDataType.FLOAT32}[esize], esize, box, swizzle, **kw)


# ------------------------------------------------------------------------------------------------
# tensormap_args: every rule checked on a CPU
# ------------------------------------------------------------------------------------------------
def test_tensormap_args_from_a_derived_plan():
    t = derive(make_spec(bm=128, bn=128, bk=64, a="kmajor-sw128", b="mnmajor-sw64", arch="sm_90a"))
    a = tensormap_args(t.a.tma, ADDR, (512, 384), 520)  # K = 512 contiguous, M = 384 rows, lda = 520
    assert isinstance(a, TensorMapArgs)
    assert a.data_type == TmaDataType.FLOAT16.value and a.element_bytes == 2 and a.rank == 2
    assert a.global_dims == (512, 384) and a.global_strides == (1040,)
    assert a.box == t.a.tma.box == (64, 128) and a.swizzle == TmaSwizzle.B128.value
    assert a.element_strides == (1, 1) and a.interleave == 0 and a.l2_promotion == 3 and a.oob_fill == 0
    assert a.box_bytes == t.a.tma.box_bytes
    b = tensormap_args(t.b.tma, ADDR, (128, 512), 128)
    assert b.swizzle == TmaSwizzle.B64.value and b.box[0] * 2 == 64


@pytest.mark.parametrize(
    "plan, addr, dims, ld, rule",
    [
        (_plan(), ADDR + 8, (64, 64), 64, "globalAddress .* 16-byte aligned"),
        (_plan(), ADDR, (64, 64), 68, r"globalStrides\[0\] = ld 68 x 2 B = 136 B must be a multiple of 16"),
        (_plan(), ADDR, (64, 64), 1 << 39, "below 2\\^40"),
        (_plan(), ADDR, (0, 64), 64, r"globalDim\[0\] = 0 must be in 1..2\^32"),
        (_plan(), ADDR, (64, (1 << 32) + 1), 64, r"globalDim\[1\] = 4294967297 must be in 1..2\^32"),
        (_plan(), ADDR, (64, 64), 32, "ld 32 is smaller than the contiguous extent"),
        (_plan(box=(64, 0)), ADDR, (64, 64), 64, r"boxDim\[1\] = 0 must be in 1..256"),
        (_plan(box=(64, 257)), ADDR, (64, 300), 64, r"boxDim\[1\] = 257 must be in 1..256"),
        (_plan(box=(260, 8), swizzle=TmaSwizzle.NONE), ADDR, (512, 64), 512, r"boxDim\[0\] = 260 must be in 1..256"),
        (_plan(box=(12, 8), swizzle=TmaSwizzle.NONE), ADDR, (64, 64), 64, "24 B must be a multiple of 16 B"),
        (_plan(box=(32, 8), swizzle=TmaSwizzle.B32), ADDR, (64, 64), 64, "64 B exceeds the 32B swizzle span of 32 B"),
        (_plan(box=(64, 8), swizzle=TmaSwizzle.B64, esize=4), ADDR, (64, 64), 64, "256 B exceeds the 64B swizzle span"),
        (_plan(box=(256, 8), esize=1), ADDR, (256, 64), 256, "256 B exceeds the 128B swizzle span of 128 B"),
        (_plan(element_strides=(1, 9)), ADDR, (64, 64), 64, r"elementStrides\[1\] = 9 must be in 1..8"),
        (_plan(rank=4), ADDR, (64, 64), 64, "rank 4: ptxgen builds rank-2 and rank-3 maps only"),
        (_plan(rank=3), ADDR, (64, 64), 64, r"1 stride\(s\) given for a rank-3 map.*globalDim has 2 values, not 3"),
        (_plan(interleave=1), ADDR, (64, 64), 64, "INTERLEAVE_NONE"),
    ],
)
def test_tensormap_args_refusals_name_the_rule(plan, addr, dims, ld, rule):
    with pytest.raises(ProblemError, match=rule) as e:
        tensormap_args(plan, addr, dims, ld)
    assert "cuTensorMapEncodeTiled" in str(e.value)


def test_tensormap_args_accepts_the_limits():
    tensormap_args(_plan(box=(256, 256), swizzle=TmaSwizzle.NONE, esize=1), ADDR, (1 << 32, 1 << 32), 1 << 32)
    tensormap_args(_plan(box=(16, 1), swizzle=TmaSwizzle.B32), ADDR, (16, 1), 16)
    tensormap_args(_plan(box=(64, 8), swizzle=TmaSwizzle.NONE), ADDR, (64, 8), 64)  # 128 B unswizzled: no span limit


def test_encode_arguments_convert_with_the_installed_binding():
    """Without a driver the binding call gets past cuda-bindings' argument conversion and fails only on
    libcuda; encode() itself says there is no GPU."""
    from cuda.bindings import driver

    from ptxgen.runtime.launch.gpu import NoGPU, require_gpu
    from ptxgen.runtime.launch.tensormap import call_encode_tiled

    try:
        require_gpu()
        pytest.skip("a GPU is present: test_gpu_tma_probe covers encode")
    except NoGPU:
        pass
    args = tensormap_args(_plan(), ADDR, (64, 64), 64)
    with pytest.raises(RuntimeError) as e:  # cuda.pathfinder's DynamicLibNotFoundError
        call_encode_tiled(driver, args)
    assert "driver" in str(e.value)
    with pytest.raises(NoGPU):
        encode(args)


def test_map_bytes_reads_the_opaque_words():
    from cuda.bindings import driver

    m = driver.CUtensorMap()
    m.opaque = [driver.cuuint64_t(i * 0x0101010101010101) for i in range(16)]
    raw = map_bytes(m)
    assert len(raw) == 128 and raw[8:16] == bytes([1] * 8) and raw[120:] == bytes([15] * 8)


# ------------------------------------------------------------------------------------------------
# KernelArgs "tensormap"
# ------------------------------------------------------------------------------------------------
def test_kernel_args_tensormap():
    tmap = bytes(range(128))
    args = KernelArgs([("tensormap", tmap), ("i32", -3), ("i32", 7), ("u32", 896), ("ptr", 0x7F0000002000), ("i32", 1024)])
    vals = args.read_back()
    assert vals[0] == tmap and vals[1:] == [-3, 7, 896, 0x7F0000002000, 1024]
    ptrs = ctypes.cast(args.address, ctypes.POINTER(ctypes.c_void_p))
    assert ptrs[0] % 64 == 0  # the map's copy is 64-byte aligned, like a CUtensorMap
    assert ctypes.string_at(ptrs[0], 128) == tmap  # cuLaunchKernel copies the parameter from this pointer
    assert ctypes.c_int32.from_address(ptrs[1]).value == -3
    assert ctypes.c_uint32.from_address(ptrs[3]).value == 896
    assert ctypes.c_uint64.from_address(ptrs[4]).value == 0x7F0000002000
    with pytest.raises(ValueError, match="128 bytes"):
        KernelArgs([("tensormap", b"\0" * 64)])
    with pytest.raises(ValueError, match="unknown kernel argument kind"):
        KernelArgs([("f64", 1.0)])


def test_kernel_args_scalars_unchanged():
    args = KernelArgs([("ptr", 1 << 40), ("i32", -1), ("u32", 5), ("u64", 1 << 63), ("f32", 0.5)])
    assert args.read_back() == [1 << 40, -1, 5, 1 << 63, 0.5]


# ------------------------------------------------------------------------------------------------
# The probe kernel: renders, compiles for sm_90a, holds the TMA load and the mbarrier
# ------------------------------------------------------------------------------------------------
def test_tma_probe_kernel_compiles_with_utmaldg_and_syncs():
    from ptxgen.emit.probe_render import render_tma_probe
    from ptxgen.runtime.compile.toolchain import compile_cuda, run_tool

    name, src = render_tma_probe(4096)
    assert "generated by ptxgen" in src and "4096u" in src
    c = compile_cuda(src, name, "sm_90a")
    assert ".target sm_90a" in c.ptx
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes" in c.ptx
    assert re.search(r"\.param \.align 64 \.b8 \w+_param_0\[128\]", c.ptx), "the map must be a 64-byte-aligned 128-byte parameter"
    sass = run_tool("cuobjdump", ["--dump-sass"], c.cubin)
    assert "UTMALDG.2D" in sass
    assert "SYNCS" in sass  # mbarrier init / arrive.expect_tx / try_wait
    assert "SYNCS.PHASECHK" in sass and "SYNCS.ARRIVE" in sass


def test_tma_probe_renders_one_kernel_per_box_size():
    from ptxgen.emit.probe_render import render_tma_probe

    sizes = {c.box_bytes for c in tma_cases() + alignment_cases()}
    names = {render_tma_probe(b)[0] for b in sizes}
    assert len(names) == len(sizes) and all(b % 16 == 0 for b in sizes)
    with pytest.raises(ValueError):
        render_tma_probe(24)


# ------------------------------------------------------------------------------------------------
# The probe's cases and its comparison, with a simulated copy engine
# ------------------------------------------------------------------------------------------------
def test_cases_are_legal_tensor_maps():
    cases = tma_cases()
    assert {c.swizzle for c in cases} == {"none", "32B", "64B", "128B"}
    assert {c.dst_offset for c in cases if c.category == "layout"} == {128 * j for j in range(8)}
    assert all(c.dst_offset % 128 == 0 for c in cases)
    assert {c.dst_offset for c in alignment_cases()} == {16, 32, 64, 128}
    for c in cases + alignment_cases():
        tensormap_args(c.plan(), ADDR, c.dims, c.ld)  # every one is encodable
        assert c.dst_offset + c.box_bytes <= 16 * 1024
    oob = [c for c in cases if c.category == "oob"]
    assert oob and all(c.x + c.box[0] > c.dims[0] or c.y + c.box[1] > c.dims[1] for c in oob)


def test_global_tensor_codes():
    c = next(c for c in tma_cases() if c.element_bytes == 2 and c.swizzle == "128B")
    t = global_tensor(c, np.random.default_rng(0))
    assert t.shape == (c.dims[1], c.dims[0]) and t.dtype == np.uint16
    assert len(np.unique(t)) == t.size and t.min() > 0  # distinct and never the zero fill
    g = global_bytes(c, t)
    assert g.size == c.ld * c.dims[1] * 2
    assert np.array_equal(g.view(np.uint16).reshape(c.dims[1], c.ld)[:, : c.dims[0]], t)


def _simulated(anchor):
    """A copy engine that behaves as the write model says under ``anchor``."""
    def run(case: TmaCase) -> TmaCase:
        tensor = global_tensor(case, np.random.default_rng(1))
        case.launched = True
        return compare(case, tensor, model_image(case, tensor, anchor))
    return run


@pytest.mark.parametrize("truth", ANCHORS)
def test_compare_and_summary_find_the_simulated_anchor(truth):
    pytest.importorskip("ptxgen.model.layouts.tmamodel")
    sim = _simulated(truth)
    cases = [sim(c) for c in tma_cases() if c.category != "layout" or c.element_bytes == 2]
    align = [sim(c) for c in alignment_cases()]
    s = summarize(cases, align)
    assert s["ok"] and s["every_case_matched_some_anchor"]
    assert s["anchors_explaining_every_aligned_case"] == [truth]
    assert s["cases_that_tell_anchors_apart"] > 0
    assert ("base offset 0" in s["mma_base_offset_rule"]) == (truth == "address")
    # a swizzled copy at line 1 of the repeat tells them apart; at line 0 both agree
    c1 = next(c for c in cases if c.swizzle == "128B" and c.dst_offset == 128)
    c0 = next(c for c in cases if c.swizzle == "128B" and c.dst_offset == 0)
    assert c1.matched == [truth] and c0.matched == list(ANCHORS)
    mis = next(a for a in s["alignment"] if a["swizzle"] == "128B" and a["dst_offset"] == 16)
    assert mis["launched"] and mis["anchors_matched"] == [truth]


def test_compare_reports_where_an_element_went():
    pytest.importorskip("ptxgen.model.layouts.tmamodel")
    case = next(c for c in tma_cases() if c.swizzle == "64B" and c.element_bytes == 4 and c.dst_offset == 256)
    tensor = global_tensor(case, np.random.default_rng(2))
    hw = model_image(case, tensor, "address")
    hw[case.dst_offset : case.dst_offset + 16] = np.roll(hw[case.dst_offset : case.dst_offset + 32], 16)[:16]
    compare(case, tensor, hw)
    assert case.matched == [] and case.examples and summarize([case], [])["ok"] is False
    assert case.examples[0]["hw_source_outer_inner"] is not None  # 32-bit codes are distinct: traceable


# ------------------------------------------------------------------------------------------------
# On a GPU
# ------------------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_tma_probe(gpu, artifact_dir):
    if gpu.cc[0] < 9:
        pytest.skip("TMA needs compute capability 9.0+")
    from ptxgen.runtime.check.probe_tma import run_tma_probe, write_report

    report = run_tma_probe(seed=1)
    write_report(report, str(artifact_dir / "probe_tma.json"))
    s = report["summary"]
    assert all(c["errors"] == 0 for c in s["categories"].values()), s["categories"]
    assert s["every_case_matched_some_anchor"], s["by_swizzle_and_dst_offset"]
    assert len(s["anchors_explaining_every_aligned_case"]) == 1, s  # one anchor explains every 128-B-aligned case
    controls = [a for a in s["alignment"] if a["dst_offset"] == 128]
    assert all(a["launched"] and a["anchors_matched"] for a in controls), controls


def test_probe_end_to_end_with_a_simulated_device(monkeypatch):
    """The whole host path (buffers, the tensor map's arguments, KernelArgs, the image read-back, the
    summary) against a fake device whose copy engine is the write model with the 'address' anchor. The fake
    launch reads every argument back through the void** array, as cuLaunchKernel would."""
    tmamodel = pytest.importorskip("ptxgen.model.layouts.tmamodel")
    import struct

    import ptxgen.runtime.launch.gpu as gpu
    import ptxgen.runtime.launch.tensormap as tm
    import ptxgen.runtime.compile.toolchain as toolchain
    from ptxgen.runtime.check.probe_tma import run_tma_probe

    memory = {}

    class FakeBuffer:
        next_addr = 0x7F0000000000

        def __init__(self, nbytes):
            self.nbytes, self.address = nbytes, FakeBuffer.next_addr
            FakeBuffer.next_addr += (nbytes + 255) // 256 * 256
            memory[self.address] = self.data = np.zeros(nbytes, np.uint8)

        def upload(self, host):
            self.data[: host.nbytes] = np.ascontiguousarray(host).view(np.uint8).ravel()

        def fill_u8(self, v):
            self.data[:] = v

        def download(self, dtype, count):
            return self.data.view(dtype)[:count].copy()

        def free(self):
            memory.pop(self.address, None)

    def fake_encode(args):  # the map: the arguments themselves, as words
        words = [args.global_address, *args.global_dims, *args.global_strides, *args.box, args.element_bytes, args.swizzle]
        return struct.pack("<8Q", *words).ljust(128, b"\0")

    names = {v: k.json_name for k, v in {s: s.value for s in TmaSwizzle}.items()}

    class FakeKernel:
        def __init__(self, cubin, name, smem):
            self.name = name

        def launch(self, grid, block, args):
            p = ctypes.cast(args.address, ctypes.POINTER(ctypes.c_void_p))
            assert p[0] % 64 == 0
            addr, d0, d1, stride, b0, b1, esize, swz = struct.unpack("<8Q", ctypes.string_at(p[0], 64))
            x, y = ctypes.c_int32.from_address(p[1]).value, ctypes.c_int32.from_address(p[2]).value
            dst = ctypes.c_uint32.from_address(p[3]).value
            out = ctypes.c_uint64.from_address(p[4]).value
            assert ctypes.c_int32.from_address(p[5]).value * 16 == memory[out].size
            assert self.name.endswith(f"_{b0 * b1 * esize}b")
            code = {1: np.uint8, 2: np.uint16, 4: np.uint32}[esize]
            rows = memory[addr].view(code).reshape(d1, stride // esize)[:, :d0]
            image = np.zeros(memory[out].size, np.uint8)
            tma = {"swizzle": names[swz], "box": [b0, b1], "copies": [{"smem_offset_bytes": 0, "inner": 0, "outer": 0}]}
            tmamodel.write(tma, esize, dst - dst % 128, (x, y), rows, image, anchor="address")  # drops low bits
            memory[out][:] = image

        def unload(self):
            pass

    monkeypatch.setattr(gpu, "require_gpu", lambda: gpu.Device(0, "simulated H200", (9, 0), None, None))
    monkeypatch.setattr(gpu, "Buffer", FakeBuffer)
    monkeypatch.setattr(gpu, "Kernel", FakeKernel)
    monkeypatch.setattr(gpu, "synchronize", lambda what="": None)
    monkeypatch.setattr(tm, "encode", fake_encode)
    monkeypatch.setattr(toolchain, "compile_cuda", lambda src, name, arch: type("C", (), {"cubin": b""})())
    report = run_tma_probe(seed=3, isolated_alignment=False)
    s = report["summary"]
    assert s["ok"] and s["anchors_explaining_every_aligned_case"] == ["address"], s
    assert s["categories"]["layout"]["cases"] == 4 * 3 * 3 * 8 and all(c["errors"] == 0 for c in s["categories"].values())
    al = {(a["swizzle"], a["dst_offset"]): a for a in s["alignment"]}
    assert al[("128B", 128)]["launched"] and al[("128B", 128)]["anchors_matched"] == ["address"]
    mis = al[("128B", 16)]
    assert mis["launched"] and mis["error"] is None and mis["anchors_matched"] == []
    assert mis["misaligned_hypotheses"] == {"address at the 128-byte-aligned destination 0": True,
                                            "destination at the 128-byte-aligned destination 0": True}
    import json

    json.dumps(report)  # the report is plain JSON
    from ptxgen.runtime.commands import _print_tma_summary

    assert _print_tma_summary(report) is True


def test_a_lost_context_stops_the_in_process_cases(monkeypatch):
    import ptxgen.runtime.launch.gpu as gpu
    from ptxgen.runtime.check.probe_tma import TmaProber

    monkeypatch.setattr(gpu, "require_gpu", lambda: gpu.Device(0, "simulated H200", (9, 0), None, None))
    prober = TmaProber(0)

    def fail(case, tensor):
        case.launched, case.failed_at = False, "synchronize"
        raise gpu.CudaError("TMA probe (cuCtxSynchronize) failed: CUDA_ERROR_MISALIGNED_ADDRESS (716)")

    monkeypatch.setattr(prober, "hardware_image", fail)
    a, b = alignment_cases()[:2]
    prober.run(a, 0)
    prober.run(b, 1)
    assert a.error.startswith("synchronize: ") and "MISALIGNED" in a.error and a.launched is False
    assert b.error.startswith("not run: the CUDA context was lost") and b.launched is None
