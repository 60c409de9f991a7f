"""Exit statuses of the ptxgen command (also the contract with scripts that call it), and the error a bad setting
raises: a leaf module, so the command can catch it without loading the runtime."""

EXIT_OK = 0  # success
EXIT_CHECK_FAILED = 1  # a check failed: validation, lint, stale generated/, SASS
EXIT_USAGE = 2  # bad usage or an illegal spec
EXIT_NO_GPU = 3  # no usable GPU


EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as shells report it


def exit_interrupted(signum=None, frame=None) -> None:
    """A SIGINT handler for the moments around a command (loading it, exiting after it): say so and exit 130 at once,
    with no traceback (a KeyboardInterrupt there would print one, or kill the interpreter while it shuts down)."""
    import os

    try:
        os.write(2, b"ptxgen: interrupted\n")
    except OSError:
        pass
    os._exit(EXIT_INTERRUPTED)


def started_as_the_command() -> bool:
    """``python -m ptxgen ...`` or the ``ptxgen`` script: the interpreter's own arguments (``sys.orig_argv``, which
    nobody rewrites) say so; a program or a test that imports ptxgen or calls ``ptxgen.cli.main`` is neither."""
    import sys

    argv = list(getattr(sys, "orig_argv", []))
    if "-m" in argv[:-1] and argv[argv.index("-m") + 1] == "ptxgen":
        return True
    return len(argv) > 1 and argv[1].replace("\\", "/").rsplit("/", 1)[-1] in ("ptxgen", "ptxgen.exe")


class SettingError(ValueError):
    """An environment variable ptxgen reads holds a value it cannot use (exit 2, before any work)."""


SHOWN_CHARS = 160  # the most characters of a value a message quotes


def shown(value, limit: int = SHOWN_CHARS) -> str:
    """``value`` as a message quotes it (its str), cut to ``limit`` characters: an argument of 100 KB is named, not echoed."""
    text = str(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit - 40]}...{text[-20:]} ({len(text)} characters)"


def clipped(message) -> str:
    """A message as printed: every word past 2 x SHOWN_CHARS characters (an echoed argument, a path of 100 KB) cut by
    :func:`shown` (a compiler's long log keeps its lines)."""
    import re

    return re.sub(r"\S{%d,}" % (2 * SHOWN_CHARS + 1), lambda m: shown(m.group(0)), str(message))
