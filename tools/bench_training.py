"""Training step time (forward + backward) of models built from ptxgen.nn against the same models in torch eager and
under torch.compile (default mode), in one process, alternating rounds, gradients checked (issue 33).

Models (bf16 parameters and activations; a step is ``y = model(x); y.backward(dy)`` with the gradients set to None
first, no optimizer):
  mlp  4 layers 4096 -> 14336 -> 4096 -> 14336 -> 4096, each with bias and gelu (tanh), --tokens rows (default 8192).
       ptxgen: ptxgen.nn.Linear(activation="gelu"); torch: nn.Linear then F.gelu(approximate="tanh").
  moe  one Mixtral-like layer: 8 experts, 4096 -> 2 x 14336 (gate and up in one bank) -> silu(gate) x up -> 4096,
       top-2 routing over --tokens tokens (a bf16 router, softmax, top-k, tokens sorted by expert, offs on the GPU
       from a scatter-add, never read on the host). ptxgen: ptxgen.nn.GroupedLinear; torch: the same layer with
       torch._grouped_mm (torch's grouped kernel and its autograd), which is the fastest torch eager form.
Variants timed: ptxgen (eager), torch (eager), torch.compile (the torch model, default mode), and ptxgen+compile
(the ptxgen model under torch.compile(fullgraph=True)); --no-compile leaves the two compiled ones out. --ablate (mlp)
adds two ptxgen forms that say what each part pays: ptxgen-fused-dact (the previous layer's derivative in each dX
GEMM's epilogue: fuse_input_derivative=True; the default form saves z by aux and applies the derivative element-wise)
and ptxgen-recompute (the activation fused without
aux, the backward recomputing z with one more GEMM: save_preactivation=False), and the ptxgen model with
actgrad.ENABLED the other way (ptxgen-act-grad-kernel-on / -off: the bias gradient and the activation's
derivative by ptxgen.ops.actgrad's one pass, or by torch's two operators). --act-grad-kernel on|off sets that flag
for the run (default: the module's). --ablate (moe) adds ptxgen-fp8: both expert banks as
GroupedLinear(fp8="rowwise") (e4m3 forward, the gradient through the casts on bf16 products), and ptxgen-fp8-bwd
(fp8_backward=True: the backward products in row-wise FP8 too), whose gradients pass at a worst error of
FP8_GRAD_BOUND (e4m3's rounding, not bf16's).

Gradient check, before timing: one step of each variant from the same weights, input and output gradient; every
parameter's and the input's gradient against a float32 reference (the same model with f32 weights; the MoE router
runs in bf16 in every model so that all route the tokens alike). Relative Frobenius errors are printed; a variant
passes when its worst error is at most 2 x torch eager's + 4e-3 (torch's own bf16 error sets the scale).

Usage: python tools/bench_training.py [--model mlp,moe] [--tokens 8192] [--rounds 10] [--no-compile] [--json out.jsonl]
       python tools/bench_training.py --device cpu --small --no-compile --check-only   (the CPU references, no timing)
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import torch

import ptxgen
import ptxgen.nn as pnn

F = torch.nn.functional


ABLATIONS = {"ptxgen-fused-dact": dict(fuse_input_derivative=True), "ptxgen-recompute": dict(save_preactivation=False)}
# moe --ablate: the expert banks in row-wise float8 (ptxgen.nn.GroupedLinear(fp8="rowwise")); its gradients carry e4m3's
# rounding (3 fraction bits), so it passes the check at FP8_GRAD_BOUND rather than at torch's bf16 scale
MOE_ABLATIONS = {"ptxgen-fp8": dict(fp8="rowwise"), "ptxgen-fp8-bwd": dict(fp8="rowwise", fp8_backward=True)}
FP8_GRAD_BOUND = 0.1


class MLP(torch.nn.Module):
    def __init__(self, dims, ptx: bool, dtype, device, **linear_kw):
        super().__init__()
        pairs = list(zip(dims[:-1], dims[1:]))
        if ptx:
            self.layers = torch.nn.ModuleList(pnn.Linear(i, o, activation="gelu", dtype=dtype, device=device, **linear_kw)
                                              for i, o in pairs)
        else:
            self.layers = torch.nn.ModuleList(torch.nn.Linear(i, o, dtype=dtype, device=device) for i, o in pairs)
        self.ptx = ptx

    def forward(self, x):
        for layer in self.layers:
            x = layer(x) if self.ptx else F.gelu(layer(x), approximate="tanh")
        return x


class TorchGroupedLinear(torch.nn.Module):
    """ptxgen.nn.GroupedLinear's parameters (G x out x in) on torch._grouped_mm."""

    def __init__(self, groups, i, o, dtype, device):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(groups, o, i, dtype=dtype, device=device))
        torch.nn.init.uniform_(self.weight, -i ** -0.5, i ** -0.5)

    def forward(self, x, offs):
        return torch._grouped_mm(x, self.weight.transpose(1, 2), offs=offs)


