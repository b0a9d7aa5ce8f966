"""python -m benchmarks.models [NAME ...]: build (or find in the cache) the benchmark models."""
import sys

from . import BUILDERS, path

for n in sys.argv[1:] or BUILDERS:
    print(f"{n:14} {path(n)}  ({BUILDERS[n][1]})")
