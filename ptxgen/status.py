"""Exit statuses of the ptxgen command (also the contract with scripts that call it), and the error a bad setting
raises: a leaf module, so the command can catch it without loading the runtime."""

EXIT_OK = 0  # success
EXIT_CHECK_FAILED = 1  # a check failed: validation, lint, stale generated/, SASS
EXIT_USAGE = 2  # bad usage or an illegal spec
EXIT_NO_GPU = 3  # no usable GPU


EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as shells report it


class SettingError(ValueError):
    """An environment variable ptxgen reads holds a value it cannot use (exit 2, before any work)."""


SHOWN_CHARS = 160  # the most characters of a value a message quotes


def shown(value, limit: int = SHOWN_CHARS) -> str:
    """``value`` as a message quotes it (its str), cut to ``limit`` characters: an argument of 100 KB is named, not
    echoed."""
    text = str(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit - 40]}...{text[-20:]} ({len(text)} characters)"


def clipped(message) -> str:
    """A message as printed: every word past 2 x SHOWN_CHARS characters (an echoed argument, a path of 100 KB) cut by
    :func:`shown` (a compiler's long log keeps its lines)."""
    import re

    return re.sub(r"\S{%d,}" % (2 * SHOWN_CHARS + 1), lambda m: shown(m.group(0)), str(message))
