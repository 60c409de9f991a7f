"""The host side of launching, exercised without a GPU (shared by sm_90a and sm_100a)."""

import numpy as np
import pytest

from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.tile.layout import derive
from ptxgen.runtime.launch.gpu import NoGPU, arch_for_compute_capability
from ptxgen.runtime.launch.launch import Problem, ProblemError, check_problem, gemm_args, launch_geometry, problem_errors
from ptxgen.runtime.check.validate import host_operand
from ptxgen.runtime.check.vresult import default_problem
from ptxgen.derive.tile.spec import make_spec
from ptxgen.isa.types import Arch


def test_arch_by_compute_capability():
    assert arch_for_compute_capability(9, 0) is Arch.SM90A
    assert arch_for_compute_capability(10, 0) is Arch.SM100A and arch_for_compute_capability(10, 3) is Arch.SM100A
    for cc in ((12, 0), (8, 0), (8, 9)):
        with pytest.raises(NoGPU):
            arch_for_compute_capability(*cc)
    with pytest.raises(NoGPU, match="no tcgen05"):
        arch_for_compute_capability(12, 0)


def _fake_encode(args):
    """Stands in for the driver's encoder: the map's first bytes record the arguments it was given."""
    words = [args.global_address, *args.global_dims, args.global_strides[0], *args.box, args.swizzle]
    return b"".join(int(w).to_bytes(8, "little") for w in words).ljust(128, b"\0")


def test_argument_marshalling_cp_async():
    spec = make_spec(bm=128, bn=128, bk=64, a="kmajor-sw128", b="mnmajor-sw128", arch="sm_90a", loader="cp.async")
    p = Problem(256, 384, 512, 512, 384, 400)
    args = gemm_args(plan_kernel(spec), 0x7F0000001000, 0x7F0000002000, 0x7F0000004000, p)
    assert args.read_back() == [0x7F0000001000, 0x7F0000002000, 0x7F0000004000, 256, 384, 512, 512, 384, 400]
    import ctypes

    ptrs = ctypes.cast(args.address, ctypes.POINTER(ctypes.c_void_p))
    assert ctypes.c_int32.from_address(ptrs[3]).value == 256  # the void** array points at the values
    with pytest.raises(ProblemError):
        gemm_args(plan_kernel(spec), 0x1001, 0x2000, 0x3000, p)


def test_argument_marshalling_tma_follows_the_abi():
    """TMA kernels take (tmap_a, tmap_b, D, M, N, K, ldd); each map is built from the operand's TmaPlan:
    dims inner first (K for K-major A, N for N-major B), row stride ld x element size, the plan's box."""
    spec = make_spec(bm=128, bn=128, bk=64, a="kmajor-sw128", b="mnmajor-sw128", arch="sm_90a")
    plan = plan_kernel(spec)
    assert [q.name for q in plan.abi.params] == ["tmap_a", "tmap_b", "D", "M", "N", "K", "ldd"]
    p = Problem(300, 200, 100, 104, 200, 200)
    args = gemm_args(plan, 0x10000, 0x20000, 0x30000, p, encode=_fake_encode)
    import ctypes

    ptrs = ctypes.cast(args.address, ctypes.POINTER(ctypes.c_void_p))
    assert all(ptrs[i] % 64 == 0 for i in (0, 1))  # tensor maps are 64-byte aligned
    a_map = ctypes.string_at(ptrs[0], 128)
    words = [int.from_bytes(a_map[8 * i: 8 * i + 8], "little") for i in range(7)]
    assert words == [0x10000, 100, 300, 104 * 2, 64, 128, 3]  # A: K x M, stride lda x 2 B, box 64 x 128, 128B
    b_map = ctypes.string_at(ptrs[1], 128)
    words = [int.from_bytes(b_map[8 * i: 8 * i + 8], "little") for i in range(7)]
    assert words[:4] == [0x20000, 200, 100, 200 * 2]  # N-major B: N x K
    assert args.read_back()[2:] == [0x30000, 300, 200, 100, 200]


@pytest.mark.parametrize("arch", ["sm_100a", "sm_90a"])
def test_problem_checks_and_geometry(arch):
    spec = make_spec(bm=128, bn=128, bk=64, a="kmajor-sw128", b="mnmajor-sw128", arch=arch)
    plan = plan_kernel(spec)
    p = Problem.tight(spec, 384, 256, 320)
    assert (p.lda, p.ldb, p.ldd) == (320, 256, 256)
    check_problem(spec, p)
    grid, block, smem = launch_geometry(plan, p)
    assert grid == (6, 1, 1) and block == (plan.pipeline.threads, 1, 1) and smem == derive(spec).smem.dynamic_bytes  # 3 x 2 tiles
    # partial tiles: any M, N, K >= 1 with 16-byte rows
    grid, _, _ = launch_geometry(plan, Problem.padded(spec, 300, 129, 7))
    assert grid == (6, 1, 1)  # ceil(300 / 128) x ceil(129 / 128) tiles, partial ones included
    persistent = plan_kernel(make_spec(bm=128, bn=128, bk=64, a="kmajor-sw128", b="mnmajor-sw128", arch=arch, schedule="persistent"))
    assert launch_geometry(persistent, Problem.padded(spec, 4096, 4096, 64), sm_count=132)[0] == (132, 1, 1)
    assert launch_geometry(persistent, Problem.padded(spec, 300, 129, 7), sm_count=132)[0] == (6, 1, 1)
    check_problem(spec, Problem.padded(spec, 1, 8, 8))
    assert Problem.padded(spec, 300, 130, 7).lda == 8 and Problem.padded(spec, 300, 130, 7).ldd == 132
    errs = problem_errors(spec, Problem(384, 256, 320, 321, 256, 256))
    assert any("lda" in e and "16 B" in e for e in errs)
    errs = problem_errors(spec, Problem(384, 256, 0, 8, 256, 256))
    assert any("K=0" in e for e in errs)
    with pytest.raises(ProblemError, match="ldd"):
        check_problem(spec, Problem(384, 250, 100, 104, 256, 250))