class MoE(torch.nn.Module):
    def __init__(self, d, f, experts, topk, ptx: bool, dtype, device, fp8=None, fp8_backward=False):
        super().__init__()
        bank = (lambda g, i, o: pnn.GroupedLinear(g, i, o, dtype=dtype, device=device, fp8=fp8,
                                                  fp8_backward=fp8_backward)) if ptx else \
            (lambda g, i, o: TorchGroupedLinear(g, i, o, dtype, device))
        self.router = torch.nn.Linear(d, experts, bias=False, dtype=torch.bfloat16, device=device)
        self.w13, self.w2 = bank(experts, d, 2 * f), bank(experts, f, d)
        self.f, self.experts, self.topk = f, experts, topk

    def forward(self, x):
        t = x.shape[0]
        probs = F.softmax(self.router(x.detach().bfloat16()).float(), dim=-1)
        wts, idx = torch.topk(probs, self.topk, dim=-1)
        wts = (wts / wts.sum(-1, keepdim=True)).to(x.dtype)
        flat = idx.reshape(-1)
        order = torch.argsort(flat, stable=True)
        tok = order // self.topk
        counts = torch.zeros(self.experts, dtype=torch.int32, device=x.device).scatter_add_(
            0, flat, torch.ones_like(flat, dtype=torch.int32))
        offs = torch.cumsum(counts, 0, dtype=torch.int32)
        h = self.w13(x[tok], offs)
        gate, up = h[:, :self.f], h[:, self.f:]
        o = self.w2(F.silu(gate) * up, offs) * wts.reshape(-1)[order][:, None]
        return torch.zeros(t, x.shape[1], dtype=o.dtype, device=x.device).index_add(0, tok, o)


def build(name, args, ptx, dtype, **linear_kw):
    if name == "mlp":
        d, f = (64, 96) if args.small else (4096, 14336)
        return MLP([d, f, d, f, d], ptx, dtype, args.device, **linear_kw), d
    d, f = (64, 96) if args.small else (4096, 14336)
    return MoE(d, f, 8, 2, ptx, dtype, args.device, **linear_kw), d


def rel(got, ref) -> float:
    got, ref = got.double(), ref.double()
    return float(torch.linalg.norm(got - ref) / max(float(torch.linalg.norm(ref)), 1e-30))


def make_step(model, fn, x, dy, act_grad_kernel=None):
    """One training step; ``act_grad_kernel`` (True/False) sets actgrad.ENABLED for the step (None: as it is)."""
    from ptxgen.ops import actgrad

    params = [p for p in model.parameters() if p.requires_grad]

    def step():
        for p in params:
            p.grad = None
        x.grad = None
        if act_grad_kernel is None:
            fn(x).backward(dy)
            return
        keep, actgrad.ENABLED = actgrad.ENABLED, act_grad_kernel
        try:
            fn(x).backward(dy)
        finally:
            actgrad.ENABLED = keep
    return step


def grads(model, x):
    return {"x": x.grad, **{n: p.grad for n, p in model.named_parameters() if p.requires_grad}}


