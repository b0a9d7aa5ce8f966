"""The cffi CDEF in om2gen/_build_native.py is written by hand from the C headers: every function it
declares must be declared, with the same return and parameter types, by a header (or, for the few
with no header, the runtime source or the load-and-run template that defines them). A header that
changes without the CDEF following fails here, without rebuilding the native module. (Structs and
enums the CDEF declares in full are checked by cffi itself when the module is built.)"""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_BUILD = ROOT / "om2gen" / "_build_native.py"
_TYPE_WORDS = {"const", "void", "char", "int", "unsigned", "signed", "short", "long", "float", "double",
               "struct", "enum"}
_DECL = re.compile(r"(?:^|[;}\n])\s*((?:[A-Za-z_]\w*[\s*]+)+?)\b([A-Za-z_]\w*)\s*\(([^()]*)\)\s*(?=[;{])", re.S)


def _cdef() -> str:
    text = _BUILD.read_text()
    return re.search(r'^CDEF = """(.*?)^"""', text, re.S | re.M)[1]


def _strip(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"\{#.*?#\}", " ", text, flags=re.S)            # Jinja comments in the template
    return text.replace('extern "C"', " ")


def _type(words: str, named: bool) -> str:
    """A declaration's type without its name and with the macros headers put in front."""
    tokens = re.findall(r"[A-Za-z_]\w*|\*|\[\d*\]", words)
    tokens = [t for t in tokens if t not in ("static", "inline") and not re.fullmatch(r"[A-Z0-9_]+_(API|VISIBILITY)", t)]
    if named and len(tokens) > 1 and tokens[-1] not in _TYPE_WORDS and re.match(r"\w", tokens[-1]):
        tokens = tokens[:-1]
    return " ".join(tokens)


def _signature(ret: str, params: str) -> tuple:
    params = params.strip()
    plist = [] if params in ("", "void") else [_type(p, True) for p in params.split(",")]
    return _type(ret, False), tuple(plist)


def _declarations(text: str) -> dict:
    out = {}
    for m in _DECL.finditer(_strip(text)):
        ret, name, params = m.groups()
        if re.search(r"\b(return|if|while|for|switch|sizeof|else|case|define)\b", ret):
            continue
        out.setdefault(name, set()).add(_signature(ret, params))
    return out


def _sources() -> dict:
    """{function: its signatures} from the headers; from the sources only for those no header declares
    (a definition agreeing with the CDEF must not hide a header that no longer does)."""
    headers = _scan([*sorted((ROOT / "runtime_abi" / "include").rglob("*.h")),
                     *sorted((ROOT / "runtime_abi" / "src").glob("*.h"))])
    sources = _scan([*sorted((ROOT / "runtime_abi" / "src").glob("*.cpp")),
                     ROOT / "templates" / "model" / "load_and_run.cpp.j2"])
    return {**sources, **headers}


def _scan(files) -> dict:
    found: dict = {}
    for path in files:
        for name, sigs in _declarations(path.read_text()).items():
            found.setdefault(name, set()).update(sigs)
    return found


CDEF_FUNCTIONS = _declarations(_cdef())


def test_the_cdef_declares_functions():
    assert len(CDEF_FUNCTIONS) > 40, sorted(CDEF_FUNCTIONS)


@pytest.mark.parametrize("name", sorted(CDEF_FUNCTIONS))
def test_cdef_function_matches_its_header(name):
    found = _sources()
    assert name in found, f"{name} is in _build_native.CDEF but declared in no header or runtime source"
    (mine,) = CDEF_FUNCTIONS[name]
    assert mine in found[name], (f"{name}: _build_native.CDEF declares {mine}, the headers/sources "
                                 f"{sorted(found[name])}; update the CDEF")
