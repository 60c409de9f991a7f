"""L3: ptxgen.attention on a Hopper GPU against a float64 reference (torch CUDA build needed; skips without a GPU)."""

import math

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():  # a CPU torch build: nothing to run these on
    pytest.skip("no CUDA torch", allow_module_level=True)

import ptxgen  # noqa: E402
from ptxgen.attention.launch import attention as attention_with  # noqa: E402

SCHEDULES = ["serial", "overlap", "pingpong"]


def reference(q, k, v, causal, scale):
    """float64 on the GPU, GQA by repeating kv heads; causal top-left aligned (SDPA's is_causal)."""
    g = q.shape[1] // k.shape[1]
    qd, kd, vd = q.double(), k.double().repeat_interleave(g, 1), v.double().repeat_interleave(g, 1)
    s = (qd @ kd.transpose(-1, -2)) * scale
    if causal:
        sq, sk = q.shape[2], k.shape[2]
        mask = torch.arange(sk, device=q.device)[None, :] <= torch.arange(sq, device=q.device)[:, None]
        s = s.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(s, -1)
    return torch.softmax(s, -1) @ vd, lse


CASES = [(b, h, hk, sq, sk, d) for (b, h, hk) in [(2, 8, 8), (1, 8, 2), (2, 8, 1)] for (sq, sk) in [(1, 1), (7, 7), (1000, 1000), (130, 517)]
         for d in (64, 128, 256)]


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("b,h,hk,sq,sk,d", CASES)
def test_attention_matches_float64(b, h, hk, sq, sk, d, dtype, causal, schedule):
    torch.manual_seed(sq * 31 + sk + d + hk)
    dt = getattr(torch, dtype)
    q = torch.randn(b, h, sq, d, device="cuda", dtype=dt)
    k = torch.randn(b, hk, sk, d, device="cuda", dtype=dt)
    v = torch.randn(b, hk, sk, d, device="cuda", dtype=dt)
    out, lse = attention_with(q, k, v, causal=causal, return_lse=True, schedule=schedule)
    ro, rl = reference(q, k, v, causal, 1 / math.sqrt(d))
    tol = 2e-2 if dtype == "bfloat16" else 4e-3
    assert torch.isfinite(out).all()
    assert (out.double() - ro).abs().max().item() < tol + tol * ro.abs().max().item()
    assert (lse.double() - rl).abs().max().item() < 1e-2


# every tile the chooser may pick besides the 128 x 128 one: the defaults (ptxgen.attention.launch.default_choice),
# three consumer warpgroups (BM 192) and D 128 with 192-key blocks, each under the schedules it allows
# and the persistent walk (one CTA per SM over the tiles) under each schedule
TILES = [(64, (128, 192, 2), "pingpong", False), (64, (192, 128, 2), "overlap", False), (64, (192, 64, 3), "serial", False),
         (128, (128, 192, 2), "pingpong", False), (128, (128, 192, 2), "overlap", False),
         (64, (192, 128, 2), "overlap", True), (64, (128, 128, 2), "serial", True), (128, (128, 128, 2), "pingpong", True),
         (128, (128, 192, 2), "pingpong", True), (64, (128, 128, 3), "pingpong", True), (64, (128, 192, 2), "pingpong", True),
         # D 256: its default (BM 128, BN 64, overlap) under each schedule, one consumer warpgroup with three stages,
         # and the walk
         (256, (128, 64, 2), "serial", False), (256, (128, 64, 2), "overlap", False), (256, (128, 64, 2), "pingpong", False),
         (256, (64, 64, 3), "overlap", False), (256, (64, 64, 2), "serial", False), (256, (128, 64, 2), "overlap", True)]


