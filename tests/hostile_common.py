"""Shared by the hostile-input and fault tests (tests/test_hostile.py, tests/test_faults.py): the CLI run in-process, a
grid file, the seed spec's flags and a strategy of arbitrary JSON values."""

import contextlib
import io

from hypothesis import strategies as st

from ptxgen.cli import main

SEED = ["--bm", "128", "--bn", "128", "--bk", "32", "--a", "kmajor-sw64"]
GOOD_GRID = 'bm = 128\nbn = 128\nbk = 32\na = "kmajor-sw64"\n'


def run(argv) -> tuple[int, str, str]:
    """main(argv) -> (exit code, stdout, stderr); argparse's SystemExit counts as an exit code."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def grid_file(tmp, body, name="g.toml"):
    p = tmp / name
    p.write_text(body)
    return p


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True) | st.text(max_size=12),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3),
    max_leaves=8,
)
