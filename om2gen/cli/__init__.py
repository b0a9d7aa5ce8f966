"""The om2gen command line: one module per subcommand, `main` the entry point."""
from .entry import main

__all__ = ["main"]
