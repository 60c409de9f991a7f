"""The first thing the ptxgen command does: take SIGINT over, so that a Ctrl-C while it loads exits 130 with no
traceback. ``ptxgen/__init__.py`` imports this module before anything else (the ``ptxgen`` script's
``from ptxgen.cli import main`` and ``python -m ptxgen`` both run the package's ``__init__`` first); it imports
only modules the interpreter has loaded by then (``os``, ``sys``, the builtin ``_signal``) and
:mod:`ptxgen.status`, so the handler is in
place within microseconds of the first line of ptxgen running. What comes before that line is the interpreter's
own start-up (``site`` and the ``.pth`` files of site-packages), where Python's handling of SIGINT applies
(docs/robustness.md). :mod:`ptxgen.interrupt` builds the rest on these two functions.
"""

import _signal
import os
import sys

from .status import EXIT_INTERRUPTED  # a leaf of constants, no imports


def exit_interrupted(signum=None, frame=None) -> None:
    """The SIGINT handler around the command: say so and exit 130 at once, with no traceback."""
    try:
        os.write(2, b"ptxgen: interrupted\n")
    except OSError:
        pass
    os._exit(EXIT_INTERRUPTED)


def started_as_the_command() -> bool:
    """``python -m ptxgen ...`` or the ``ptxgen`` script: the interpreter's own arguments (``sys.orig_argv``, which
    nobody rewrites) say so; a program or a test that imports ptxgen or calls ``ptxgen.cli.main`` is neither."""
    argv = list(getattr(sys, "orig_argv", []))
    if "-m" in argv[:-1] and argv[argv.index("-m") + 1] == "ptxgen":
        return True
    return len(argv) > 1 and argv[1].replace("\\", "/").rsplit("/", 1)[-1] in ("ptxgen", "ptxgen.exe")


def take_over_while_loading() -> None:
    """Run as the command, with Python's own SIGINT handler in place (not started with SIGINT ignored, and not
    already taken over): Ctrl-C exits 130 from here on, until ``ptxgen.cli.main`` runs the command."""
    if started_as_the_command() and _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
        _signal.signal(_signal.SIGINT, exit_interrupted)