def test_default_problem_spans_several_tiles():
    spec = make_spec(bm=128, bn=64, bk=64, a="kmajor-sw128", stages=3)
    m, n, k = default_problem(spec)
    assert m // 128 >= 2 and n // 64 >= 2 and k // 64 > spec.stages and len({m, n, k}) == 3


def test_host_operand_layouts():
    spec = make_spec(bm=128, bn=128, bk=64, a="mnmajor-sw128", b="kmajor-sw128")
    p = Problem.tight(spec, 256, 128, 192)
    a = np.arange(256 * 192, dtype=np.uint16).reshape(256, 192)
    ga = host_operand(spec, "a", a, p)  # MN-major A is K x M
    assert ga.shape == (192, 256) and ga[5, 7] == a[7, 5]
    b = np.arange(128 * 192, dtype=np.uint16).reshape(128, 192)
    assert np.array_equal(host_operand(spec, "b", b, p), b)  # K-major B is N x K


@pytest.mark.parametrize(
    "kw,grid,mnk",
    [(dict(bm=128, bn=128, bk=32, a="kmajor-sw64"), 6, [384, 256, 160]),
     # a CTA pair: __cluster_dims__(2, 1, 1) in the kernel, two CTAs per tile (2 x 6 tiles)
     (dict(bm=128, bn=128, bk=64, a="kmajor-sw128", b="mnmajor-sw128", cta_group=2, stages=4), 12, [384, 256, 576])],
    ids=["cta_group1", "cta_pair"],
)
def test_tcgen05_path_up_to_the_launch(monkeypatch, kw, grid, mnk):
    """On compute capability 10.x validate builds and loads the sm_100a cubin with the same arguments
    as on Hopper. Simulated device (no Blackwell here): this checks the code path, not the hardware."""
    import ptxgen.runtime.check.validate as v
    from ptxgen.runtime.launch.gpu import Device

    fake = Device(0, "simulated CC 10.0", (10, 0), None, None)
    monkeypatch.setattr(v, "require_gpu", lambda: fake)
    launched = {}

    class FakeKernel:
        def __init__(self, cubin, name, smem):
            launched.update(cubin=cubin, name=name, smem=smem)

        def launch(self, grid, block, args):
            launched.update(grid=grid, block=block, args=args.read_back())

        def unload(self):
            pass

    class FakeBuffer:
        next_addr = 0x10000

        def __init__(self, nbytes):
            self.nbytes, self.address = nbytes, FakeBuffer.next_addr
            FakeBuffer.next_addr += (nbytes + 255) // 256 * 256
            self.data = np.zeros(nbytes, np.uint8)

        def upload(self, host):
            self.data[: host.nbytes] = np.ascontiguousarray(host).view(np.uint8).ravel()

        def fill_u32(self, v):
            self.data.view(np.uint32)[:] = v

        def fill_u16(self, v):
            self.data.view(np.uint16)[:] = v

        def download(self, dtype, count):
            return self.data.view(dtype)[:count].copy()

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

    monkeypatch.setattr(v, "Kernel", FakeKernel)
    monkeypatch.setattr(v, "Buffer", FakeBuffer)
    monkeypatch.setattr(v, "synchronize", lambda what="": None)
    monkeypatch.setattr("ptxgen.runtime.launch.tensormap.encode", _fake_encode)  # the driver's encoder is not here
    spec = make_spec(**kw)
    res = v.validate_spec(spec, seed=0)
    assert launched["name"] == spec.kernel_name and launched["block"] == (plan_kernel(spec).pipeline.threads, 1, 1)
    assert launched["grid"] == (grid, 1, 1) and launched["args"][3:6] == mnk
    assert b"sm_100a" in launched["cubin"] or launched["cubin"][:4] == b"\x7fELF"
    assert not res.passed and res.unwritten == 384 * 256  # nothing ran: every output is still poison
    with pytest.raises(NoGPU):
        v.validate_spec(make_spec(bm=128, bn=128, bk=64, a="kmajor-sw64", arch="sm_90a"))
