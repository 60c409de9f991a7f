"""Hostile input: every command refuses bad values, wrong types, unwritable outputs and typos with one clear line and
exit 2 (usage) or 1 (a failed check), never a traceback, never exit 0 on failure, never a half-written file."""

import argparse
import json
import math
import os
import tomllib

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ptxgen.cli import build_parser
from ptxgen.derive.tile.spec import TileSpec
from ptxgen.isa.types import SpecError
from ptxgen.sweep import grid_from_tables, load_grid

from hostile_common import GOOD_GRID, JSON, SEED, grid_file, run


def _setup(tmp):
    """Paths the table refers to: a file, a folder, a kernel folder without layout.json, a corrupt layout.json."""
    (tmp / "afile").write_text("x")
    (tmp / "badtable.json").write_text('{"entries": [{"dtype": "bf16", "arch": "sm_90a", "spec": {}}]}')
    (tmp / "orphan" / "k1").mkdir(parents=True)
    (tmp / "orphan" / "k1" / "kernel.cu").write_text("// hand written\n")
    (tmp / "corrupt" / "k1").mkdir(parents=True)
    (tmp / "corrupt" / "k1" / "layout.json").write_text("{not json")
    (tmp / "badspec" / "k1").mkdir(parents=True)
    (tmp / "badspec" / "k1" / "layout.json").write_text(json.dumps({"spec": {"bm": "x"}}))
    for name, body in {
        "str.toml": '[[product]]\nbm = "x"\nbn = 128\nbk = 32\na = "kmajor-sw64"\n',
        "float.toml": f"[[product]]\n{GOOD_GRID}stages = 1.5\n",
        "dicts.toml": "[[product]]\nbn = 128\nbk = 32\na = \"kmajor-sw64\"\nbm = [{x = 1}]\n",
        "unknown.toml": f"[[product]]\n{GOOD_GRID}bogus = 1\n",
        "empty.toml": "",
        "illegal.toml": '[[product]]\nbm = 128\nbn = 100\nbk = 32\na = "kmajor-sw64"\n',
        "typo_swizzle.toml": '[[product]]\nbm = 128\nbn = 128\nbk = 32\na = "kmajor-sw999"\n',
        "broken.toml": "[[product]\nbm = ",
        "toplevel.toml": f"bm = 128\n[[product]]\n{GOOD_GRID}",
        "emptylist.toml": f"[[product]]\n{GOOD_GRID}stages = []\n",
        "typo_dtype.toml": f'[[product]]\n{GOOD_GRID}dtype = ["f16", "fp16"]\n',
        "typo_a.toml": '[[product]]\nbm = 128\nbn = 128\nbk = 32\na = ["kmajor-sw64", "kmajr-sw64"]\n',
        "typo_loader.toml": f'[[product]]\n{GOOD_GRID}loader = ["tma", "cpasync"]\n',
    }.items():
        grid_file(tmp, body, name)


