"""Every om2gen subpackage is in pyproject.toml's explicit package list (else an installed om2gen
lacks it, while an editable install hides the omission)."""
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")   # Python >= 3.11

ROOT = Path(__file__).resolve().parents[2]


def test_every_subpackage_is_listed():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "om2gen").rglob("__init__.py")}
    assert found - listed == set(), f"add {sorted(found - listed)} to [tool.setuptools] packages in pyproject.toml"
