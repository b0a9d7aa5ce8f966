"""Where the templates and runtime sources are: top level of a checkout, or inside the package."""
from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def _find(name: str) -> Path:
    for candidate in (_PKG / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"om2gen is installed without its {name}/ directory (looked in {_PKG} and its parent); "
                            "reinstall om2gen")


def templates_dir() -> Path:
    return _find("templates")


def runtime_abi_dir() -> Path:
    return _find("runtime_abi")


def include_dir() -> Path:
    return runtime_abi_dir() / "include"


def prebuilt_dir() -> Path:
    """The objects built when om2gen was installed (om2gen/prebuild.py): inside the package."""
    return _PKG / "_prebuilt"
