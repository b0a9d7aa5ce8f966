"""The cffi cdef of om2gen._native takes its function declarations from the C headers
(om2gen/_build_native.py). Checked here: every function it lists is found, and the built module
was built from today's headers -- a header that changed after the module was built (a stale
om2gen/_native.abi3.so) fails here, naming the function and the rebuild."""
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _builder():
    spec = importlib.util.spec_from_file_location("om2gen_build_native", ROOT / "om2gen" / "_build_native.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)   # parses the cdef; compiles nothing
    return module


BUILD = _builder()


def _plain(ctype: str) -> str:
    """A function type as a built module reports it: without const (calls do not care), structs as
    a struct by its name alone."""
    tokens = [t for t in re.findall(r"\w+|\S", ctype) if t not in ("const", "struct")]
    return " ".join(tokens).replace("( void )", "( )")


def test_every_function_comes_from_a_header():
    decls = BUILD.function_declarations()
    assert len(decls) == len(BUILD.FUNCTIONS) > 40
    for name, decl in zip(BUILD.FUNCTIONS, decls):
        assert f" {name}(" in decl


def test_declarations_drop_comments_and_visibility_macros():
    text = ('/* f(int) */ ACL_FUNC_VISIBILITY aclError aclrtFoo(void **p, size_t n);\n'
            'extern "C" OM2_API int32_t om2x_bar(const char *s) { return 0; }\n'
            'static inline int helper(int x) { if (x) return x; return 0; }\n')
    assert BUILD.declarations(text) == {"aclrtFoo": ["aclError aclrtFoo(void **p, size_t n);"],
                                        "om2x_bar": ["int32_t om2x_bar(const char *s);"],
                                        "helper": ["int helper(int x);"]}


@pytest.fixture(scope="module")
def from_headers() -> dict:
    """{function: its C type as the cdef built from today's headers gives it}. cffi has no public
    call for the type of a declared function without compiling, hence its parser's table."""
    fresh = BUILD.FFI()
    fresh.cdef(BUILD.CDEF)
    return {name: _plain(fresh._parser._declarations[f"function {name}"][0].get_c_name()) for name in BUILD.FUNCTIONS}


@pytest.mark.parametrize("name", BUILD.FUNCTIONS)
def test_the_built_module_follows_the_headers(name, from_headers):
    from om2gen.native import ffi, lib
    got = _plain(ffi.getctype(ffi.typeof(getattr(lib, name))))
    assert got == from_headers[name], (f"{name}: om2gen/_native.abi3.so was built with {got}, the headers now "
                                       f"declare {from_headers[name]}: rebuild it (python setup.py build_ext)")
