"""The public Python API: ptxgen.compile / CompiledKernel / gemm, the kernel cache, reading device arrays.

CPU tier: NVRTC compiles, the ABI, the on-disk cache (hits, misses, corruption, several processes at once),
argument checks on fake arrays that expose ``__cuda_array_interface__`` (or DLPack through numpy), the
launch path up to the driver with a simulated device, and NoGPU without a GPU. ``gpu`` tier: torch and
CuPy against torch.matmul / cupy.matmul.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import ptxgen
from ptxgen import api
from ptxgen.isa.types import Major
from ptxgen.runtime.compile import cache
from ptxgen.runtime.launch.arrays import ArgumentError, DTypeError, read_array
from ptxgen.runtime.launch.gpu import Device, NoGPU
from ptxgen.runtime.launch.launch import Problem, ProblemError

ROOT = Path(__file__).resolve().parent.parent

BF16 = dict(bm=128, bn=128, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", out_dtype="bf16", stages=4)
MN_BF16 = dict(bm=128, bn=128, bk=64, a="mnmajor-sw128", b="mnmajor-sw128", dtype="bf16", out_dtype="f32", stages=4)
F16_F32 = dict(bm=128, bn=128, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="f16", out_dtype="f32", stages=4)
S8 = dict(bm=128, bn=128, bk=128, a="kmajor-sw128", b="kmajor-sw128", dtype="s8", acc="s32", stages=4)
TF32 = dict(bm=128, bn=128, bk=32, a="kmajor-sw128", b="kmajor-sw128", dtype="tf32", stages=4)


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "kernels"))
    monkeypatch.delenv("PTXGEN_NO_CACHE", raising=False)
    return tmp_path / "kernels"


def _has_gpu() -> bool:
    try:
        from ptxgen.runtime.launch.gpu import require_gpu

        require_gpu()
        return True
    except Exception:  # noqa: BLE001
        return False


# ---------------------------------------------------------------------------------------------------
# fake arrays
# ---------------------------------------------------------------------------------------------------
_NEXT_PTR = [0x7F0000000000]


def _fresh_ptr() -> int:
    """A distinct 16-byte aligned fake address per array (arrays that overlap in memory are refused)."""
    _NEXT_PTR[0] += 1 << 24
    return _NEXT_PTR[0]


class FakeArray:
    """A device array as far as the API can tell: __cuda_array_interface__ (v3), a dtype name and a DLPack device."""

    def __init__(self, shape, dtype="bfloat16", strides=None, ptr=None, device=(2, 0), itemsize=None):
        ptr = _fresh_ptr() if ptr is None else ptr
        itemsize = itemsize or {"bfloat16": 2, "float16": 2, "float32": 4, "int8": 1, "uint8": 1, "int32": 4,
                                "float8_e4m3fn": 1, "float64": 8}[dtype]
        typestr = {"bfloat16": "<f2", "float16": "<f2", "float32": "<f4", "int8": "|i1", "uint8": "|u1", "int32": "<i4",
                   "float8_e4m3fn": "|u1", "float64": "<f8"}[dtype]
        self.dtype = dtype
        self._device = device
        self.__cuda_array_interface__ = {
            "shape": tuple(shape), "typestr": typestr, "data": (ptr, False), "version": 3, "stream": None,
            "strides": None if strides is None else tuple(s * itemsize for s in strides),
        }

    def __dlpack_device__(self):
        return self._device


def kmajor(rows, k, dtype="bfloat16", ld=None, **kw):
    return FakeArray((rows, k), dtype, strides=(ld or k, 1), **kw)


def mnmajor(rows, k, dtype="bfloat16", ld=None, **kw):
    """The transposed view of a row-major K x rows array."""
    return FakeArray((rows, k), dtype, strides=(1, ld or rows), **kw)


# ---------------------------------------------------------------------------------------------------
# import, compile, ABI
# ---------------------------------------------------------------------------------------------------
def test_import_is_lazy_and_exports_the_api():
    code = ("import sys, ptxgen; heavy = [m for m in ('ptxgen.api', 'numpy', 'jinja2', 'cuda', 'torch') if m in sys.modules]; "
            "print(heavy); from ptxgen import compile, gemm, make_spec, NoGPU; print('ptxgen.api' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout.split("\n")
    assert out[0] == "[]" and out[1] == "True"
    from ptxgen.derive.tile.spec import make_spec
    from ptxgen.runtime.launch import gpu

    assert ptxgen.make_spec is make_spec and ptxgen.NoGPU is gpu.NoGPU and ptxgen.compile is api.compile
    assert ptxgen.gemm is api.gemm and ptxgen.__version__
    gs = subprocess.run([sys.executable, "-c", "import ptxgen; print(ptxgen.api.gemm_spec.__name__)"], capture_output=True,
                        text=True, cwd=ROOT, check=True).stdout.strip()
    assert gs == "gemm_spec"  # ptxgen.api after a plain `import ptxgen`
    assert issubclass(api.ArgumentError, ValueError) and issubclass(api.DTypeError, TypeError)
    with pytest.raises(AttributeError):
        ptxgen.no_such_thing  # noqa: B018


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_compile_exposes_ptx_cubin_and_abi(arch):
    k = ptxgen.compile(ptxgen.make_spec(**BF16, arch=arch))
    assert isinstance(k, api.CompiledKernel) and k.arch == arch
    assert f".entry {k.name}" in k.ptx and f".target {arch}" in k.ptx
    assert k.cubin[:4] == b"\x7fELF"
    assert [p.name for p in k.params] == ["tmap_a", "tmap_b", "D", "M", "N", "K", "ldd"]
    assert k.block == (k.plan.pipeline.threads, 1, 1) and k.cluster == (1, 1, 1)
    assert k.shared_bytes == k.plan.abi.dynamic_smem_bytes > 4 * (128 * 64 * 2) * 2
    assert k.grid(1000, 1000, sm_count=132) == (8 * 8, 1, 1)  # one CTA per 128 x 128 tile, partial tiles included
    cfg = k.launch_config(300, 200, sm_count=132)
    assert cfg.grid == (3 * 2, 1, 1) and cfg.block == k.block and cfg.shared_bytes == k.shared_bytes
    assert k.name in repr(k) and k.spec.arch.value == arch


def test_compile_takes_fields_dicts_and_persistent_grids():
    k = ptxgen.compile(**BF16, arch="sm_90a", schedule="persistent")
    assert k.grid(8192, 8192, sm_count=132) == (132, 1, 1) and k.grid(200, 200, sm_count=132) == (4, 1, 1)
    assert ptxgen.compile(k.spec.to_json()).cubin == k.cubin
    with pytest.raises(TypeError):
        ptxgen.compile(k.spec, bm=64)
    with pytest.raises(TypeError):
        ptxgen.compile("128x128")
    with pytest.raises(ValueError, match="--bn=100 is illegal"):
        ptxgen.compile(**{**BF16, "bn": 100}, arch="sm_90a")


def test_grid_without_sm_count_needs_the_gpu():
    if _has_gpu():
        pytest.skip("a GPU is present")
    k = ptxgen.compile(**BF16, arch="sm_90a")
    with pytest.raises(NoGPU):
        k.grid(100, 100)


def test_compiling_leaves_the_interpreter_intact():
    """A kernel compiled in a user's process must not damage it (torch imported afterwards failed)."""
    ptxgen.compile(**BF16, arch="sm_90a", cache=False)
    assert " ".encode()[0] == 32 and b" "[0] == 32  # ints: the b" " constant itself is the shared object


