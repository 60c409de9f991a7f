"""Exit statuses of the ptxgen command (also the contract with scripts that call it)."""

EXIT_OK = 0  # success
EXIT_CHECK_FAILED = 1  # a check failed: validation, lint, stale generated/, SASS
EXIT_USAGE = 2  # bad usage or an illegal spec
EXIT_NO_GPU = 3  # no usable GPU
