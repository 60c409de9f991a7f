"""Pure math tier: descriptor bit tables, CuTe's values, lint.

The expected values here are not taken from ptxgen: they are what NVIDIA's CuTe (make_umma_desc,
make_gmma_desc, make_instr_desc, built and run on a host) computed, as recorded in
shared/reference/descriptors.md ("CuTe host run"), and the seed post's numbers.
"""

from hypothesis import given
from hypothesis import strategies as st

from ptxgen.isa.descriptors import SmemDescriptor, lint_smem_descriptor
from ptxgen.isa.idesc import InstrDescriptor, lint_instr_descriptor
from ptxgen.derive.tile.layout import derive
from ptxgen.derive.tile.spec import make_spec
from ptxgen.isa.types import Arch, Major, Swizzle

# ---- CuTe host-run values --------------------------------------------------------------------


def test_cute_kmajor_sw128_f16_mn128():
    t = derive(make_spec(bm=128, bn=128, bk=64, a="kmajor-sw128", b="kmajor-sw128", a_order="mn"))
    assert t.a.k_steps[0].descriptor.encode() == 0x4000404000010000
    t90 = derive(make_spec(bm=128, bn=128, bk=64, a="kmajor-sw128", b="kmajor-sw128", a_order="mn", arch="sm_90a"))
    assert t90.b.k_steps[0].descriptor.encode() == 0x4000004000010000  # B: MN = 128 on wgmma too


def test_cute_kmajor_sw128_kstep_start_fields():
    # K-major SW128 fp16, MN=128, K=128, MN-first atoms: start fields 0,2,4,6 then 1024,1026,1028,1030
    t = derive(make_spec(bm=128, bn=128, bk=128, a="kmajor-sw128", b="kmajor-sw128", a_order="mn"))
    fields = [s.descriptor.encode() & 0x3FFF for s in t.a.k_steps]
    assert fields == [0, 2, 4, 6, 1024, 1026, 1028, 1030]
    assert all((s.descriptor.encode() >> 16) & 0x3FFF == 1 for s in t.a.k_steps)  # LBO field 1
    assert all((s.descriptor.encode() >> 32) & 0x3FFF == 64 for s in t.a.k_steps)  # SBO 1024 B


def test_cute_mnmajor_sw128_kstep_advance():
    # MN-major SW128 fp16: each K-step of 16 K rows adds 2 x SBO; MN-first with MN=128: SBO 2048, +4096 B
    t = derive(make_spec(bm=128, bn=128, bk=64, a="kmajor-sw128", b="mnmajor-sw128"))
    assert t.b.sbo_bytes == 2048 and [s.start_offset_bytes for s in t.b.k_steps] == [0, 4096, 8192, 12288]
    # K-first atoms (DeepGEMM style): SBO 1024, +2048 B per step, LBO = K_tile x 128
    t = derive(make_spec(bm=128, bn=128, bk=64, a="kmajor-sw128", b="mnmajor-sw128", b_order="k"))
    assert t.b.sbo_bytes == 1024 and t.b.lbo_bytes == 64 * 128
    assert [s.start_offset_bytes for s in t.b.k_steps] == [0, 2048, 4096, 6144]


def test_cute_mnmajor_single_atom_lbo_is_zero():
    # MN-major SW128 fp16, MN = 64 (one atom): CuTe writes LBO 0
    t = derive(make_spec(bm=128, bn=64, bk=64, a="kmajor-sw128", b="mnmajor-sw128"))
    assert t.b.lbo_bytes == 0


def test_cute_mnmajor_none_f16_mn64():
    # MN-major no swizzle fp16 MN=64: SBO 128, LBO 1024 (core matrices packed MN-first)
    t = derive(make_spec(bm=128, bn=64, bk=64, a="kmajor-sw128", b="mnmajor-none"))
    assert (t.b.sbo_bytes, t.b.lbo_bytes) == (128, 1024)


def test_single_group_strides_are_zero_like_cute():
    """A stride whose mode has extent 1 inside one MMA's slice is unused; CuTe's logical_divide gives 0."""
    t = derive(make_spec(bm=128, bn=8, bk=64, a="kmajor-sw128", b="mnmajor-none"))  # N = 8 f16: one core matrix
    assert t.b.sbo_bytes == 0 and t.b.lbo_bytes > 0
    t = derive(make_spec(bm=128, bn=16, bk=64, a="kmajor-sw128", b="mnmajor-none"))
    assert t.b.sbo_bytes == 128


def test_cute_b32_tf32():
    # MN-major 128B_base32B, MN-first: LBO 512, SBO = (MN / 32) x 512: tf32 MN=64 -> 512/1024; MN=128 -> 512/2048
    for bn, sbo in ((64, 1024), (128, 2048)):
        t = derive(make_spec(bm=128, bn=bn, bk=32, a="kmajor-sw128", b="mnmajor-sw128b32", dtype="tf32"))
        assert (t.b.lbo_bytes, t.b.sbo_bytes, t.b.layout_type) == (512, sbo, 1)


