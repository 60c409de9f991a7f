"""Ctrl-C for the ptxgen command: exit 130 with no traceback, whenever it comes. A leaf module: ptxgen/__init__.py
takes SIGINT over first thing, with :mod:`ptxgen.ctrlc`, while the command loads; ptxgen.cli for the rest.

* Loading the command, parsing its arguments, and after it has finished: exit 130 at once (:func:`exit_interrupted`).
* While the command runs (:func:`interruptible`): KeyboardInterrupt, which the command turns into its cleanup (a sweep
  stops its workers and writes its partial report), then exit 130 before the interpreter's shutdown (:func:`leave`),
  which restores SIGINT's default action and would let a further Ctrl-C kill the process by the signal.
* Only where ptxgen runs as the program (:func:`started_as_the_command`): a test or a tool that calls
  ``ptxgen.cli.main`` keeps its own SIGINT handling and signal mask.
"""

from __future__ import annotations

import os
import signal
import sys

from .ctrlc import exit_interrupted, started_as_the_command  # noqa: F401 (ptxgen.interrupt's API too)
from .status import EXIT_INTERRUPTED


def takes_over(argv) -> bool:
    """Whether ``ptxgen.cli.main(argv)`` handles SIGINT itself: run as the program, in the main thread, SIGINT not
    ignored (a process started with it ignored keeps it so)."""
    import threading

    return (argv is None and started_as_the_command() and threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN)


def run_program(body) -> int:
    """``body()`` (the command, a function of no arguments) with SIGINT taken over; its exit status (after a Ctrl-C:
    130, exiting at once)."""
    signal.signal(signal.SIGINT, exit_interrupted)
    try:
        code = body()
    except KeyboardInterrupt:  # a second Ctrl-C while the first was being reported
        code = EXIT_INTERRUPTED
    leave(code)
    return code


def leave(code: int) -> None:
    """The command is done: interrupted, exit 130 now (stdout and stderr flushed); else SIGINT is held off while the
    interpreter exits."""
    if code == EXIT_INTERRUPTED:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        os._exit(EXIT_INTERRUPTED)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


class interruptible:  # noqa: N801 - used as `with interruptible():`
    """While the command runs: Ctrl-C is KeyboardInterrupt (when SIGINT is taken over; else left as it is)."""

    def __enter__(self):
        self.ours = signal.getsignal(signal.SIGINT) is exit_interrupted
        if self.ours:
            self.hook = sys.unraisablehook
            sys.unraisablehook = _unraisable(self.hook)
            signal.signal(signal.SIGINT, signal.default_int_handler)

    def __exit__(self, *exc) -> None:
        if self.ours:
            signal.signal(signal.SIGINT, exit_interrupted)
            sys.unraisablehook = self.hook


def _unraisable(previous):
    """A KeyboardInterrupt raised where Python cannot pass it on (a weakref callback of the import system, a __del__)
    would be printed as "Exception ignored ..." and lost: exit 130 at once instead (the CI run of 2026-12-06 at
    ba48e27 caught one in importlib's module-lock callback while `ptxgen sweep` loaded). Anything else goes to
    ``previous``."""

    def hook(unraisable) -> None:
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
            exit_interrupted()
        previous(unraisable)
    return hook
