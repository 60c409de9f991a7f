import sys, time
from pathlib import Path
from ptxgen.runtime import toolchains as T
from ptxgen.emit.generated import kernel_dirs, read_layout_json
from ptxgen.derive.spec import TileSpec
specs=[TileSpec.from_json(read_layout_json(d)["spec"]) for d in kernel_dirs(Path("generated"))]
specs=[s for s in specs if s.arch.value==sys.argv[1]]
tcs = T.installed() + [T.Toolchain("pinned", None)]
for tc in tcs:
    t=time.time()
    for r in T.compile_and_check(tc, specs, Path(f"/tmp/tcwork/{tc.name}")):
        print(tc.name, r.version, r.kernel[:70], "LDL/STL", r.local_instructions, "stack", r.stack_bytes, "|", "; ".join(r.problems)[:200])
    print(tc.name, "%.1fs" % (time.time()-t))
