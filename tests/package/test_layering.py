"""The package's layering (docs/layout.md), as import-linter contracts in pyproject.toml: no
import cycles between the modules or packages of any package, the compile pipeline imports
nothing of the runtime, lowering imports no code generation, nothing imports the CLI."""
from __future__ import annotations

from pathlib import Path

from importlinter import cli

ROOT = Path(__file__).resolve().parents[2]


def test_the_import_contracts_hold(capsys):
    code = cli.lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "0 broken" in out, out