def run_model(name, args, out) -> bool:
    torch.manual_seed(0)
    base, d = build(name, args, False, torch.bfloat16)
    models = {"torch": base}
    ours, _ = build(name, args, True, torch.bfloat16)
    ours.load_state_dict(base.state_dict())
    models["ptxgen"] = ours
    extra, flags = {}, {}
    if args.ablate and name == "moe":
        for v, kw in MOE_ABLATIONS.items():
            extra[v], _ = build(name, args, True, torch.bfloat16, **kw)
            extra[v].load_state_dict(base.state_dict())
    if args.ablate and name == "mlp":
        from ptxgen.ops import actgrad

        for v, kw in ABLATIONS.items():
            extra[v], _ = build(name, args, True, torch.bfloat16, **kw)
            extra[v].load_state_dict(base.state_dict())
        other = not actgrad.ENABLED
        v = f"ptxgen-act-grad-kernel-{'on' if other else 'off'}"
        extra[v], flags[v] = ours, other
    ref, _ = build(name, args, False, torch.float32)
    ref.load_state_dict({k: v.float() if k != "router.weight" else v for k, v in base.state_dict().items()})
    if name == "moe":
        ref.router = base.router  # the same bf16 router: every model routes the tokens alike
    x = torch.randn(args.tokens, d, dtype=torch.bfloat16, device=args.device)
    dy = torch.randn(args.tokens, d, dtype=torch.bfloat16, device=args.device)
    fns = {"ptxgen": ours, "torch": base, **extra}
    if not args.no_compile:
        fns["torch.compile"] = torch.compile(base)
        fns["ptxgen+compile"] = torch.compile(ours, fullgraph=True)
    owner = {"ptxgen": ours, "torch": base, "torch.compile": base, "ptxgen+compile": ours, **extra}
    inputs = {v: x.clone().requires_grad_() for v in fns}
    steps = {v: make_step(owner[v], fns[v], inputs[v], dy, flags.get(v)) for v in fns}
    xr = x.float().requires_grad_()
    make_step(ref, ref, xr, dy.float())()
    want = grads(ref, xr)
    errors = {}
    for v, step in steps.items():
        step()
        got = grads(owner[v], inputs[v])
        errors[v] = max(rel(got[k], want[k]) for k in want if want[k] is not None)
    ok = {v: errors[v] <= (FP8_GRAD_BOUND if v in MOE_ABLATIONS else 2 * errors["torch"] + 4e-3) for v in errors}
    print(f"{name}: worst gradient error vs f32: " + ", ".join(f"{v} {e:.2e}{'' if ok[v] else ' FAIL'}" for v, e in errors.items()))
    row = {"model": name, "tokens": args.tokens, "grad_rel_err": errors, "grad_ok": ok}
    if not args.check_only:
        from ptxgen.runtime.check.bench import alternate_medians

        torch.cuda.synchronize()
        for _ in range(args.warmup):
            for s in steps.values():
                s()
        ms = alternate_medians(torch, steps, args.rounds)
        row["ms"] = ms
        row["speedup_vs"] = {v: ms[v] / ms["ptxgen"] for v in ms if v != "ptxgen"}
        row["device"] = torch.cuda.get_device_name()
        print(f"{name}: step ms " + ", ".join(f"{v} {t:.3f}" for v, t in ms.items()))
        print(f"{name}: ptxgen vs " + ", ".join(f"{v} {r:.3f}x" for v, r in row["speedup_vs"].items())
              + (f"; ptxgen+compile vs torch.compile {ms['torch.compile'] / ms['ptxgen+compile']:.3f}x" if "torch.compile" in ms else ""))
    out.append(row)
    return all(ok.values())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mlp,moe")
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--ablate", action="store_true", help="mlp: also time ptxgen-fused-dact and ptxgen-recompute; "
                    "moe: also ptxgen-fp8 and ptxgen-fp8-bwd (the banks in row-wise float8; the backward too)")
    ap.add_argument("--act-grad-kernel", choices=("default", "on", "off"), default="default",
                    help="actgrad.ENABLED for the run: ptxgen.ops.actgrad's one pass (on) or torch's two operators (off)")
    ap.add_argument("--check-only", action="store_true", help="check the gradients, time nothing")
    ap.add_argument("--small", action="store_true", help="64/96-wide models (a dry run of the script)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.act_grad_kernel != "default":
        from ptxgen.ops import actgrad

        actgrad.ENABLED = args.act_grad_kernel == "on"
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no usable GPU: torch sees no CUDA device", file=sys.stderr)
        return 3
    if args.device != "cuda":
        args.check_only = True
    ptxgen.register_torch_ops()
    rows: list = []
    ok = True
    for name in args.model.split(","):
        if name not in ("mlp", "moe"):
            print(f"unknown model {name!r}: mlp or moe", file=sys.stderr)
            return 2
        ok &= run_model(name, args, rows)
    if args.json:
        with open(args.json, "a") as fh:
            for r in rows:
                fh.write(json.dumps(r) + "\n")
    if not args.check_only:
        ratios = [r for row in rows for r in row["speedup_vs"].values()]
        print(f"geometric mean of torch time / ptxgen time over {len(ratios)} comparisons: "
              f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