CASES = [
    # (argv, exit code, message fragment); T is the temporary folder
    (["build", *SEED, "--out", "T/afile"], 2, "is not a folder"),
    (["show", *SEED, "--svg", "T/missing/x.svg"], 2, "does not exist"),
    (["show", *SEED, "--html", "T"], 2, "is a directory"),
    (["show", *SEED, "--decode", "zz"], 2, "not a hexadecimal number"),
    (["show", *SEED, "--decode", "0x1" + "0" * 17], 2, "does not fit in 64 bits"),
    (["show", *SEED, "--decode", "0xffffffffffffffff", "--svg", "T/d.svg"], 1, "PROBLEM"),
    (["check", "T/orphan"], 1, "without a layout.json"),
    (["check", "T/corrupt"], 1, "cannot rebuild the spec"),
    (["check", "T/badspec"], 1, "cannot rebuild the spec"),
    (["check", "T/missing"], 1, "no such folder"),
    (["check", "T/afile"], 1, "not a folder"),
    (["sweep", "--grid", "T/str.toml"], 2, "bm = 'x': must be an integer"),
    (["sweep", "--grid", "T/float.toml"], 2, "stages = 1.5: must be an integer"),
    (["sweep", "--grid", "T/dicts.toml"], 2, "must be an integer"),
    (["sweep", "--grid", "T/unknown.toml"], 2, "unknown grid field"),
    (["sweep", "--grid", "T/empty.toml"], 2, "no legal configuration"),
    (["sweep", "--grid", "T/illegal.toml"], 2, "no legal configuration"),
    (["sweep", "--grid", "T/broken.toml"], 2, "not valid TOML"),
    (["sweep", "--grid", "T/toplevel.toml"], 2, "unknown top-level key"),
    (["sweep", "--grid", "T/emptylist.toml"], 2, "empty list"),
    (["sweep", "--grid", "nosuchgrid"], 2, "no grid 'nosuchgrid'"),
    (["sweep", "--jobs", "0"], 2, "--jobs 0"),
    (["sweep", "--shard", "3/2"], 2, "I must be in 1..N"),
    (["sweep", "--shard", "x"], 2, "expected I/N"),
    (["sweep", "--json", "T"], 2, "is a directory"),
    (["sweep", "--json", "T/missing/r.json"], 2, "does not exist"),
    (["sweep", "--resume", "T/afile"], 2, "cannot read a sweep report"),
    (["sweep", "--merge", "T/afile"], 2, "cannot read a sweep report"),
    (["sweep", "--merge", "T/missing.json"], 2, "cannot read a sweep report"),
    (["sweep", "--jobz", "2"], 2, "unrecognized arguments: --jobz"),
    (["explain", "--bm", "x", "--bn", "128", "--bk", "32", "--a", "kmajor-sw64"], 2, "invalid int value: 'x'"),
    (["explain", "--bm", "128", "--bn", "128", "--bk", "32", "--a", "kmajor-sw999"], 2, "--a"),
    (["explain", *SEED, "--stages", "0"], 2, "stages"),
    (["explain", *SEED, "--bogus"], 2, "unrecognized arguments: --bogus"),
    (["decode"], 2, "give either"),
    (["decode", "0xzz"], 2, "not a hexadecimal number"),
    (["decode", "--idesc", "0x1ffffffff"], 2, "does not fit in 32 bits"),
    (["probe", "--json", "T/missing/p.json"], 2, "does not exist"),
    (["tune", "--json", "T"], 2, "is a directory"),
    (["bench", "--bm", "128"], 2, "give all of"),
    (["nosuchcommand"], 2, "invalid choice"),
    # issue 21 item 6: every spec and problem check before any GPU work (the same answer with or without a GPU)
    (["validate", "--bm", "7", "--bn", "128", "--bk", "32", "--a", "kmajor-sw64"], 2, "--bm=7 is illegal"),
    (["validate", *SEED, "--arch", "sm_80"], 2, "--arch=sm_80 is illegal"),
    (["validate", *SEED, "--m", "-5"], 2, "M=-5 must be in 1.."),
    (["validate", *SEED, "--arch", "sm_90a", "--k", "0"], 2, "K=0 must be in 1.."),
    (["bench", "--bm", "7", "--bn", "128", "--bk", "32", "--a", "kmajor-sw64"], 2, "--bm=7 is illegal"),
    (["bench", "--m", "-5"], 2, "M=-5 must be in 1.."),
    (["bench", "--shapes", "0x10x10"], 2, "M=0 must be in 1.."),
    (["bench", "--arch", "sm_80"], 2, "--arch=sm_80 is illegal"),
    # A spec no arch takes (no --arch) names each arch's own refusal: on an H200 the sm_90a one (another field here)
    (["bench", "--bm", "256", "--bn", "128", "--bk", "64", "--a", "kmajor-sw128", "--b", "kmajor-sw128", "--dtype", "bf16",
      "--stages", "4", "--epilogue", "tma", "--shapes", "4000x4000x4000"], 2,
     "no --arch takes this spec: on sm_100a, --bm=256 is illegal"),
    (["validate", "--bm", "256", "--bn", "128", "--bk", "64", "--a", "kmajor-sw128", "--b", "kmajor-sw128", "--dtype", "bf16",
      "--stages", "4", "--epilogue", "tma"], 2, "; on sm_90a, --stages=4 is illegal"),
    (["tune", "--arch", "foo"], 2, "--arch=foo is illegal"),
    (["tune", "--m", "0"], 2, "M=0 must be in 1.."),
    (["tune", "--json", "T/badtable.json", "--merge"], 2, "not a tuning table ptxgen can add to"),
    (["tune", "--json", "T/afile", "--merge"], 2, "not a tuning table ptxgen can add to"),
    # item 9: a typo in a grid is refused, naming the value, not dropped as an illegal combination
    (["sweep", "--grid", "T/typo_dtype.toml", "--list"], 2, "--dtype=fp16"),
    (["sweep", "--grid", "T/typo_a.toml", "--list"], 2, "kmajr-sw64"),
    (["sweep", "--grid", "T/typo_swizzle.toml"], 2, "grid field a: --a=kmajor-sw999 is illegal"),
    (["sweep", "--grid", "T/typo_loader.toml", "--list"], 2, "--loader=cpasync"),
    (["sweep", "--grid", "T/typo_dtype.toml", "--list-dropped"], 2, "--dtype=fp16"),
    # item 10: messages that said something else than what is wrong
    (["explain", *SEED, "--out-dtype", "s32"], 2, "a f32 accumulator converts to f32, f16 or bf16"),
    (["explain", "--bm", "128", "--bn", "128", "--bk", "32", "--a", "kmajor-sw256"], 2, "--a=kmajor-sw256 is illegal"),
    (["explain", *SEED[:4], "--bk", "1048576", "--a", "kmajor-sw64"], 2, "--bm/--bn/--bk=128x128x1048576 is illegal"),
    (["explain", *SEED, "--dtype", "foo"], 2, "Legal: f16, bf16, tf32, e4m3, e5m2, s8, u8, e2m3, e3m2, e2m1 (the last three with --scale)"),
    (["show", *SEED, "--operand", "d", "--svg", "T/d.svg"], 2, "--operand d"),
]


