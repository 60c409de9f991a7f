"""The grouped flagship for compute-sanitizer (tests/test_grouped.py): one small grouped GEMM without torch.

f16 inputs in plain device buffers passed through __cuda_array_interface__; groups of 0, 1, 130, 7, 0, 257, 128 and
3 rows (empty groups, partial tiles, a tile row crossing into the next group), N = 300 (a partial column tile and a
padded out), K = 200 (a partial K-tile), three spare rows past the last group; checked against numpy per group.
Prints PASS or FAIL (exit 1). Usage: python tools/grouped_flagship.py [--spec-json '{...}']
"""

import json
import sys

import numpy as np

import ptxgen
from ptxgen.runtime.launch.gpu import Buffer, NoGPU, _driver, check, require_gpu

SPEC = dict(bm=128, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="f16", out_dtype="f16", arch="sm_90a", stages=4,
            schedule="persistent", epilogue="tma", grouped="offs")


class DeviceArray:
    def __init__(self, buf: Buffer, shape, typestr: str, strides=None):
        self.buf = buf
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (buf.address, False),
                                         "strides": strides, "version": 2}


def main() -> int:
    spec = dict(SPEC, **(json.loads(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[1] == "--spec-json" else {}))
    try:
        require_gpu()
    except NoGPU as e:
        print(f"no GPU: {e}")
        return 3
    kern = ptxgen.compile_grouped(ptxgen.make_spec(**spec))
    rng = np.random.default_rng(11)
    sizes = [0, 1, 130, 7, 0, 257, 128, 3]
    n, k, ldd = 300, 200, 304
    m = sum(sizes) + 3
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((len(sizes), n, k)).astype(np.float16)
    offs = np.cumsum(sizes).astype(np.int32)
    bufs = [Buffer(x.nbytes) for x in (a, b, offs)]
    for buf, x in zip(bufs, (a, b, offs)):
        buf.upload(x)
    out_buf = Buffer(m * ldd * 2)
    out_buf.fill_u16(0x4500)  # 5.0 in f16: rows past the last group must keep it
    kern(DeviceArray(bufs[0], a.shape, "<f2"), DeviceArray(bufs[1], b.shape, "<f2"), DeviceArray(bufs[2], offs.shape, "<i4"),
         DeviceArray(out_buf, (m, n), "<f2", (ldd * 2, 2)))
    check(_driver().cuCtxSynchronize(), "cuCtxSynchronize")
    got = out_buf.download(np.float16, m * ldd).reshape(m, ldd)[:, :n].astype(np.float32)
    ok, start = True, 0
    for g, end in enumerate(offs):
        if end > start:
            ref = a[start:end].astype(np.float32) @ b[g].astype(np.float32).T
            err = float(np.max(np.abs(got[start:end] - ref) / (np.abs(ref) + 1.0)))
            if err > 5e-3:
                print(f"group {g} rows {start}..{end - 1}: worst relative error {err:.3e}")
                ok = False
        start = int(end)
    if not np.all(got[start:] == 5.0):
        print("rows past the last group were written")
        ok = False
    print(("PASS" if ok else "FAIL") + f" {kern.name} groups {sizes} N={n} K={k}")
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):  # the usage, without a GPU (tests/test_tools.py)
        sys.exit(print(__doc__))
    sys.exit(main())
