"""The command line: exit statuses, JSON contracts, messages."""

import json
import subprocess
import sys

import pytest

from ptxgen.cli import main

SEED = ["--bm", "128", "--bn", "128", "--bk", "32", "--a", "kmajor-sw64"]
OPERAND_KEYS = {"major", "swizzle", "atom_order", "layout_type", "stage_bytes", "alignment_bytes", "lbo_bytes",
                "sbo_bytes", "base_offset", "k_steps", "cell_offsets"}


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_explain_json_contract(capsys):
    code, out, err = run(capsys, "explain", *SEED, "--json")
    assert code == 0 and err == ""
    j = json.loads(out)  # nothing but the JSON on stdout
    assert set(j) == {"ptxgen_version", "kernel_name", "spec", "idesc", "a", "b"}
    assert {"bm", "bn", "bk", "dtype", "acc", "arch", "stages", "a", "b", "a_order", "b_order"} <= set(j["spec"])
    assert set(j["idesc"]) == {"hex", "fields"} and j["idesc"]["hex"] == "0x08210010"
    for name in "ab":
        assert OPERAND_KEYS <= set(j[name])
        for step in j[name]["k_steps"]:
            assert set(step) == {"k", "start_offset_bytes", "desc_hex"} and len(step["desc_hex"]) == 18
    a = j["a"]
    assert (a["major"], a["swizzle"], a["atom_order"], a["sbo_bytes"], a["lbo_bytes"]) == ("k", "sw64", "k", 512, 16)
    assert [s["start_offset_bytes"] for s in a["k_steps"]] == [0, 32]
    assert len(a["cell_offsets"]) == 128 and len(a["cell_offsets"][0]) == 4  # [i over M][j over K/8]
    assert len(j["b"]["cell_offsets"]) == 32 and len(j["b"]["cell_offsets"][0]) == 16  # [k][j over N/8]


def test_explain_json_sm90(capsys):
    code, out, _ = run(capsys, "explain", "--bm", "128", "--bn", "128", "--bk", "64", "--a", "mnmajor-sw128", "--arch", "sm_90a", "--json")
    j = json.loads(out)
    assert j["idesc"]["instruction"] == "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"
    assert j["idesc"]["imm_trans_a"] == 1 and j["idesc"]["imm_trans_b"] == 1
    assert j["a"]["slab_offsets_bytes"] == [0, 1024]


def test_explain_text_explains(capsys):
    code, out, _ = run(capsys, "explain", *SEED)
    assert code == 0
    for needle in ("sbo_bytes", "512", "why:", "ref: PTX ISA", "#tcgen05-shared-memory-descriptor", "first sw64 atom", "m2:q1"):
        assert needle in out, needle


def test_illegal_spec_exit_2_message_no_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "ptxgen", "build", "--bm", "128", "--bn", "100", "--bk", "32",
                           "--a", "kmajor-sw64", "--out", str(tmp_path / "out")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "--bn=100 is illegal" in proc.stderr and "Legal:" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == "" and not (tmp_path / "out").exists()


def test_bad_usage_exit_2(capsys):
    # the tile flags are checked by explain itself (explain --operand takes none of them): exit 2 naming the missing ones
    code, _, err = run(capsys, "explain", "--bm", "128")
    assert code == 2 and "--bn, --bk, --a" in err
    assert run(capsys, "decode")[0] == 2
    assert run(capsys, "decode", "0xZZ")[0] == 2


def test_decode(capsys):
    code, out, _ = run(capsys, "decode", "0x8000402000010000", "--json")
    j = json.loads(out)
    assert code == 0 and j["valid"] and j["swizzle"] == "sw64"
    assert {"arch", "start_address_bytes", "lbo_bytes", "sbo_bytes", "version", "base_offset", "lbo_mode",
            "layout_type", "swizzle", "valid", "problems"} <= set(j)
    code, out, _ = run(capsys, "decode", "0x0000402000010000")  # layout type 0 but keeps version: valid (none)
    assert code == 0
    code, out, _ = run(capsys, "decode", "0x8000002000010000")  # sm_100a without version bits
    assert code == 1 and "version" in out
    code, out, _ = run(capsys, "decode", "--idesc", "0x08400490", "--json")
    j = json.loads(out)
    assert code == 0 and {"kind", "m", "n", "a_dtype", "b_dtype", "d_dtype", "a_major", "b_major", "negate_a",
                          "negate_b", "sparse", "saturate", "max_shift", "valid", "problems"} <= set(j)
    assert run(capsys, "decode", "--idesc", "0x08400490", "--kind", "i8")[0] == 1


