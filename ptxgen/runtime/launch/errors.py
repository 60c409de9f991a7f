"""The runtime's shared error type, in a leaf module: launch, tensormap and the commands raise or catch it."""


class ProblemError(ValueError):
    """A problem size or layout the kernel cannot handle (refused before any launch: exit 2)."""