@pytest.mark.parametrize("fields", [BF16, MN_BF16, F16_F32, S8, TF32], ids=["bf16", "mn-bf16", "f16-f32", "s8", "tf32"])
def test_the_gpu_tests_specs_compile_for_hopper(fields):
    assert ptxgen.compile(**fields, arch="sm_90a").cubin[:4] == b"\x7fELF"


# ---------------------------------------------------------------------------------------------------
# the cache
# ---------------------------------------------------------------------------------------------------
def test_cache_folder_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "a"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cache.cache_dir() == tmp_path / "a"
    monkeypatch.delenv("PTXGEN_CACHE_DIR")
    assert cache.cache_dir() == tmp_path / "x" / "ptxgen"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "ptxgen"


def test_cache_key_covers_source_arch_options_and_nvrtc(monkeypatch):
    base = cache.cache_key("src", "sm_90a")
    assert len(base) == 64 and base == cache.cache_key("src", "sm_90a")
    assert len({base, cache.cache_key("src2", "sm_90a"), cache.cache_key("src", "sm_100a"),
                cache.cache_key("src", "sm_90a", ("-lineinfo",))}) == 4
    monkeypatch.setattr(cache, "toolchain_id", lambda: {"nvrtc": "99.9"})
    assert cache.cache_key("src", "sm_90a") != base


def test_cache_miss_then_hit(_cache_dir):
    spec = ptxgen.make_spec(**BF16, arch="sm_90a")
    first = ptxgen.compile(spec)
    assert not first.cache_hit and first.cache_path.parent == _cache_dir and first.cache_path.exists()
    second = ptxgen.compile(spec)
    assert second.cache_hit and second.cubin == first.cubin and second.ptx == first.ptx
    # no temporary files left (beside the kernels: the toolchain's versions and the templates' bytecode)
    assert [p.name for p in _cache_dir.iterdir() if p.name not in ("jinja2", "toolchain.json")] == [first.cache_path.name]
    assert not list(_cache_dir.rglob("*.tmp"))
    third = ptxgen.compile(spec, options=("-lineinfo",))
    assert not third.cache_hit and third.cache_path != first.cache_path
    fresh = ptxgen.compile(spec, cache=False)
    assert not fresh.cache_hit and fresh.cache_path is None and fresh.cubin == first.cubin


