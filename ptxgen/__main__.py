import sys

from .ctrlc import take_over_while_loading

take_over_while_loading()  # done by ptxgen/__init__.py already; again here, should the package be loaded another way

from .cli import main  # noqa: E402

sys.exit(main())
