import signal
import sys

from .interrupt import exit_interrupted

if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not when started with SIGINT ignored
    signal.signal(signal.SIGINT, exit_interrupted)  # Ctrl-C while the command loads: exit 130, no traceback

from .cli import main  # noqa: E402

sys.exit(main())