@pytest.mark.parametrize("argv, code, fragment", CASES, ids=[" ".join(c[0])[:60] for c in CASES])
def test_hostile_table(tmp_path, argv, code, fragment):
    _setup(tmp_path)
    got, out, err = run([a.replace("T", str(tmp_path), 1) if a.startswith("T") else a for a in argv])
    assert got == code, (got, out[-500:], err[-2000:])
    assert fragment in err, err[-2000:]
    assert "Traceback" not in err
    if code == 2:
        assert not (tmp_path / "missing").exists() and not list(tmp_path.glob("**/*.tmp*"))


def test_unknown_dtype_lists_only_input_types():
    code, _, err = run(["explain", *SEED, "--dtype", "foo"])
    assert code == 2 and "ue8m0" not in err and "s32" not in err.split("Legal:")[1], err


def test_epilogue_help_names_both_archs():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    helps = [a.help for a in sub.choices["explain"]._actions if "--epilogue" in a.option_strings]
    assert "sm_90a only" not in helps[0] and "sm_100a" in helps[0], helps


def test_show_decode_lints_a_good_descriptor(tmp_path):
    code, out, err = run(["show", *SEED, "--decode", "0x8000402000010002", "--svg", tmp_path / "d.svg"])
    assert code == 0 and "PROBLEM" not in err and (tmp_path / "d.svg").read_text().startswith("<")


def test_every_flag_has_help():
    def walk(p, path):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sp in a.choices.items():
                    yield from walk(sp, f"{path} {name}")
            elif not isinstance(a, argparse._HelpAction):
                yield path, a

    missing = [f"{path} {a.option_strings or a.dest}" for path, a in walk(build_parser(), "ptxgen") if not (a.help or "").strip()]
    assert not missing, missing


