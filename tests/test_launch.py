"""The host side of launching, exercised without a GPU (shared by sm_90a and sm_100a)."""

import numpy as np
import pytest

from ptxgen.derive.layout import derive
from ptxgen.runtime.gpu import NoGPU, arch_for_compute_capability
from ptxgen.runtime.launch import Problem, ProblemError, check_problem, gemm_args, launch_geometry, problem_errors
from ptxgen.runtime.validate import default_problem, host_operand
from ptxgen.derive.spec import make_spec
from ptxgen.isa.types import Arch


def test_arch_by_compute_capability():
    assert arch_for_compute_capability(9, 0) is Arch.SM90A
    assert arch_for_compute_capability(10, 0) is Arch.SM100A and arch_for_compute_capability(10, 3) is Arch.SM100A
    for cc in ((12, 0), (8, 0), (8, 9)):
        with pytest.raises(NoGPU):
            arch_for_compute_capability(*cc)
    with pytest.raises(NoGPU, match="no tcgen05"):
        arch_for_compute_capability(12, 0)


def test_argument_marshalling():
    p = Problem(256, 384, 512, 512, 384, 400)
    args = gemm_args(0x7F0000001000, 0x7F0000002000, 0x7F0000004000, p)
    assert args.read_back() == [0x7F0000001000, 0x7F0000002000, 0x7F0000004000, 256, 384, 512, 512, 384, 400]
    import ctypes

    ptrs = ctypes.cast(args.address, ctypes.POINTER(ctypes.c_void_p))
    assert ctypes.c_int32.from_address(ptrs[3]).value == 256  # the void** array points at the values
    with pytest.raises(ProblemError):
        gemm_args(0x1001, 0x2000, 0x3000, p)


@pytest.mark.parametrize("arch", ["sm_100a", "sm_90a"])
def test_problem_checks_and_geometry(arch):
    spec = make_spec(bm=128, bn=128, bk=64, a="kmajor-sw128", b="mnmajor-sw128", arch=arch)
    p = Problem.tight(spec, 384, 256, 320)
    assert (p.lda, p.ldb, p.ldd) == (320, 256, 256)
    check_problem(spec, p)
    grid, block, smem = launch_geometry(derive(spec), p)
    assert grid == (2, 3, 1) and block == (spec.threads, 1, 1) and smem == derive(spec).smem.dynamic_bytes
    errs = problem_errors(spec, Problem(300, 256, 320, 320, 256, 256))
    assert any("M=300" in e for e in errs)
    errs = problem_errors(spec, Problem(384, 256, 320, 321, 256, 256))
    assert any("lda" in e for e in errs)
    with pytest.raises(ProblemError, match="K=100"):
        check_problem(spec, Problem(384, 256, 100, 100, 256, 256))


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


def test_tcgen05_path_up_to_the_launch(monkeypatch):
    """On compute capability 10.x validate builds and loads the sm_100a cubin with the same arguments
    as on Hopper. Simulated device (no Blackwell here): this checks the code path, not the hardware."""
    import ptxgen.runtime.validate as v
    from ptxgen.runtime.gpu import Device

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
    spec = make_spec(bm=128, bn=128, bk=32, a="kmajor-sw64")
    res = v.validate_spec(spec, seed=0)
    assert launched["name"] == spec.kernel_name and launched["block"] == (128, 1, 1)
    assert launched["grid"] == (2, 3, 1) and launched["args"][3:6] == [384, 256, 160]
    assert b"sm_100a" in launched["cubin"] or launched["cubin"][:4] == b"\x7fELF"
    assert not res.passed and res.unwritten == 384 * 256  # nothing ran: every output is still poison
    with pytest.raises(NoGPU):
        v.validate_spec(make_spec(bm=128, bn=128, bk=64, a="kmajor-sw64", arch="sm_90a"))
