"""The oldest supported NVRTC (12.8, a PyPI wheel) over the kernel kinds this session added (stream-K, M-major D /
swap-AB, the e4m3 cost model's picks, block FP8 wide tiles and halves, grouped block FP8): the SASS gate, no local
memory. Usage: python tools/toolchain_matrix.py --install DIR --only 12.8; PTXGEN_TOOLCHAINS=DIR python tools/toolchain_s4_kernels.py"""
import sys, tempfile
from pathlib import Path
from ptxgen import make_spec
from ptxgen.runtime import toolchains
from ptxgen.api.fp8blocks import default_spec as bfp8_default
from ptxgen.grouped import blockscaled_grouped_spec
from ptxgen.runtime.choose import choose_spec
base = dict(a="kmajor-sw128", b="kmajor-sw128", dtype="bf16", acc="f32", arch="sm_90a", out_dtype="bf16")
specs = {}
for shape in [(5000, 5000, 5000), (2500, 10000, 4000), (1500, 9000, 3000), (1, 16384, 4096), (16, 7168, 16384)]:
    s, why = choose_spec("bf16", "sm_90a", *shape)
    specs[f"chosen {shape}"] = s
for shape in [(4096, 4096, 5008), (5120, 5120, 5008), (64, 7168, 16384)]:
    s, why = choose_spec("e4m3", "sm_90a", *shape)
    specs[f"chosen e4m3 {shape}"] = s
specs["swap d_major m 128x16"] = make_spec(bm=128, bn=16, bk=64, stages=10, d_major="m", **base)
specs["block fp8 default"] = bfp8_default()
specs["block fp8 halves"] = bfp8_default(fp8_overlap="halves")
specs["block fp8 direct f32"] = bfp8_default("f32")
specs["grouped block fp8"] = blockscaled_grouped_spec()
for k, s in specs.items():
    print(k, s.kernel_name)
tc = [t for t in toolchains.installed() if t.name == toolchains.OLDEST][0]
res = toolchains.compile_and_check(tc, list(specs.values()), Path(tempfile.mkdtemp()))
bad = 0
for r in res:
    ok = not r.problems and r.local_instructions == 0 and r.stack_bytes == 0
    bad += not ok
    print(f"{'PASS' if ok else 'FAIL'} {r.version} {r.kernel} problems={r.problems} local={r.local_instructions} stack={r.stack_bytes}")
print(f"{len(res) - bad} of {len(res)} pass under NVRTC {toolchains.OLDEST}")