def test_bench_extra_declares_torch_and_test_does_not():
    with open("pyproject.toml", "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    assert extras["bench"] == ["torch>=2.1"]
    assert not any(d.startswith("torch") for d in extras["test"])


# ------------------------------------------------------------------------------------------------
# fuzzing
def _flags() -> dict[str, list[str]]:
    """Every real flag of each command (the fuzzed commands do no compile and no long sweep)."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {name: [o for a in p._actions for o in a.option_strings if o not in ("-h", "--help")]
            for name, p in sub.choices.items()}


FLAGS = _flags()
FUZZED = ("explain", "decode", "show", "validate", "bench", "tune", "probe", "sweep", "cache", "check")
JUNK = st.sampled_from(["128", "64", "32", "0", "-1", "1.5", "x", "", "kmajor-sw64", "mnmajor-sw128", "sm_90a", "f16",
                        "0x8000402000010002", "zz", "1/2", "9/2", "nan", "1e9", "ci", "T/nope/x", "T", "info", "clear",
                        "sm_80", "kmajr-sw64", "-5", "2147483648", "e2m1", "ue8m0", "tma", "pingpong", "2x1"])


@st.composite
def argvs(draw):
    cmd = draw(st.sampled_from(FUZZED))
    argv = [cmd]
    for _ in range(draw(st.integers(0, 8))):
        argv.append(draw(st.one_of(st.sampled_from(FLAGS[cmd]), JUNK) if FLAGS[cmd] else JUNK))
    if cmd == "sweep":
        argv.append("--list")  # the grid is read and checked; nothing runs
    if cmd == "show" and "--svg" not in argv and "--html" not in argv:
        argv += ["--svg", "T/out.svg"]
    if cmd == "check":
        argv.append("T")  # never the checked-in generated/ (a regeneration of every kernel)
    return argv


def _fuzz_cli(tmp_path, argv):
    argv = [str(tmp_path) + a[1:] if a.startswith("T") else a for a in argv]
    old = os.environ.get("PTXGEN_CACHE_DIR")
    os.environ["PTXGEN_CACHE_DIR"] = str(tmp_path / "cache")  # `cache clear` empties a private cache
    try:
        code, _, err = run(argv)
    finally:
        if old is None:
            os.environ.pop("PTXGEN_CACHE_DIR")
        else:
            os.environ["PTXGEN_CACHE_DIR"] = old
    assert code in (0, 1, 2, 3), (argv, code)
    assert "Traceback" not in err


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=argvs())
def test_fuzz_cli(tmp_path, argv):
    _fuzz_cli(tmp_path, argv)


@pytest.mark.slow
@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=argvs())
def test_fuzz_cli_long(tmp_path, argv):
    _fuzz_cli(tmp_path, argv)


FIELD_NAMES = ("bm", "bn", "bk", "a", "b", "a_order", "dtype", "acc", "arch", "stages", "loader", "smem_offset")
SPECLIKE = st.dictionaries(st.sampled_from(FIELD_NAMES), JSON | st.sampled_from([128, 64, 32, "kmajor-sw64", "sm_90a"]),
                           max_size=6)


def _spec_from_json(d):
    try:
        TileSpec.from_json(d)
    except (SpecError, ValueError):
        pass


@settings(max_examples=100, deadline=None)
@given(d=st.one_of(JSON, SPECLIKE))
def test_fuzz_spec_from_json(d):
    _spec_from_json(d)


@pytest.mark.slow
@settings(max_examples=600, deadline=None)
@given(d=st.one_of(JSON, SPECLIKE))
def test_fuzz_spec_from_json_long(d):
    _spec_from_json(d)


@settings(max_examples=100, deadline=None)
@given(tables=st.one_of(JSON, st.lists(SPECLIKE, max_size=2)))
def test_fuzz_grid_from_tables(tables):
    try:
        grid_from_tables("fuzz", tables)
    except (SpecError, ValueError):
        pass


TOML_VALUE = st.one_of(st.integers(-5, 300), st.floats(allow_nan=False, allow_infinity=False), st.booleans(),
                       st.sampled_from(['"x"', '"kmajor-sw64"', "[]", "[1, 2]", '[{x = 1}]', '["tma", 3]', "{y = 2}"]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.dictionaries(st.sampled_from(FIELD_NAMES + ("bogus",)), TOML_VALUE, max_size=5))
def test_fuzz_load_grid(tmp_path, body):
    lines = []
    for k, v in body.items():
        v = str(v).lower() if isinstance(v, bool) else repr(v) if isinstance(v, float) and math.isfinite(v) else v
        lines.append(f"{k} = {v}")
    path = tmp_path / "fuzz.toml"
    path.write_text("[[product]]\n" + "\n".join(lines) + "\n")
    try:
        tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError:
        pass
    try:
        load_grid(str(path))
    except (SpecError, ValueError):
        pass