def test_cache_off_by_environment(monkeypatch, _cache_dir):
    monkeypatch.setenv("PTXGEN_NO_CACHE", "1")
    k = ptxgen.compile(**BF16, arch="sm_90a")
    assert k.cache_path is None and not _cache_dir.exists()


@pytest.mark.parametrize("damage", ["truncate", "flip", "wrong_key", "garbage", "empty"])
def test_a_corrupt_entry_is_recompiled_and_rewritten(damage):
    spec = ptxgen.make_spec(**BF16, arch="sm_90a")
    good = ptxgen.compile(spec)
    path = good.cache_path
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        path.write_bytes(data[:-100] + bytes([data[-100] ^ 0xFF]) + data[-99:])
    elif damage == "wrong_key":  # a whole, valid entry for another key renamed over this one
        other = cache.encode_entry("0" * 64, cache.decode_entry(data, path.stem))
        path.write_bytes(other)
    elif damage == "garbage":
        path.write_bytes(os.urandom(4096))
    else:
        path.write_bytes(b"")
    again = ptxgen.compile(spec)
    assert not again.cache_hit and again.cubin == good.cubin
    assert path.read_bytes() == data and ptxgen.compile(spec).cache_hit


def test_an_unwritable_cache_folder_only_costs_the_compile(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(blocker / "sub"))
    k = ptxgen.compile(**BF16, arch="sm_90a")
    assert k.cubin[:4] == b"\x7fELF" and k.cache_path is None and not k.cache_hit


_WORKER = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    import ptxgen
    from ptxgen.runtime.compile import cache
    from ptxgen.runtime.compile.toolchain import Compiled
    k = ptxgen.compile(ptxgen.make_spec(**{fields!r}, arch="sm_90a"))
    # hammer one key: every read must see a whole entry (its own or another writer's), never a torn one
    me = int(sys.argv[1])
    for i in range(40):
        cache.store("f" * 64, Compiled("n", "sm_90a", "ptx %d" % me * 1000, bytes([me]) * 50000, ""))
        got = cache.load("f" * 64)
        assert got is not None and len(got.cubin) == 50000 and len(set(got.cubin)) == 1, i
    import hashlib
    print(hashlib.sha256(k.cubin).hexdigest())
