"""ptxgen's version, in a leaf module: generated files quote it, and importing it loads nothing else."""

__version__ = "0.4.1"
