"""ptxgen inside torch.distributed: train a small model built from ptxgen's GEMMs under DDP and FSDP2 (``fully_shard``),
eager and under ``torch.compile``, and compare the loss at every step and the final parameters with the same model on
torch's own ops (same initial weights, same data, same optimizer). Run it with torchrun, one rank per GPU:

    torchrun --standalone --nproc_per_node=$(nvidia-smi -L | wc -l) tests/distributed_train.py

Each rank trains on ``cuda:LOCAL_RANK`` (``torch.cuda.set_device``), NCCL between ranks. The ptxgen model's linear layers
are ``ptxgen.nn.Linear`` where that module exists, else ``torch.ops.ptxgen.gemm`` in an autograd.Function (forward
``x @ W.T``, backward ``dY @ W`` and ``dY.T @ X``, every product a ptxgen GEMM). Both models hold bf16 weights and
compute in bf16 (the loss in f32); the loss (averaged over the ranks) must agree within bf16 tolerance at every step, the final weights too,
the loss must fall, and every ptxgen module must have been loaded on the rank's own device.

``--cpu-selfcheck`` runs the harness itself on CPU with the gloo backend and torch's ops on both sides (no ptxgen, no
GPU): it checks the argument handling, the process group, DDP/FSDP2 wrapping, the loss averaging and the comparisons
(including that a perturbed run is caught). It says nothing about ptxgen's kernels.

Exit status: 0 every run agreed, 1 a comparison failed, 2 bad usage, 3 no usable GPU (or torch without CUDA).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # a checkout run without installing
    sys.path.insert(0, str(ROOT))

MODES = ("ddp", "fsdp")
COMPILE = ("off", "on", "both")
LOSS_RTOL = 2e-2  # bf16 products (8 bits of mantissa) accumulated in f32, different kernels on each side
PARAM_RTOL = 2e-2  # of the largest weight magnitude, after the last step


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="distributed_train.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--modes", default="ddp,fsdp", help="comma-separated: ddp, fsdp (default both)")
    p.add_argument("--compile", default="both", choices=COMPILE, help="eager (off), torch.compile (on) or both")
    p.add_argument("--steps", type=int, default=6, help="optimizer steps per run (default 6)")
    p.add_argument("--batch", type=int, default=128, help="rows per rank per step (multiple of 8)")
    p.add_argument("--width", type=int, default=256, help="model width (multiple of 64)")
    p.add_argument("--lr", type=float, default=0.5, help="SGD learning rate")
    p.add_argument("--seed", type=int, default=38)
    p.add_argument("--cpu-selfcheck", action="store_true",
                   help="the harness on CPU (gloo, torch's ops on both sides): no ptxgen, no GPU")
    args = p.parse_args(argv)
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    bad = [m for m in modes if m not in MODES]
    if not modes or bad:
        p.error(f"--modes {args.modes!r}: each one of {', '.join(MODES)}")
    if args.steps < 2:
        p.error("--steps must be at least 2 (the loss must fall)")
    if args.batch < 8 or args.batch % 8 or args.width < 64 or args.width % 64:
        p.error("--batch must be a multiple of 8 and --width a multiple of 64")
    if args.cpu_selfcheck and args.compile != "off":
        args.compile = "off"  # the self-check is about the harness; inductor on CPU adds minutes and nothing to it
    args.modes = modes
    return args


# ---------------------------------------------------------------------------------------------------------------------
# the models
# ---------------------------------------------------------------------------------------------------------------------
def ptxgen_linear_class(torch):
    """``ptxgen.nn.Linear`` where it exists, else a Linear whose products are ``torch.ops.ptxgen.gemm``."""
    try:
        from ptxgen import nn as pnn  # noqa: F401

        return pnn.Linear, "ptxgen.nn.Linear"
    except ImportError:
        pass
    import ptxgen

    ptxgen.register_torch_ops()
    gemm = torch.ops.ptxgen.gemm

    class GemmFn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):  # x: M x K, w: N x K (bf16) -> M x N
            ctx.save_for_backward(x, w)
            return gemm(x, w)

        @staticmethod
        def backward(ctx, gy):
            x, w = ctx.saved_tensors
            gy = gy.contiguous()
            gx = gemm(gy, w.t().contiguous())  # dY @ W: M x K
            gw = gemm(gy.t().contiguous(), x.t().contiguous())  # dY.T @ X: N x K
            return gx, gw

    class Linear(torch.nn.Module):
        def __init__(self, fan_in, fan_out, bias=True, device=None, dtype=None):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.empty(fan_out, fan_in, device=device, dtype=dtype))
            self.bias = torch.nn.Parameter(torch.zeros(fan_out, device=device, dtype=dtype)) if bias else None

        def forward(self, x):
            y = GemmFn.apply(x, self.weight)
            return y if self.bias is None else y + self.bias

    return Linear, "torch.ops.ptxgen.gemm in an autograd.Function"


def torch_linear_class(torch):
    return torch.nn.Linear


def build_model(torch, linear, width: int, device, seed: int):
    """A 3-layer MLP (bf16 weights and compute, f32 loss) with weights from ``seed``, whatever ``linear`` is."""

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = linear(width, 2 * width, device=device, dtype=torch.bfloat16)
            self.l2 = linear(2 * width, 2 * width, device=device, dtype=torch.bfloat16)
            self.l3 = linear(2 * width, width, device=device, dtype=torch.bfloat16)

        def forward(self, x):
            h = torch.nn.functional.gelu(self.l1(x.to(torch.bfloat16)))
            h = torch.nn.functional.gelu(self.l2(h))
            return self.l3(h).float()

    model = MLP()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            fan_in = p.shape[-1] if p.dim() == 2 else 1
            p.copy_((torch.rand(p.shape, generator=g) * 2 - 1) * ((3 / fan_in) ** 0.5 if p.dim() == 2 else 0.1))
    return model


def batches(torch, args, rank: int, device):
    """The (inputs, targets) of each step, the same for both models: a fixed teacher's outputs on rank-specific inputs,
    the same batch every step (a few steps must make the loss fall)."""
    g = torch.Generator().manual_seed(args.seed * 1000 + rank)
    teacher = torch.randn(args.width, args.width, generator=torch.Generator().manual_seed(args.seed)) / args.width ** 0.5
    x = torch.randn(args.batch, args.width, generator=g)
    return [(x.to(device), torch.tanh(x @ teacher).to(device))] * args.steps


def wrap(torch, model, mode: str, device):
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    from torch.distributed.fsdp import fully_shard

    for layer in (model.l1, model.l2, model.l3):
        fully_shard(layer)
    fully_shard(model)
    return model


def train(torch, model, data, args) -> list[float]:
    """SGD steps; the loss of each step averaged over the ranks (the same list on every rank)."""
    import torch.distributed as dist

    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    losses = []
    for x, y in data:
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        t = loss.detach().clone()
        dist.all_reduce(t)
        losses.append(float(t) / dist.get_world_size())
    return losses


def full_params(model) -> dict:
    """Every parameter whole (FSDP2's DTensor shards gathered), as f32 on the CPU."""
    out = {}
    for name, p in model.named_parameters():
        t = p.full_tensor() if hasattr(p, "full_tensor") else p
        while name.startswith(("module.", "_orig_mod.")):  # DDP's and torch.compile's wrappers, in any order
            name = name.split(".", 1)[1]
        out[name] = t.detach().float().cpu()
    return out


def compare(losses, ref_losses, params, ref_params, init) -> list[str]:
    """What disagrees (empty: the runs agree): loss per step, final weights, and that training did something."""
    bad = []
    for step, (got, want) in enumerate(zip(losses, ref_losses)):
        if not abs(got - want) <= LOSS_RTOL * abs(want) + 1e-6:
            bad.append(f"step {step}: loss {got:.6f}, torch's {want:.6f}")
    if not ref_losses[-1] < ref_losses[0] * 0.98:
        bad.append(f"torch's loss did not fall ({ref_losses[0]:.5f} -> {ref_losses[-1]:.5f}): nothing was compared")
    for name, want in ref_params.items():
        got = params[name]
        scale = float(want.abs().max()) or 1.0
        err = float((got - want).abs().max())
        moved = float((want - init[name]).abs().max())
        if err > PARAM_RTOL * scale:
            bad.append(f"{name}: max |difference| {err:.3e} (largest weight {scale:.3e})")
        if moved <= err:
            bad.append(f"{name}: the weights moved {moved:.3e}, not more than the difference {err:.3e}")
    return bad


# ---------------------------------------------------------------------------------------------------------------------
# the runs
# ---------------------------------------------------------------------------------------------------------------------
def one_run(torch, args, mode: str, compiled: bool, ours, rank: int, device, perturb: float = 0.0):
    ref_linear = torch_linear_class(torch)
    init = full_params(build_model(torch, ref_linear, args.width, "cpu", args.seed))
    data = batches(torch, args, rank, device)
    results = []
    for first, linear in ((True, ours), (False, ref_linear)):
        model = build_model(torch, linear, args.width, device, args.seed)
        if perturb and first:
            with torch.no_grad():
                model.l2.weight.mul_(1 + perturb)
        model = wrap(torch, model, mode, device)
        if compiled:
            model = torch.compile(model)
        losses = train(torch, model, data, args)
        results.append((losses, full_params(model)))
    (losses, params), (ref_losses, ref_params) = results
    return compare(losses, ref_losses, params, ref_params, init), losses, ref_losses


def check_ptxgen_device(torch, device) -> list[str]:
    """Every ptxgen kernel this rank launched was loaded on its own device, and torch's current device is unchanged."""
    import ptxgen.grouped as grouped
    from ptxgen.api import dispatch, fused

    bad = []
    kernels = [*dispatch._KERNELS.values(), *fused._KERNELS.values(), *(k.compiled for k in grouped._KERNELS.values())]
    loaded = {i for k in kernels for i in k._modules}
    if not loaded:
        bad.append("no ptxgen kernel was loaded: the ptxgen model did not run ptxgen")
    elif loaded != {device.index}:
        bad.append(f"ptxgen modules loaded on cuda:{sorted(loaded)}, the rank's device is cuda:{device.index}")
    if torch.cuda.current_device() != device.index:
        bad.append(f"torch's current device became cuda:{torch.cuda.current_device()} (was cuda:{device.index})")
    return bad


def main(argv=None) -> int:
    args = parse_args(argv)
    if "RANK" not in os.environ:  # bad usage, said before anything is imported or touched
        print("distributed_train: run it with torchrun (e.g. torchrun --standalone --nproc_per_node=1 "
              "tests/distributed_train.py)", file=sys.stderr)
        return 2
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        print(f"distributed_train: torch is not installed ({e})", file=sys.stderr)
        return 3
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", 0))
    if args.cpu_selfcheck:
        device, backend = torch.device("cpu"), "gloo"
        ours, what = torch_linear_class(torch), "torch's ops (self-check: no ptxgen)"
    else:
        if not torch.cuda.is_available() or torch.cuda.device_count() <= local_rank:
            print(f"distributed_train: rank {rank}: no CUDA device cuda:{local_rank}", file=sys.stderr)
            return 3
        torch.cuda.set_device(local_rank)
        device, backend = torch.device("cuda", local_rank), "nccl"
        ours, what = ptxgen_linear_class(torch)
    dist.init_process_group(backend, device_id=device if device.type == "cuda" else None)
    world = dist.get_world_size()
    failed = 0
    try:
        if rank == 0:
            print(f"distributed_train: {world} rank(s), {backend}, model on {what}")
        for mode in args.modes:
            for compiled in {"off": (False,), "on": (True,), "both": (False, True)}[args.compile]:
                bad, losses, ref = one_run(torch, args, mode, compiled, ours, rank, device)
                if not args.cpu_selfcheck:
                    bad += check_ptxgen_device(torch, device)
                flags = torch.tensor([len(bad)], device=device)
                dist.all_reduce(flags)
                name = f"{mode}{' compiled' if compiled else ''}"
                if rank == 0:
                    print(f"{'PASS' if not int(flags) else 'FAIL'} {name}: loss {' '.join(f'{x:.5f}' for x in losses)}")
                    print(f"     torch {name}: loss {' '.join(f'{x:.5f}' for x in ref)}")
                for line in bad:
                    print(f"  rank {rank}: {line}")
                failed += int(flags) > 0
        if args.cpu_selfcheck:  # the control: a run that starts from other weights must be caught
            bad, _, _ = one_run(torch, args, args.modes[0], False, ours, rank, device, perturb=0.2)
            if rank == 0:
                print(f"{'PASS' if bad else 'FAIL'} control (weights perturbed by 20%): "
                      f"{'caught: ' + bad[0] if bad else 'not caught'}")
            failed += not bad
    finally:
        dist.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