def test_cute_instruction_descriptors():
    K, MN = Major.K, Major.MN
    cases = [
        (("f16", 128, 256, "bf16", "bf16", "f32", K, K), 0x08400490),
        (("f16", 128, 256, "bf16", "bf16", "f32", MN, K), 0x08408490),
        (("f16", 128, 256, "bf16", "bf16", "f32", K, MN), 0x08410490),
        (("f16", 128, 128, "f16", "f16", "f32", K, K), 0x08200010),
        (("tf32", 128, 256, "tf32", "tf32", "f32", K, K), 0x08400910),
        (("f8f6f4", 128, 256, "e4m3", "e4m3", "f32", K, K), 0x08400010),
        (("i8", 128, 256, "s8", "s8", "s32", K, K), 0x084004A0),
    ]
    for args, want in cases:
        assert InstrDescriptor(*args).encode() == want, args
    # and derived from specs
    t = derive(make_spec(bm=128, bn=256, bk=64, a="kmajor-sw128", b="kmajor-sw128", dtype="bf16"))
    assert t.idesc.encode() == 0x08400490


def test_sm100_is_sm90_plus_version_bit():
    """For none/32B/64B/128B, raw_sm100 == raw_sm90 | 1 << 46 (same field positions, shifted swizzle code)."""
    for swz in (Swizzle.NONE, Swizzle.SW32, Swizzle.SW64, Swizzle.SW128):
        a = SmemDescriptor(Arch.SM100A, 0x1230, 0x400, 0x800, swz, base_offset=3).encode()
        b = SmemDescriptor(Arch.SM90A, 0x1230, 0x400, 0x800, swz, base_offset=3).encode()
        assert a == b | (1 << 46)


@given(
    arch=st.sampled_from(list(Arch)),
    start=st.integers(0, 0x3FFF).map(lambda x: x * 16),
    lbo=st.integers(0, 0x3FFF).map(lambda x: x * 16),
    sbo=st.integers(0, 0x3FFF).map(lambda x: x * 16),
    swz=st.sampled_from([Swizzle.NONE, Swizzle.SW32, Swizzle.SW64, Swizzle.SW128]),
    bo=st.integers(0, 7),
)
def test_smem_descriptor_roundtrip(arch, start, lbo, sbo, swz, bo):
    d = SmemDescriptor(arch, start, lbo, sbo, swz, base_offset=bo)
    raw = d.encode()
    assert SmemDescriptor.decode(arch, raw) == d
    rep = lint_smem_descriptor(arch, raw)
    assert rep.fields["start_address_bytes"] == start and rep.fields["sbo_bytes"] == sbo


# ---- lint --------------------------------------------------------------------------------------
SEED_A = 0x8000402000010000


def test_lint_accepts_the_seed():
    rep = lint_smem_descriptor(Arch.SM100A, SEED_A)
    assert rep.valid, rep.problems
    assert rep.fields["swizzle"] == "sw64" and rep.fields["sbo_bytes"] == 512 and rep.fields["lbo_bytes"] == 16


