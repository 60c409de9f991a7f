"""Ping-pong past 128 columns: with setmaxnreg and two consumer warpgroups a consumer thread owns the setmaxnreg.inc
count (232 registers), not the launch bound (168), so a 128 x BN ping-pong tile (each warpgroup the whole tile: BN f32
accumulator registers a thread) is legal up to BN = 200 (rules; isa.shapes.consumer_register_budget). Codegen (NVRTC,
no GPU): those kernels compile without local memory, their highest register past the launch count and below the
setmaxnreg one (the SASS gate that checks it, with a control). Not run on a GPU yet."""

import pytest

from ptxgen.derive.tile.kernel import plan_kernel
from ptxgen.derive.tile.spec import make_spec
from ptxgen.isa.shapes import consumer_register_budget
from ptxgen.isa.types import SpecError
from ptxgen.runtime.compile.sass import _register_ceiling_problems, highest_register


def pp(bn, dtype="e4m3", **kw):
    return make_spec(**{**dict(bm=128, bn=bn, bk=128 if dtype == "e4m3" else 64, a="kmajor-sw128", b="kmajor-sw128",
                               dtype=dtype, acc="f32", out_dtype="bf16", arch="sm_90a", stages=4, schedule="persistent",
                               consumers="pingpong"), **kw})


def test_two_consumer_warpgroups_own_the_setmaxnreg_count_four_the_launch_bound():
    assert (consumer_register_budget(2), consumer_register_budget(2, setmaxnreg=True)) == (168, 232)
    assert consumer_register_budget(4, setmaxnreg=True) == consumer_register_budget(4) == 96  # BM = 256: measured


@pytest.mark.parametrize("dtype", ["e4m3", "bf16"])
def test_pingpong_is_legal_up_to_200_columns(dtype):
    for bn in (136, 160, 192, 200):
        pp(bn, dtype)
    with pytest.raises(SpecError) as e:
        pp(208, dtype)
    assert e.value.field == "--bn" and "232" in str(e.value) and "setmaxnreg" in str(e.value)


def test_control_without_setmaxnreg_the_launch_bound_refuses_160():
    # the cp.async producer keeps its registers (no setmaxnreg): 168 a thread, so a 128 x 160 ping-pong tile spills
    with pytest.raises(SpecError) as e:
        pp(160, "bf16", loader="cp.async")
    assert e.value.field == "--bn" and "168" in str(e.value)


@pytest.mark.parametrize("bn,dtype,epilogue", [(200, "e4m3", "direct"), (192, "bf16", "tma")])
def test_wide_pingpong_compiles_within_its_setmaxnreg_registers(bn, dtype, epilogue):
    from ptxgen.runtime.compile.artifacts import generate
    from ptxgen.runtime.compile.cache import compile_cached, sass_dumps
    from ptxgen.runtime.compile.sass import parse_instructions

    spec = pp(bn, dtype, epilogue=epilogue)
    art = generate(spec)
    assert art.sass.problems == [] and art.sass.local_bytes == 0 and art.sass.registers == 168
    dump, _ = sass_dumps(compile_cached(art.files["kernel.cu"], spec.kernel_name, "sm_90a"))
    top = highest_register(parse_instructions(dump))
    assert 168 <= top < 232  # the consumer branch uses registers past the launch count, within setmaxnreg's


def test_control_a_register_past_every_warps_count_is_caught():
    pipe = plan_kernel(pp(192)).pipeline
    assert _register_ceiling_problems([(0, "MOV R231, R1 ;")], 168, pipe, False) == []
    assert "R232" in _register_ceiling_problems([(0, "MOV R232, R1 ;")], 168, pipe, False)[0]
    # without setmaxnreg (a linked cubin drops it) the launch count is the ceiling
    assert _register_ceiling_problems([(0, "MOV R200, R1 ;")], 168, pipe, True)
    assert highest_register([(0, "IMAD R12, RZ, R3, UR40 ;"), (16, "S2R R7, SR_TID.X ;")]) == 12


def test_tune_searches_the_wide_e4m3_pingpong_tiles():
    """``ptxgen tune --dtype e4m3`` times 128 x 160 and 128 x 192 ping-pong (with the TMA store where BN allows it), so
    the GPU run that measures them needs no tile flags; the tables' first e4m3 tiles keep their places."""
    from ptxgen.runtime.choose.tune import candidates

    names = {s.kernel_name for s in candidates("e4m3", "sm_90a")}
    assert {pp(160).kernel_name, pp(192).kernel_name, pp(192, epilogue="tma").kernel_name} <= names
    assert pp(160, epilogue="direct", raster_group=16).kernel_name in names
    assert candidates("e4m3", "sm_90a")[1].bn == 256  # default_spec's 128 x 256 is still the second


def test_the_gpu_jobs_hold_every_wide_pingpong_config():
    # tests/test_gpu.py's _add drops a config the rules refuse, silently: each wide ping-pong job must be legal
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_gpu import WIDE_PINGPONG, gpu_jobs, wide_pingpong

    for cfg, _ in WIDE_PINGPONG:
        make_spec(arch="sm_90a", **cfg)  # raises SpecError where the rules refuse it
    wide = wide_pingpong(gpu_jobs("sm_90a"))
    assert sorted((j["spec"]["bn"], j["spec"]["dtype"], j["m"]) for j in wide) == sorted(
        (cfg["bn"], cfg["dtype"], shape[0]) for cfg, shape in WIDE_PINGPONG)