@pytest.mark.parametrize("d,tile,schedule,persistent", TILES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("b,h,hk,sq,sk", [(1, 4, 4, 1, 1), (2, 8, 2, 7, 7), (1, 8, 1, 1000, 1000), (2, 4, 4, 130, 517),
                                          (1, 4, 1, 517, 130)])
def test_attention_tiles_match_float64(b, h, hk, sq, sk, d, tile, schedule, persistent, causal):
    torch.manual_seed(sq + 7 * sk + d)
    q = torch.randn(b, h, sq, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, hk, sk, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    out, lse = attention_with(q, k, v, causal=causal, return_lse=True, schedule=schedule, tile=tile, persistent=persistent)
    ro, rl = reference(q, k, v, causal, 1 / math.sqrt(d))
    assert (out.double() - ro).abs().max().item() < 2e-2 + 2e-2 * ro.abs().max().item()
    assert (lse.double() - rl).abs().max().item() < 1e-2


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_attention_bshd_view_without_copy(schedule):
    """(B, S, H, D) storage transposed to (B, H, S, D): read in place through the tensor map's strides."""
    b, s, h, d = 2, 300, 8, 128
    base = torch.randn(3, b, s, h, d, device="cuda", dtype=torch.bfloat16)
    q, k, v = (base[i].transpose(1, 2) for i in range(3))
    assert not q.is_contiguous()
    out = attention_with(q, k, v, causal=True, schedule=schedule)
    assert out.stride() == q.stride()  # the output keeps q's (B, S, H, D) storage
    ro, _ = reference(q, k, v, True, d ** -0.5)
    assert (out.double() - ro).abs().max().item() < 3e-2


def test_attention_out_and_scale():
    q, k, v = (torch.randn(1, 4, 200, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    out = torch.empty_like(q)
    r = ptxgen.attention(q, k, v, scale=0.3, out=out)
    assert r is out
    ro, _ = reference(q, k, v, False, 0.3)
    assert (out.double() - ro).abs().max().item() < 5e-3


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_attention_matches_sdpa(schedule):
    q, k, v = (torch.randn(2, 16, 2048, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for causal in (False, True):
        ours = attention_with(q, k, v, causal=causal, schedule=schedule)
        theirs = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        assert (ours.float() - theirs.float()).abs().max().item() < 2e-2


def test_torch_op_and_compile():
    ptxgen.register_torch_ops()
    q, k, v = (torch.randn(1, 4, 256, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    a = torch.ops.ptxgen.attention(q, k, v, True, None)
    f = torch.compile(lambda q, k, v: torch.ops.ptxgen.attention(q, k, v, True, None) * 2, fullgraph=True)
    assert torch.equal(f(q, k, v), a * 2)


def test_prepared_launch_follows_new_pointers():
    """One dispatch key, three sets of tensors: each call's maps point at its own tensors (MapSlot re-encodes), and
    calling back with the first set reuses its remembered maps."""
    sets = [tuple(torch.randn(1, 4, 333, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3)) for _ in range(3)]
    for q, k, v in sets + sets[:1]:
        out = ptxgen.attention(q, k, v, causal=True)
        ro, _ = reference(q, k, v, True, 64 ** -0.5)
        assert (out.double() - ro).abs().max().item() < 2e-2


def test_a_launched_key_still_checks_alignment_and_other_keys():
    """The hot path (a dispatch key launched before skips the argument checks): a view 8 bytes into a buffer has the
    key of an aligned tensor of the same shape and strides, and is refused as the full check refuses it; a k of
    another dtype, or an out of another shape, is a new key and refused by the full check; after the refusals the
    aligned tensors still match the reference."""
    from ptxgen.runtime.launch.arrays import ArgumentError, DTypeError

    q, k, v = (torch.randn(1, 4, 256, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    ptxgen.attention(q, k, v)
    buf = torch.randn(1 * 4 * 256 * 64 + 4, device="cuda", dtype=torch.bfloat16)
    shifted = buf[4:].view(1, 4, 256, 64)  # 8 bytes past an aligned start: same shape, strides, dtype, device as q
    with pytest.raises(ArgumentError, match="not 16-byte aligned"):
        ptxgen.attention(shifted, k, v)
    with pytest.raises(DTypeError):
        ptxgen.attention(q, k.half(), v)
    with pytest.raises(ArgumentError, match="out: shape"):
        ptxgen.attention(q, k, v, out=torch.empty(1, 4, 255, 64, device="cuda", dtype=torch.bfloat16))
    ro, _ = reference(q, k, v, False, 64 ** -0.5)
    assert (ptxgen.attention(q, k, v).double() - ro).abs().max().item() < 2e-2


def test_cuda_graph_capture_and_replay():
    q, k, v = (torch.randn(2, 8, 512, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    out = torch.empty_like(q)
    ptxgen.attention(q, k, v, out=out)  # build and prepare outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        ptxgen.attention(q, k, v, out=out)
    for _ in range(2):
        q.copy_(torch.randn_like(q))
        out.zero_()
        g.replay()
        torch.cuda.synchronize()
        ro, _ = reference(q, k, v, False, 128 ** -0.5)
        assert (out.double() - ro).abs().max().item() < 2e-2


@pytest.mark.parametrize("q_buffers", [1, 2])
@pytest.mark.parametrize("causal", [False, True])
def test_persistent_walk_more_tiles_than_sms(causal, q_buffers):
    """More tiles than SMs (each CTA walks several, the K/V ring and Q's barriers running on across them), with one Q
    buffer and two, twice in a row (the barriers' phases start over each launch) and against the one-CTA-per-tile
    kernel bit for bit."""
    torch.manual_seed(3)
    q = torch.randn(4, 16, 1000, 128, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(4, 4, 1000, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    kw = dict(causal=causal, schedule="pingpong", tile=(128, 128, 2), persistent=True, q_buffers=q_buffers)
    ours = attention_with(q, k, v, **kw)
    again = attention_with(q, k, v, **kw)
    grid = attention_with(q, k, v, causal=causal, schedule="pingpong", tile=(128, 128, 2), persistent=False)
    assert torch.equal(ours, again) and torch.equal(ours, grid)
    ro, _ = reference(q[:1, :4], k[:1, :1], v[:1, :1], causal, 128 ** -0.5)
    assert (ours[:1, :4].double() - ro).abs().max().item() < 3e-2


@pytest.mark.parametrize("causal", [False, True])
def test_head_dim_256_default_matches_sdpa(causal):
    """D 256 through ptxgen.attention's default choice (BM 128, BN 64, overlap) against SDPA at a longer sequence,
    GQA 4 expanded for SDPA."""
    torch.manual_seed(256)
    q = torch.randn(2, 8, 2048, 256, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(2, 2, 2048, 256, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    ours = ptxgen.attention(q, k, v, causal=causal)
    theirs = torch.nn.functional.scaled_dot_product_attention(q, k.repeat_interleave(4, 1), v.repeat_interleave(4, 1),
                                                              is_causal=causal)
    assert (ours.float() - theirs.float()).abs().max().item() < 2e-2


@pytest.mark.parametrize("d,tile,schedule", [(128, (128, 128, 2), "pingpong"), (64, (192, 128, 2), "overlap"),
                                             (64, (128, 128, 3), "pingpong"), (64, (128, 192, 2), "pingpong")])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("b,h,hk,sq,sk", [(1, 4, 4, 1, 1), (2, 8, 2, 7, 7), (4, 16, 4, 1000, 1000), (2, 4, 4, 130, 517)])
def test_staged_o_matches_the_direct_store_bit_for_bit(b, h, hk, sq, sk, d, tile, schedule, causal):
    """O staged in the tile's Q buffer and stored in 16-byte cells (two Q buffers, the walk) against the same kernel's
    direct stores: the same bits (the same packed pairs, stored another way), the LSE too, and against float64."""
    torch.manual_seed(sq + sk + d + b)
    q = torch.randn(b, h, sq, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, hk, sk, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    kw = dict(causal=causal, return_lse=True, schedule=schedule, tile=tile, persistent=True, q_buffers=2)
    staged, lse_s = attention_with(q, k, v, o_staging=True, **kw)
    direct, lse_d = attention_with(q, k, v, o_staging=False, **kw)
    assert torch.equal(staged, direct) and torch.equal(lse_s, lse_d)
    g = h // hk  # the query heads of KV head 0
    ro, _ = reference(q[:1, :g], k[:1, :1], v[:1, :1], causal, 1 / math.sqrt(d))
    assert (staged[:1, :g].double() - ro).abs().max().item() < 2e-2 + 2e-2 * ro.abs().max().item()


def test_an_output_off_16_bytes_takes_the_direct_store():
    """An ``out=`` view whose rows start 8 bytes past 16 (the staged store writes 16-byte cells): the call takes the
    direct-store kernel and still matches."""
    torch.manual_seed(5)
    q, k, v = (torch.randn(2, 4, 300, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    big = torch.empty(2 * 4 * 300 * 128 + 4, device="cuda", dtype=torch.bfloat16)
    out = big[4:].view(2, 4, 300, 128)
    assert out.data_ptr() % 16 == 8
    attention_with(q, k, v, out=out, schedule="pingpong", tile=(128, 128, 2), persistent=True, q_buffers=2, o_staging=True)
    want = attention_with(q, k, v, schedule="pingpong", tile=(128, 128, 2), persistent=True, q_buffers=2, o_staging=False)
    assert torch.equal(out, want)


@pytest.mark.parametrize("d,tile,schedule", [(128, (128, 128, 2), "pingpong"), (64, (192, 128, 2), "overlap"),
                                             (64, (128, 128, 3), "pingpong"), (64, (128, 192, 2), "pingpong")])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("b,h,hk,sq,sk", [(1, 4, 4, 1, 1), (2, 8, 2, 7, 7), (4, 16, 4, 1000, 1000), (2, 4, 4, 130, 517),
                                          (8, 16, 16, 512, 512)])
def test_carried_first_s_matches_the_plain_walk_bit_for_bit(b, h, hk, sq, sk, d, tile, schedule, causal):
    """The next tile's first S issued with this tile's last P·V (``carry``): the same arithmetic per tile, so the same
    bits as the walk without it (O staged at D 128 as the default does, direct at D 64), twice in a row."""
    torch.manual_seed(sq + 3 * sk + d + b)
    q = torch.randn(b, h, sq, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, hk, sk, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    kw = dict(causal=causal, return_lse=True, schedule=schedule, tile=tile, persistent=True, q_buffers=2)
    carried, lse_c = attention_with(q, k, v, carry=True, **kw)
    again, _ = attention_with(q, k, v, carry=True, **kw)
    plain, lse_p = attention_with(q, k, v, carry=False, **kw)
    assert torch.equal(carried, plain) and torch.equal(lse_c, lse_p) and torch.equal(carried, again)
