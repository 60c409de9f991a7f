"""ptxgen.attention's argument checks (CPU tensors: every check before the device one), the torch operator's fake
implementation, and ``ptxgen build --kind attention``'s exit statuses. No GPU needed."""

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import ptxgen  # noqa: E402
from ptxgen.runtime.arrays import ArgumentError, DTypeError  # noqa: E402


def t(*shape, dtype=torch.bfloat16):
    return torch.zeros(*shape, dtype=dtype)


@pytest.mark.parametrize("args,err,words", [
    ((t(1, 2, 8, 64, dtype=torch.float32), t(1, 2, 8, 64), t(1, 2, 8, 64)), DTypeError, "bfloat16 or float16"),
    ((t(1, 2, 8, 64), t(1, 2, 8, 64, dtype=torch.float16), t(1, 2, 8, 64)), DTypeError, "share one dtype"),
    ((t(2, 8, 64), t(1, 2, 8, 64), t(1, 2, 8, 64)), ArgumentError, "4 dimensions"),
    ((t(1, 2, 8, 96), t(1, 2, 8, 96), t(1, 2, 8, 96)), ArgumentError, "head_dim 96"),
    ((t(1, 6, 8, 64), t(1, 4, 8, 64), t(1, 4, 8, 64)), ArgumentError, "must divide"),
    ((t(1, 2, 8, 64), t(2, 2, 8, 64), t(2, 2, 8, 64)), ArgumentError, "batch"),
    ((t(1, 2, 8, 64), t(1, 2, 8, 64), t(1, 2, 9, 64)), ArgumentError, "same shape"),
    ((t(1, 2, 0, 64), t(1, 2, 8, 64), t(1, 2, 8, 64)), ArgumentError, "at least 1"),
    ((t(1, 2, 8, 128)[..., ::2], t(1, 2, 8, 64), t(1, 2, 8, 64)), ArgumentError, "contiguous"),
    ((t(1, 2, 8, 64), t(1, 2, 8, 64), t(1, 2, 8, 64)), ArgumentError, "CUDA device"),
])
def test_argument_errors_name_the_rule(args, err, words):
    with pytest.raises(err) as e:
        ptxgen.attention(*args)
    assert words in str(e.value)


def test_out_and_scale_checks():
    q = t(1, 2, 8, 64)
    with pytest.raises(ArgumentError, match="shape"):
        ptxgen.attention(q, q, q, out=t(1, 2, 8, 32))
    with pytest.raises(DTypeError):
        ptxgen.attention(q, q, q, out=t(1, 2, 8, 64, dtype=torch.float16))
    with pytest.raises(ArgumentError, match="finite"):
        ptxgen.attention(q, q, q, scale=float("nan"))


def test_gqa_and_bshd_views_pass_the_checks_until_the_device():
    """GQA (8 q heads over 2 kv heads) and (B, S, H, D) storage seen as (B, H, S, D) are legal: only the device check
    stops them on a CPU tensor."""
    base = t(3, 2, 100, 8, 64)
    q = base[0].transpose(1, 2)
    kv = t(2, 100, 2, 64).transpose(1, 2)
    with pytest.raises(ArgumentError, match="CUDA device"):
        ptxgen.attention(q, kv, kv, causal=True)


def test_torch_op_fake_for_compile():
    ptxgen.register_torch_ops()
    q = torch.empty(2, 4, 100, 64, dtype=torch.bfloat16, device="meta")
    k = torch.empty(2, 1, 300, 64, dtype=torch.bfloat16, device="meta")
    o = torch.ops.ptxgen.attention(q, k, k, True, 0.2)
    assert o.shape == q.shape and o.dtype == q.dtype


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "ptxgen", "build", *args], capture_output=True, text=True)


def test_cli_builds_attention(tmp_path):
    r = _cli("--kind", "attention", "--head-dim", "64", "--bm", "128", "--bn", "128", "--causal", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "SASS:" in r.stdout and "local 0 B" in r.stdout
    (d,) = tmp_path.iterdir()
    assert {p.name for p in d.iterdir()} == {"kernel.cu", "kernel.ptx", "plan.json"}


@pytest.mark.parametrize("args", [
    ("--head-dim", "80"), ("--head-dim", "64", "--bm", "256"), ("--head-dim", "128", "--bn", "192"),
    ("--head-dim", "64", "--arch", "sm_100a", "--bm", "64"), ("--head-dim", "64", "--dtype", "e4m3"), ("--bm", "128"),
    ("--head-dim", "64", "--bm", "64", "--schedule", "pingpong"),
])
def test_cli_illegal_combinations_exit_2(args, tmp_path):
    r = _cli("--kind", "attention", *args, "--out", str(tmp_path))
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and "error" in r.stderr


def test_cli_builds_the_tcgen05_form(tmp_path):
    r = _cli("--kind", "attention", "--head-dim", "128", "--bn", "128", "--arch", "sm_100a", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "UTCHMMA" in r.stdout and "local 0 B" in r.stdout


def test_cli_kind_gemm_keeps_the_gemm_flags():
    r = _cli("--kind", "gemm", "--bm", "128")  # gemm's required flags still required
    assert r.returncode == 2 and "--bn" in r.stderr