""")


def test_several_processes_share_the_cache(_cache_dir):
    script = _WORKER.format(root=str(ROOT), fields=BF16)
    env = {**os.environ, "PTXGEN_CACHE_DIR": str(_cache_dir)}
    procs = [subprocess.Popen([sys.executable, "-c", script, str(i)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for i in range(4)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        outs.append(out.strip()[-64:])
    assert len(set(outs)) == 1  # every process got the same cubin
    names = sorted(p.name for p in _cache_dir.iterdir() if p.name not in ("jinja2", "toolchain.json"))
    assert len(names) == 2 and not [n for n in names if n.endswith(".tmp")]  # the kernel and the hammered key
    assert ptxgen.compile(**BF16, arch="sm_90a").cache_hit


# ---------------------------------------------------------------------------------------------------
# reading arrays
# ---------------------------------------------------------------------------------------------------
def test_read_cuda_array_interface():
    info = read_array(mnmajor(300, 64, ld=304, ptr=0x7F0000000000), "a")
    assert info.shape == (300, 64) and info.strides == (1, 304) and info.dtype == "bf16" and info.itemsize == 2
    assert info.device == (2, 0) and info.via == "cuda_array_interface" and info.ptr == 0x7F0000000000
    contiguous = FakeArray((3, 5), "float16")
    assert read_array(contiguous, "x").strides == (5, 1) and read_array(contiguous, "x").dtype == "f16"

    class Plain:  # no dtype attribute: the typestr decides; no __dlpack_device__: the device is unknown
        __cuda_array_interface__ = {"shape": (4, 8), "typestr": "|i1", "data": (4096, False), "version": 2}

    info = read_array(Plain(), "b")
    assert info.dtype == "s8" and info.device is None and info.strides == (8, 1)


def test_read_dlpack_through_numpy():
    x = np.zeros((6, 40), dtype=np.float16)[:, 8:]
    info = read_array(x, "a")
    assert info.via == "dlpack" and info.shape == (6, 32) and info.strides == (40, 1) and info.dtype == "f16"
    assert info.ptr == x.ctypes.data and info.device == (1, 0) and info.device_str == "cpu:0"
    t = read_array(np.zeros((4, 8), dtype=np.int32).T, "b")
    assert t.shape == (8, 4) and t.strides == (1, 8) and t.dtype == "s32"
    assert read_array(np.zeros((2, 2), np.float64), "c").dtype == "float64"


def test_read_array_refuses_what_it_cannot_read():
    with pytest.raises(DTypeError, match="a must be a device array exposing __cuda_array_interface__ or DLPack"):
        read_array([[1, 2], [3, 4]], "a")
    odd = FakeArray((4, 4), "float16")
    odd.__cuda_array_interface__["strides"] = (9, 1)  # bytes
    with pytest.raises(ArgumentError, match="not multiples of the element size"):
        read_array(odd, "a")


# ---------------------------------------------------------------------------------------------------
# argument checks (no GPU needed: they come before the launch)
# ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def kbf16():
    return ptxgen.compile(**BF16, arch="sm_90a", cache=False)


@pytest.fixture(scope="module")
def kmn():
    return ptxgen.compile(**MN_BF16, arch="sm_90a", cache=False)


def test_problem_inferred_from_the_arrays(kbf16, kmn):
    assert kbf16.check(kmajor(300, 264, ld=272), kmajor(200, 264), kmajor(300, 200, ld=208)) == Problem(300, 200, 264, 272, 264, 208)
    out = FakeArray((301, 203), "float32", strides=(204, 1))
    assert kmn.check(mnmajor(301, 264, ld=304), mnmajor(203, 264, ld=208), out) == Problem(301, 203, 264, 304, 208, 204)
    # one row: its stride does not matter (K-major or MN-major alike)
    assert kbf16.check(FakeArray((1, 64), strides=(1, 1)), kmajor(8, 64), kmajor(1, 8)).lda == 64


@pytest.mark.parametrize("case, exc, words", [
    ("a_dtype", DTypeError, ["a has dtype f16 (torch.float16)", "takes bf16 inputs", "torch.bfloat16"]),
    ("b_dtype", DTypeError, ["b has dtype float64", "takes bf16"]),
    ("out_dtype", DTypeError, ["out has dtype f32", "writes bf16"]),
    ("a_3d", ArgumentError, ["a must be a 2-D array", "(2, 300, 64)"]),
    ("k_mismatch", ArgumentError, ["a is 300 x 64 and b is 200 x 72", "K columns", "b=w.t()"]),
    ("out_shape", ArgumentError, ["out has shape (200, 300)", "(300, 200)"]),
    ("a_mn_major", ArgumentError, ["a is M-major", "reads A K-major", "a.contiguous()", "mnmajor"]),
    ("b_mn_major", ArgumentError, ["b is N-major", "reads B K-major"]),
    ("neither_major", ArgumentError, ["neither dimension is contiguous"]),
    ("lda_unaligned", ArgumentError, ["a: its rows start 66 elements (132 B) apart", "multiple of 8 elements"]),
    ("ptr_unaligned", ArgumentError, ["b: its data at 0x7e0000000008 is not 16-byte aligned"]),
    ("out_unaligned_ld", ArgumentError, ["out: its rows start 201 elements", "multiple of 8", "out[:, :N]"]),
    ("out_col_major", ArgumentError, ["out must be row-major"]),
    ("broadcast", ArgumentError, ["broadcast", "contiguous()"]),
    ("cpu", ArgumentError, ["a is on cpu:0", "CUDA device memory"]),
    ("two_devices", ArgumentError, ["different devices", "b on cuda:1"]),
    ("no_out", ArgumentError, ["pass out=", "300 x 200 bf16", "torch tensors and CuPy arrays"]),
    ("k_zero", ProblemError, ["K=0 must be in 1.."]),
])
def test_argument_errors_name_the_argument_and_the_rule(kbf16, case, exc, words):
    a, b, out = kmajor(300, 64), kmajor(200, 64), kmajor(300, 200, ld=208)
    if case == "a_dtype":
        a = kmajor(300, 64, "float16")
    elif case == "b_dtype":
        b = kmajor(200, 64, "float64")
    elif case == "out_dtype":
        out = kmajor(300, 200, "float32", ld=208)
    elif case == "a_3d":
        a = FakeArray((2, 300, 64))
    elif case == "k_mismatch":
        b = kmajor(200, 72)
    elif case == "out_shape":
        out = kmajor(200, 300)
    elif case == "a_mn_major":
        a = mnmajor(300, 64, ld=304)
    elif case == "b_mn_major":
        b = mnmajor(200, 64)
    elif case == "neither_major":
        a = FakeArray((300, 64), strides=(128, 2))
    elif case == "lda_unaligned":
        a = kmajor(300, 64, ld=66)
    elif case == "ptr_unaligned":
        b = kmajor(200, 64, ptr=0x7E0000000008)
    elif case == "out_unaligned_ld":
        out = kmajor(300, 200, ld=201)
    elif case == "out_col_major":
        out = mnmajor(300, 200, ld=304)
    elif case == "broadcast":
        b = FakeArray((200, 64), strides=(0, 1))
    elif case == "cpu":
        a = kmajor(300, 64, device=(1, 0))
    elif case == "two_devices":
        b = kmajor(200, 64, device=(2, 1))
    elif case == "no_out":
        out = None
    elif case == "k_zero":
        a, b = FakeArray((300, 0)), FakeArray((200, 0))
    with pytest.raises(exc) as e:
        kbf16(a, b, out)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_mn_major_spec_refuses_k_major_operands(kmn):
    with pytest.raises(ArgumentError, match=r"a is K-major .* reads A M-major .*kmajor"):
        kmn(kmajor(300, 64), mnmajor(200, 64, ld=208), FakeArray((300, 200), "float32"))


def test_valid_arguments_without_a_gpu_raise_nogpu(kbf16):
    if _has_gpu():
        pytest.skip("a GPU is present: the fake pointers must not be launched")
    with pytest.raises(ptxgen.NoGPU):
        kbf16(kmajor(300, 64), kmajor(200, 64), kmajor(300, 200, ld=208))
    with pytest.raises(ptxgen.NoGPU):
        ptxgen.gemm(kmajor(300, 64), kmajor(200, 64), kmajor(300, 200, ld=208))
    with pytest.raises(ptxgen.NoGPU):
        kbf16.load()


def _fake_encode(args):
    """Stands in for the driver's tensor-map encoder: the map's first bytes record its arguments."""
    words = [args.global_address, *args.global_dims, args.global_strides[0], *args.box, args.swizzle]
    return b"".join(int(w).to_bytes(8, "little") for w in words).ljust(128, b"\0")


# ---------------------------------------------------------------------------------------------------
# streams, the launch path (simulated device), gemm's choice of spec
# ---------------------------------------------------------------------------------------------------
def test_stream_handles():
    class TorchLike:
        cuda_stream = 0x1234

    class CupyLike:
        ptr = 0x5678

    class Proto:
        def __cuda_stream__(self):
            return (0, 0x9ABC)

    assert api.stream_handle(None) == 0 and api.stream_handle(7) == 7
    assert api.stream_handle(TorchLike()) == 0x1234 and api.stream_handle(CupyLike()) == 0x5678
    assert api.stream_handle(Proto()) == 0x9ABC
    with pytest.raises(TypeError, match="stream must be"):
        api.stream_handle("default")
    with pytest.raises(TypeError):
        api.stream_handle(True)


def read_params(address: int, params) -> list:
    """The kernel parameters as cuLaunchKernel reads them through the void** array at ``address``."""
    import ctypes

    arr = (ctypes.c_void_p * len(params)).from_address(address)
    out = []
    for i, p in enumerate(params):
        if p.kind == "tensormap":
            out.append(ctypes.string_at(arr[i], 128))
        elif p.kind == "ptr":
            out.append(ctypes.c_uint64.from_address(arr[i]).value)
        else:
            out.append(ctypes.c_int32.from_address(arr[i]).value)
    return out


class SimulatedGPU:
    """A 9.0 device with a fake module loader and a fake driver (launch records, encode is _fake_encode)."""

    def __init__(self, monkeypatch):
        self.device = Device(0, "simulated H200", (9, 0), None, None, 132)
        self.loaded, self.launches, self.waited, self.encoded = {}, [], [], []
        sim = self

        class FakeKernel:
            func = 0xF00D

            def __init__(self, cubin, name, smem):
                sim.loaded.update(cubin=cubin, name=name, smem=smem)

            def max_active_clusters(self, size, block):
                return 132 // size

        class FakeDriver:
            def launch(self, func, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
                sim.launches.append(dict(func=func, grid=(gx, gy, gz), block=(bx, by, bz), smem=smem, stream=stream,
                                         params=params))
                return 0

            def encode(self, args):
                sim.encoded.append(args.global_address)
                return _fake_encode(args)

        monkeypatch.setattr(api.launch.streams, "require_gpu", lambda index=None: self.device)
        monkeypatch.setattr(api.launch.streams, "ensure_current", lambda dev: None)
        monkeypatch.setattr(api.launch.streams, "wait_for_producer", lambda producer, ours: self.waited.append((producer, ours)))
        monkeypatch.setattr("ptxgen.runtime.launch.gpu.Kernel", FakeKernel)
        monkeypatch.setattr("ptxgen.runtime.launch.fastlaunch._DRIVER", FakeDriver())


def _fresh(kernel):
    kernel._modules.clear()
    kernel._entries.clear()
    kernel._torch_entries.clear()


def test_launch_path_with_a_simulated_device(monkeypatch, kmn):
    """Everything up to cuLaunchKernel: problem, tensor maps (fake encoder), grid, block, shared bytes, stream,
    and a CUDA-array-interface producer stream waited on."""
    sim = SimulatedGPU(monkeypatch)
    _fresh(kmn)
    a = mnmajor(301, 264, ld=304, ptr=0x10000)
    b = mnmajor(203, 264, ld=208, ptr=0x20000)
    b.__cuda_array_interface__["stream"] = 0x77  # the producer's stream
    out = FakeArray((301, 203), "float32", strides=(204, 1), ptr=0x40000)

    class Stream:
        cuda_stream = 0x99

    assert kmn(a, b, out, stream=Stream()) is out
    assert sim.loaded["name"] == kmn.name and sim.loaded["cubin"] == kmn.cubin and sim.loaded["smem"] == kmn.shared_bytes
    (launch,) = sim.launches
    assert launch["func"] == 0xF00D and launch["smem"] == kmn.shared_bytes
    assert launch["grid"] == (3 * 2, 1, 1) and launch["block"] == kmn.block and launch["stream"] == 0x99
    args = read_params(launch["params"], kmn.params)
    assert args[2:] == [0x40000, 301, 203, 264, 204]
    a_map = args[0]
    assert int.from_bytes(a_map[:8], "little") == 0x10000 and int.from_bytes(a_map[8:16], "little") == 301  # M inner
    assert sim.waited == [(0x77, 0x99)]
    _fresh(kmn)

    with pytest.raises(ptxgen.NoGPU, match="arch='sm_90a'"):  # an sm_100a kernel on a 9.0 device
        k100 = ptxgen.compile(**MN_BF16, arch="sm_100a")
        k100(a, b, out)


def test_gemm_spec_selection():
    tuned, why = api.select_spec("bf16", "sm_90a", 4096, 4096, 4096)
    assert "tuned" in why and tuned.a.major is Major.K and tuned.b.major is Major.K and tuned.out_dtype.value == "bf16"
    f32_out, _ = api.select_spec("bf16", "sm_90a", 4096, 4096, 4096, out_dtype="f32")
    assert f32_out.out_dtype.value == "f32" and f32_out.bm == tuned.bm and f32_out.bn == tuned.bn
    mn, why = api.select_spec("bf16", "sm_90a", 1000, 1000, 1000, Major.MN, Major.K)
    assert mn.a.major is Major.MN and mn.b.major is Major.K and "the chooser's kernel for K-major operands" in why
    from ptxgen.api import select

    k_major = select.select_choice("bf16", "sm_90a", 1000, 1000, 1000, lda=1024, ldb=1024)[0]  # K-major, rows on a line
    assert (mn.bm, mn.bn, mn.stages, mn.schedule, mn.epilogue, mn.stream_k) == \
        (k_major.bm, k_major.bn, k_major.stages, k_major.schedule, k_major.epilogue, k_major.stream_k)
    select.MN_MAJOR_PICKS = False  # control: the switch off gives the default kernel
    try:
        off, why = api.select_spec("bf16", "sm_90a", 1000, 1000, 1000, Major.MN, Major.K)
    finally:
        select.MN_MAJOR_PICKS = True
    assert "default" in why and off != mn
    s8, _ = api.select_spec("s8", "sm_90a", 512, 512, 512)
    assert s8.acc.value == "s32" and s8.out_dtype.value == "s32" and s8.bk == 128
    tf32, _ = api.select_spec("tf32", "sm_100a", 512, 512, 512, Major.MN, Major.MN)
    assert tf32.a.token == "mnmajor-sw128b32" and tf32.out_dtype.value == "f32"
    e4m3, _ = api.select_spec("e4m3", "sm_90a", 8192, 8192, 8192)
    assert e4m3.dtype.value == "e4m3" and e4m3.out_dtype.value == "bf16"
    with pytest.raises(ArgumentError, match=r"b.contiguous\(\)"):  # wgmma transposes only 16-bit types
        api.select_spec("s8", "sm_90a", 512, 512, 512, Major.K, Major.MN)
    with pytest.raises(DTypeError):
        api.select_spec("s8", "sm_90a", 512, 512, 512, out_dtype="f32")


def test_gemm_spec_from_arrays():
    spec, _ = api.gemm_spec(mnmajor(300, 64, ld=304), kmajor(200, 64), arch="sm_90a")
    assert spec.a.major is Major.MN and spec.b.major is Major.K and spec.out_dtype.value == "bf16"
    spec, _ = api.gemm_spec(kmajor(300, 64, "float32"), kmajor(200, 64, "float32"), arch="sm_90a")
    assert spec.dtype.value == "tf32" and spec.out_dtype.value == "f32"
    spec, _ = api.gemm_spec(kmajor(300, 64), kmajor(200, 64), FakeArray((300, 200), "float32"), arch="sm_90a")
    assert spec.out_dtype.value == "f32"
    with pytest.raises(DTypeError, match="a is bf16 .* but b is f16"):
        api.gemm_spec(kmajor(300, 64), kmajor(200, 64, "float16"), arch="sm_90a")
    with pytest.raises(DTypeError, match="int32"):
        api.gemm_spec(kmajor(300, 64, "int32"), kmajor(200, 64, "int32"), arch="sm_90a")


def test_example_and_readme_use_the_public_api():
    text = (ROOT / "examples" / "torch_gemm.py").read_text()
    assert "ptxgen.compile(" in text and "ptxgen.gemm(" in text
    reference = (ROOT / "docs" / "reference.md").read_text()  # the README's API section points there
    assert reference.index("## From Python") < reference.index("## The tile DSL")


# ---------------------------------------------------------------------------------------------------
# gpu tier: torch and CuPy
# ---------------------------------------------------------------------------------------------------
def _rel(got, ref) -> float:
    import torch

    got, ref = torch.as_tensor(got).double(), torch.as_tensor(ref).double()
    return float(torch.linalg.norm(got - ref) / torch.linalg.norm(ref))


@pytest.mark.gpu
def test_torch_odd_shapes_allocated_out(gpu):
    torch = pytest.importorskip("torch")
    k = ptxgen.compile(**BF16, arch=gpu.arch.value)
    m, n, kk = 301, 203, 264
    a = torch.randn(m, kk, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, kk, device="cuda", dtype=torch.bfloat16)
    out = k(a, b)
    torch.cuda.synchronize()
    assert out.shape == (m, n) and out.dtype == torch.bfloat16 and out.stride() == (208, 1)  # rows padded to 16 B
    assert _rel(out, a.double() @ b.double().t()) < 1e-2
    assert _rel(out, torch.matmul(a, b.t())) < 1e-2


@pytest.mark.gpu
def test_torch_given_out_is_written_in_place_and_nothing_else(gpu):
    torch = pytest.importorskip("torch")
    k = ptxgen.compile(**F16_F32, arch=gpu.arch.value)
    m, n, kk = 257, 190, 136
    a = torch.randn(m, kk, device="cuda", dtype=torch.float16)
    b = torch.randn(n, kk, device="cuda", dtype=torch.float16)
    full = torch.full((m, 192), float("nan"), device="cuda", dtype=torch.float32)
    out = full[:, :n]
    assert k(a, b, out) is out
    torch.cuda.synchronize()
    assert _rel(out, a.double() @ b.double().t()) < 1e-3
    assert torch.isnan(full[:, n:]).all()  # the row padding is not written


@pytest.mark.gpu
def test_torch_non_default_stream(gpu):
    torch = pytest.importorskip("torch")
    k = ptxgen.compile(**BF16, arch=gpu.arch.value)
    a = torch.randn(1024, 512, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(768, 512, device="cuda", dtype=torch.bfloat16)
    ref = torch.matmul(a, b.t())
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    out1 = k(a, b, stream=s)  # a torch.cuda.Stream
    out2 = torch.empty(1024, 768, device="cuda", dtype=torch.bfloat16)
    k(a, b, out2, stream=s.cuda_stream)  # a raw handle
    with torch.cuda.stream(s):  # None: torch's current stream
        out3 = k(a, b)
    s.synchronize()
    for out in (out1, out2, out3):
        assert _rel(out, ref) < 1e-2


@pytest.mark.gpu
def test_torch_mn_major_operands_as_transposed_views(gpu):
    torch = pytest.importorskip("torch")
    k = ptxgen.compile(**MN_BF16, arch=gpu.arch.value)
    m, n, kk = 300, 200, 264
    at = torch.randn(kk, m + 4, device="cuda", dtype=torch.bfloat16)[:, :m]  # K x M, rows padded to 304
    bt = torch.randn(kk, n, device="cuda", dtype=torch.bfloat16)  # K x N: b = bt.t() is N x K, N-major
    out = k(at.t(), bt.t())
    torch.cuda.synchronize()
    assert out.dtype == torch.float32
    assert _rel(out, at.t().double() @ bt.double()) < 1e-3
    with pytest.raises(ArgumentError, match="K-major"):
        k(at.t().contiguous(), bt.t())


@pytest.mark.gpu
def test_torch_integer_and_tf32(gpu):
    torch = pytest.importorskip("torch")
    arch = gpu.arch.value
    a = torch.randint(-100, 100, (200, 272), device="cuda", dtype=torch.int8)
    b = torch.randint(-100, 100, (136, 272), device="cuda", dtype=torch.int8)
    out = ptxgen.compile(**S8, arch=arch)(a, b)
    torch.cuda.synchronize()
    assert out.dtype == torch.int32 and torch.equal(out.cpu().long(), a.cpu().long() @ b.cpu().long().t())
    x = torch.randn(200, 260, device="cuda")
    y = torch.randn(150, 260, device="cuda")
    out = ptxgen.compile(**TF32, arch=arch)(x, y)
    torch.cuda.synchronize()
    assert _rel(out, x.double() @ y.double().t()) < 5e-3


@pytest.mark.gpu
def test_torch_gemm_chooses_the_spec(gpu):
    torch = pytest.importorskip("torch")
    a = torch.randn(1000, 512, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(700, 512, device="cuda", dtype=torch.bfloat16)
    out = ptxgen.gemm(a, b)
    spec, why = api.gemm_spec(a, b)
    assert out.dtype == torch.bfloat16 and spec.dtype.value == "bf16" and why
    w = torch.randn(512, 704, device="cuda", dtype=torch.bfloat16)[:, :700]  # K x N, rows 16-byte aligned: a @ w is gemm(a, w.t())
    out2 = ptxgen.gemm(a, w.t(), out_dtype="f32")
    a8 = (torch.randn(512, 256, device="cuda") * 0.5).to(torch.float8_e4m3fn)
    b8 = (torch.randn(384, 256, device="cuda") * 0.5).to(torch.float8_e4m3fn)
    out8 = ptxgen.gemm(a8, b8)
    torch.cuda.synchronize()
    assert _rel(out, a.double() @ b.double().t()) < 1e-2
    assert out2.dtype == torch.float32 and _rel(out2, a.double() @ w.double()) < 1e-3
    assert out8.dtype == torch.bfloat16 and _rel(out8, a8.float().double() @ b8.float().double().t()) < 1e-2
    assert api.kernel_for(spec) is api.kernel_for(spec)  # compiled once per process


@pytest.mark.gpu
def test_generic_array_paths_on_the_gpu(gpu):
    """Objects that expose only __cuda_array_interface__ (device from the driver) or only DLPack."""
    torch = pytest.importorskip("torch")
    k = ptxgen.compile(**BF16, arch=gpu.arch.value)
    a = torch.randn(256, 128, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(192, 128, device="cuda", dtype=torch.bfloat16)
    out = torch.zeros(256, 192, device="cuda", dtype=torch.bfloat16)

    class CAIOnly:
        def __init__(self, t):
            self.t, self.dtype = t, "bfloat16"
            self.__cuda_array_interface__ = {"shape": tuple(t.shape), "typestr": "<f2", "data": (t.data_ptr(), False),
                                             "strides": tuple(s * 2 for s in t.stride()), "version": 2}

    class DLPackOnly:
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, stream=None):
            return self.t.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    assert read_array(DLPackOnly(a), "a", 0).dtype == "bf16"
    k(CAIOnly(a), DLPackOnly(b), CAIOnly(out))
    torch.cuda.synchronize()
    assert _rel(out, a.double() @ b.double().t()) < 1e-2
    with pytest.raises(ArgumentError, match="a is on cpu:0"):
        k(a.cpu(), b, out)


@pytest.mark.gpu
def test_other_arch_raises_nogpu(gpu):
    torch = pytest.importorskip("torch")
    other = "sm_100a" if gpu.arch.value == "sm_90a" else "sm_90a"
    k = ptxgen.compile(**BF16, arch=other)
    a = torch.randn(128, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ptxgen.NoGPU, match=f"arch='{gpu.arch.value}'"):
        k(a, a)


@pytest.mark.gpu
def test_cupy_arrays(gpu):
    cupy = pytest.importorskip("cupy")
    arch = gpu.arch.value
    k = ptxgen.compile(**F16_F32, arch=arch)
    m, n, kk = 333, 190, 200
    a = cupy.random.standard_normal((m, kk)).astype(cupy.float16)
    b = cupy.random.standard_normal((n, kk)).astype(cupy.float16)
    out = k(a, b)
    ref = cupy.matmul(a.astype(cupy.float64), b.T.astype(cupy.float64))
    cupy.cuda.Device().synchronize()
    assert isinstance(out, cupy.ndarray) and out.dtype == cupy.float32 and out.shape == (m, n)
    assert float(cupy.linalg.norm(out - ref) / cupy.linalg.norm(ref)) < 1e-3
    s = cupy.cuda.Stream(non_blocking=True)
    with s:  # None: CuPy's current stream
        a2, b2 = a * 2, b
        out2 = k(a2, b2)
    given = cupy.empty((m, 192), dtype=cupy.float32)[:, :n]  # rows 16-byte aligned
    k(a, b, given, stream=s)
    s.synchronize()
    assert float(cupy.linalg.norm(out2 - 2 * ref) / cupy.linalg.norm(2 * ref)) < 1e-3
    assert float(cupy.linalg.norm(given - ref) / cupy.linalg.norm(ref)) < 1e-3
    ai = cupy.random.randint(-50, 50, (200, 256)).astype(cupy.int8)
    bi = cupy.random.randint(-50, 50, (120, 256)).astype(cupy.int8)
    got = ptxgen.gemm(ai, bi)
    want = cupy.matmul(ai.astype(cupy.float64), bi.T.astype(cupy.float64))
    cupy.cuda.Device().synchronize()
    assert got.dtype == cupy.int32 and bool((got.astype(cupy.float64) == want).all())
    at = cupy.random.standard_normal((kk, m + 3)).astype(cupy.float16)[:, :m]  # M-major A as a transposed view, lda 336
    got = ptxgen.gemm(at.T, b, out_dtype="f32")
    want = cupy.matmul(at.T.astype(cupy.float64), b.T.astype(cupy.float64))
    cupy.cuda.Device().synchronize()
    assert float(cupy.linalg.norm(got - want) / cupy.linalg.norm(want)) < 1e-3
