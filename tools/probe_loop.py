"""Probe (issue 17, 2026-12-02): what the consumer's K loop costs around the MMAs. DeepGEMM's SM90 1D2D kernel, the same
128 x 192 tile without a cluster, keeps the tensor pipe 96% busy where ours is at 86% (ncu, runs/2026-12-02-blockfp8-pingpong-loop/
run2). Its loop issues each K block's four QGMMA from uniform registers, ours moved every descriptor start through
R2UR (the consumer warpgroup index ``tid / 128`` is not warp-uniform to ptxas); its loop is unrolled, so the next
stage's barrier check sits among the promotion's FFMA. This probe times forms of the rendered default kernel, each
made from the source by a rewrite that is asserted to apply (a diagnostic, not a code path of ptxgen):

  nonuni   the warpgroup index as plain ``tid / 128``, the K loop not unrolled (the templates before 2026-12-02)
  uni      ``__shfl_sync`` makes the index warp-uniform (the templates since 2026-12-02), the K loop not unrolled
  uniu     uni, and the stage and phase from an unsigned K-tile counter (no signed-division fix-ups)
  uniN     uni, the consumer's K loop unrolled N times (``#pragma unroll N``; uni2 is the block-FP8 kernel since 2026-12-02);
           uniuN both
  *-tmasf  the A scales by TMA (--fp8-scale-load tma) instead of the scale warp
  plain-*  the per-tensor twin of the same tile

    python tools/probe_loop.py bench 4096x7168x16384 8192x8192x8192 2048x7168x4096 [--rounds 8] [--forms uni,uniu2]
    python tools/probe_loop.py once 4096x7168x16384 FORM   # one launch per call after 3 warm-up (for ncu --launch-skip 3)
"""

from __future__ import annotations

import json
import re
import sys

import ptxgen.api.fp8blocks
from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.emit.render import render_kernel
from ptxgen.runtime.compile.cache import compile_cached
from ptxgen.runtime.launch.gpu import require_gpu

from bench_blockfp8 import Launch, inputs, per_tensor_twin, race  # tools/ (the script's folder) is on sys.path

UNIFORM = "const int wg = __shfl_sync(0xffffffffu, tid / 128, 0), wg_tid = tid % 128;"  # as rendered (KernelView.wg_expr)
NONUNIFORM = "const int wg = tid / 128, wg_tid = tid % 128;"
LOOP = "#pragma unroll 1\n    for (int kt = 0; kt < num_k_tiles; ++kt, ++it) {"
FORMS = ("nonuni", "uni", "uniu", "uni2", "uni4", "uni8", "uniu2", "uniu4", "uni2-tmasf", "uniu2-tmasf", "plain-nonuni",
         "plain-uni", "plain-uni2")


def _sub(src: str, old: str, new: str, count: int | None = None) -> str:
    n = src.count(old)
    assert n >= 1 and (count is None or n == count), (old, n)
    return src.replace(old, new)


def rewrite(src: str, form: str) -> str:
    """The rendered source (uniform warpgroup index) in FORM: nonuni | uni[u][N] (u: unsigned counter, N: unroll)."""
    core = form.removeprefix("plain-").removesuffix("-tmasf")
    # the consumer's K loop as the template had it before 2026-12-02 (unroll 1); the block-FP8 loop renders unroll 2 since
    out, n = re.subn(r"#pragma unroll \d+\n(    for \(int kt = 0; kt < num_k_tiles; \+\+kt, \+\+it\) \{)", r"#pragma unroll 1\n\1", src)
    assert n == 1, n
    if core == "nonuni":
        return _sub(out, UNIFORM, NONUNIFORM, 1)
    m = re.fullmatch(r"uni(u?)(\d*)", core)
    assert m, form
    if m.group(1):
        # the consumers' and the scale slots' stage/phase from the K-tile counter, unsigned
        out, n = re.subn(r"\bit % (\d+)\b", r"static_cast<int>(static_cast<unsigned>(it) % \1u)", out)
        out, n2 = re.subn(r"\(it / (\d+)\)", r"(static_cast<unsigned>(it) / \1u)", out)
        assert n >= 2 and n2 >= 1, (n, n2)
    if m.group(2):
        out = _sub(out, LOOP, LOOP.replace("unroll 1", f"unroll {m.group(2)}"), 1)
    return out


def kernel(form: str) -> tuple:
    """(spec, cubin, name) of the default block-FP8 kernel (or its per-tensor twin, ``plain-*``) in FORM."""
    spec = ptxgen.api.fp8blocks.default_spec(**({"fp8_scale_load": "tma"} if form.endswith("-tmasf") else {}))
    if form.startswith("plain-"):
        spec = per_tensor_twin(spec)
    src = rewrite(render_kernel(plan_kernel(spec)), form)
    name = spec.kernel_name
    return spec, compile_cached(src, name, "sm_90a").compiled.cubin, name


def launch(torch, dev, built, a, b, sa, sb, kb4, d) -> Launch:
    spec, cubin, name = built
    m, k = a.shape
    extra = {} if spec.fp8_blocks.value == "none" else {"SFA": sa.data_ptr(), "SFB": sb.data_ptr(), "lds_a": m,
                                                        "lds_b": kb4}
    return Launch(spec, m, b.shape[0], k, a, b, d, extra, dev, torch, cubin=cubin, name=name)


def bench(shapes: list[str], rounds: int, forms: list[str]) -> int:
    import torch

    dev = require_gpu()
    ok = True
    built = {f: kernel(f) for f in forms}
    for shape in shapes:
        m, n, k = map(int, shape.split("x"))
        ms, outs, ref = race(torch, dev, built, launch, shape, rounds)
        # block forms: bit for bit torch's output (as the default kernel is); plain forms: each other
        same = {f: bool(torch.equal(outs[f], ref)) for f in built if not f.startswith("plain-")}
        plain = [f for f in built if f.startswith("plain-")]
        same.update({f: bool(torch.equal(outs[f], outs[plain[0]])) for f in plain})
        ok &= all(same.values())
        tf = {nm: 2.0 * m * n * k / t / 1e9 for nm, t in ms.items()}
        print(json.dumps({"shape": shape, "tflops": {nm: round(v, 1) for nm, v in tf.items()},
                          "ratio_vs_torch": {f: round(ms["torch"] / ms[f], 4) for f in built},
                          "outputs_as_expected": same, "rounds": rounds}), flush=True)
    return 0 if ok else 1


def once(shape: str, form: str) -> int:
    import torch

    dev = require_gpu()
    m, n, k = map(int, shape.split("x"))
    a, b, sa, sb, kb4 = inputs(torch, m, n, k)
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    run = launch(torch, dev, kernel(form), a, b, sa, sb, kb4, d).run
    for _ in range(4):
        run()
    torch.cuda.synchronize()
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["bench"]:
        rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else 8
        forms = argv[argv.index("--forms") + 1].split(",") if "--forms" in argv else list(FORMS)
        if not set(forms) <= set(FORMS):
            print(f"probe_loop: forms are {', '.join(FORMS)}", file=sys.stderr)
            return 2
        return bench([s for s in argv[1:] if "x" in s and not s.startswith("-")], rounds, forms)
    if argv[:1] == ["once"] and len(argv) == 3 and argv[2] in FORMS:
        return once(argv[1], argv[2])
    print(__doc__.strip().splitlines()[-2:], file=sys.stderr)
    return 2


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):  # the usage, without a GPU (tests/test_tools.py)
        sys.exit(print(__doc__))
    sys.exit(main(sys.argv[1:]))