def test_gpu_commands_without_gpu_exit_3():
    from ptxgen.runtime.launch.gpu import NoGPU, require_gpu

    try:
        require_gpu()
        pytest.skip("a GPU is present")
    except NoGPU:
        pass
    for cmd in (["validate", *SEED], ["probe"], ["bench", *SEED]):
        proc = subprocess.run([sys.executable, "-m", "ptxgen", *cmd], capture_output=True, text=True)
        assert proc.returncode == 3, (cmd, proc.stderr)
        assert "no usable NVIDIA GPU" in proc.stderr and "Traceback" not in proc.stderr


def test_show_writes_svg_and_html(tmp_path, capsys):
    assert run(capsys, "show", *SEED, "--svg", str(tmp_path / "a.svg"), "--operand", "a")[0] == 0
    assert (tmp_path / "a.svg").read_text().count('class="cell"') == 512
    assert run(capsys, "show", *SEED, "--html", str(tmp_path / "p.html"))[0] == 0
    assert "<svg" in (tmp_path / "p.html").read_text()


def test_the_parser_of_one_subcommand_is_the_whole_parsers():
    """main builds only the subcommand it runs (start-up time); each such parser must be the whole parser's, and the
    two lists main picks from must name every subcommand (a new one left out would lose its fast path only, but
    one named there and built nowhere would fail)."""
    from ptxgen.cli import GPU_COMMANDS, LOCAL_COMMANDS, build_parser

    def subparsers(p):
        (action,) = [a for a in p._actions if a.dest == "command"]
        return action.choices

    whole = subparsers(build_parser())
    assert sorted(whole) == sorted(LOCAL_COMMANDS + GPU_COMMANDS)
    for name in whole:
        assert sorted(subparsers(build_parser(name))) == ([name] if name in LOCAL_COMMANDS else sorted(GPU_COMMANDS))
        assert subparsers(build_parser(name))[name].format_help() == whole[name].format_help(), name


@pytest.mark.parametrize("dtype", ["int4", "tf32"])
def test_bench_untunable_dtype_is_usage_before_any_gpu(capsys, dtype):
    # with no tile flags the chooser picks among f16/bf16/e4m3 tiles: another type is exit 2 on any machine, said
    # before the GPU is looked for (a GPU machine used to reach an IndexError, this one exit 3)
    code, _, err = run(capsys, "bench", "--dtype", dtype, "--shapes", "128x128x128")
    assert code == 2 and f"--dtype={dtype} is illegal" in err and "f16, bf16, e4m3" in err


def test_missing_dependency_exit_3_no_traceback(tmp_path):
    # a python with no cuda-python (a broken install): build needs NVRTC; one line naming the package, exit 3
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text("import sys\nclass _Block:\n    def find_spec(self, name, path=None, target=None):\n"
                       "        if name == 'cuda' or name.startswith('cuda.'):\n"
                       "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
                       "sys.meta_path.insert(0, _Block())\n")
    import os

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
               PTXGEN_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-m", "ptxgen", "build", *SEED, "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 3, proc.stderr
    assert "cuda-python is not installed" in proc.stderr and "Traceback" not in proc.stderr


def test_flags_are_matched_whole_not_by_prefix(capsys):
    # `show` has --svg/--html; --out used to be taken as a prefix of --out-dtype (then an illegal type, or a silent one)
    with pytest.raises(SystemExit) as e:
        main(["show", *SEED, "--out", "x.svg"])
    assert e.value.code == 2 and "unrecognized arguments: --out" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["explain", *SEED, "--stage", "2"])  # a prefix of --stages
    assert e.value.code == 2
    code, out, _ = run(capsys, "explain", *SEED, "--stages", "2", "--json")  # control: the whole flag works
    assert code == 0 and json.loads(out)