def test_lint_problems():
    no_version = SEED_A & ~(1 << 46)
    rep = lint_smem_descriptor(Arch.SM100A, no_version)
    assert not rep.valid and any("version" in p for p in rep.problems)
    assert any("reserved" in p and "layout type" in p for p in lint_smem_descriptor(Arch.SM100A, (SEED_A & ~(7 << 61)) | (5 << 61)).problems)
    assert not lint_smem_descriptor(Arch.SM100A, SEED_A | (1 << 14)).valid  # reserved bits 14-15
    assert not lint_smem_descriptor(Arch.SM100A, SEED_A | (1 << 55)).valid  # bits 53-60 fixed 0
    assert any("sm_103a" in p for p in lint_smem_descriptor(Arch.SM100A, SEED_A | (1 << 52)).problems)
    misaligned_sbo = (SEED_A & ~(0x3FFF << 32)) | ((528 // 16) << 32)  # 528 B: not a multiple of the 512-B atom
    assert any("SBO" in p for p in lint_smem_descriptor(Arch.SM100A, misaligned_sbo).problems)
    # a tcgen05 descriptor decoded as wgmma: bit 46 set
    assert any("tcgen05" in p for p in lint_smem_descriptor(Arch.SM90A, 0x4000404000010000).problems)
    assert lint_smem_descriptor(Arch.SM90A, 0x4000004000010000).valid


def test_lint_instruction_descriptor():
    assert lint_instr_descriptor(0x08400490, "f16").valid
    f = lint_instr_descriptor(0x08400490, "f16").fields
    assert (f["m"], f["n"], f["a_dtype"], f["d_dtype"]) == (128, 256, "bf16", "f32")
    assert not lint_instr_descriptor(0x08400490, "i8").valid  # f32 D under kind::i8
    bf16_f16d = 0x08400490 & ~(3 << 4)  # D f16 with bf16 inputs
    assert any("bf16" in p for p in lint_instr_descriptor(bf16_f16d, "f16").problems)
    assert not lint_instr_descriptor(0x084004A0 | (1 << 13), "i8").valid  # negate under i8
    assert not lint_instr_descriptor(0x08400490 | (1 << 23), "f16").valid  # reserved bit 23
    assert not lint_instr_descriptor(0x08400490 & ~(0x3F << 17), "f16").valid  # N = 0
    assert not lint_instr_descriptor((0x08400490 & ~(0x1F << 24)) | (6 << 24), "f16").valid  # M = 96
    assert not lint_instr_descriptor(0x08400490 | 1, "f16").valid  # sparsity selector on a dense MMA
    i8_n40 = (0x084004A0 & ~(0x3F << 17)) | (5 << 17)
    assert not lint_instr_descriptor(i8_n40, "i8").valid


# ---- mixed input types (--b-dtype) -------------------------------------------------------------
# Expected words computed by hand from PTX ISA Table 'Instruction descriptor format for .kind::tf32, .kind::f16,
# .kind::f8f6f4 and .kind::i8' (#tcgen05-instuction-desc-kind-tf32-f16-f8f6f4): d_format bits 4-5 (F16 0, F32 1,
# S32 2), a_format bits 7-9, b_format bits 10-12 (kind::f8f6f4: E4M3 0, E5M2 1; kind::i8: U8 0, S8 1), a/b major
# bits 15/16, N >> 3 at bits 17-22, M >> 4 at bits 24-28. CuTe's make_instr_desc<a_type, b_type, c_type, M, N,
# a_major, b_major> (NVIDIA/cutlass include/cute/arch/mma_sm100_desc.hpp) writes a_format_ = to_UMMAFormat<a_type>()
# and b_format_ = to_UMMAFormat<b_type>() independently, with MXF8F6F4Format::E4M3 = 0, E5M2 = 1 and
# S8Format::UINT8 = 0, INT8 = 1: the same words.
MIXED_IDESC = [
    # (kind, M, N, A, B, D, A major, B major), word
    (("f8f6f4", 128, 256, "e4m3", "e5m2", "f32", Major.K, Major.K), 0x08400410),  # 1<<24*8 | 32<<17 | 1<<10 | 1<<4
    (("f8f6f4", 128, 256, "e5m2", "e4m3", "f32", Major.K, Major.K), 0x08400090),  # a_format 1 << 7
    (("f8f6f4", 128, 128, "e4m3", "e5m2", "f16", Major.K, Major.K), 0x08200400),  # D f16: d_format 0
    (("f8f6f4", 64, 64, "e5m2", "e4m3", "f32", Major.MN, Major.MN), 0x04118090),  # both MN-major: bits 15, 16
    (("i8", 128, 256, "u8", "s8", "s32", Major.K, Major.K), 0x08400420),  # 2<<4 | b_format 1 << 10
    (("i8", 128, 256, "s8", "u8", "s32", Major.K, Major.K), 0x084000A0),  # 2<<4 | a_format 1 << 7
    (("i8", 64, 32, "u8", "s8", "s32", Major.K, Major.MN), 0x04090420),  # N-major B: bit 16
]


def test_mixed_instruction_descriptors_match_cute():
    for args, want in MIXED_IDESC:
        assert InstrDescriptor(*args).encode() == want, args
        rep = lint_instr_descriptor(want, args[0])
        assert rep.valid, (args, rep.problems)
        f = rep.fields
        assert (f["a_dtype"], f["b_dtype"], f["d_dtype"], f["m"], f["n"]) == (args[3], args[4], args[5], args[1], args[2])
        assert any("mixed" in n for n in rep.notes)


def test_mixed_instruction_descriptors_derived_from_specs():
    for (kind, m, n, a, b, d, am, bm_), want in MIXED_IDESC:
        tok = {Major.K: "kmajor-sw128", Major.MN: "mnmajor-sw32"}
        spec = make_spec(bm=m, bn=n, bk=128, a=tok[am], b=tok[bm_], dtype=a, b_dtype=b, acc=d, stages=1)
        assert derive(spec).idesc.encode() == want, spec.kernel_name


def test_lint_still_catches_illegal_mixes():
    f16_a_bf16_b = (0x08200010 & ~(7 << 10)) | (1 << 10)  # kind::f16: A f16, B bf16
    rep = lint_instr_descriptor(f16_a_bf16_b, "f16")
    assert not rep.valid and any("same type" in p for p in rep.problems)
    bf16_a_f16_b = (0x08400490 & ~(7 << 10))
    assert not lint_instr_descriptor(bf16_a_f16_b, "f16").valid
    # an f8f6f4 B code that is no type at all (2), and an i8 code past s8 (2)
    assert not lint_instr_descriptor((0x08400010 & ~(7 << 10)) | (2 << 10), "f8f6f4").valid
    assert not lint_instr_descriptor(0x08400420 | (1 << 11), "i8").valid
    # a mixed i8 word is still held to the i8 rules: no negate, s32 D only
    assert not lint_instr_descriptor(0x08400420 | (1 << 14), "i8").valid
    assert not lint_instr_descriptor((0x08400420 & ~(3 << 4)) | (1 << 4), "i8").valid
