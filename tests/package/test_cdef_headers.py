"""The cffi cdef of om2gen._native takes its function declarations and its types (typedefs,
structs, unions, enums, integer constants) from the C headers (om2gen/_build_native.py). Checked
here: every function it lists is found, the header reader keeps what cffi can take and drops the
rest, and the built module was built from today's headers -- a header that changed after the
module was built (a stale om2gen/_native.abi3.so) fails here, naming the function or type and the
rebuild."""
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
    """A C type as a built module reports it: without const (calls do not care), structs, unions
    and enums by their names alone (a compiled module spells a typedef'd tag out, a fresh cdef not)."""
    tokens = [t for t in re.findall(r"\w+|\S", ctype) if t not in ("const", "struct", "union", "enum")]
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


HEADER_A = """/* typedef struct Fake { int x; } Fake; (a comment) */
#ifndef A_H
#define A_H
#include <stdint.h>
#include "b.h"
#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__)
#define A_API __attribute__((visibility("default")))
#else
#define A_API
#endif
#define A_LEN 4u
#define A_NEG (-1)
#define A_MAX(a, b) \\
    ((a) > (b) ? (a) : (b))
typedef struct A { int32_t v[A_LEN]; B b; } A;  // B is b.h's
A_API int32_t a_get(const A *a);
static inline int a_twice(int x) { if (x) { return 2 * x; } return 0; }
static const int A_OK = 0;
#ifdef __cplusplus
}
namespace a { class Hidden { int f() { return 1; } }; }
#endif
namespace ns {
enum AKind : uint32_t { A_ONE = 1, A_TWO = 2, };
struct AThing { AKind kind; };
extern const AThing kThing;
}  // namespace ns
#endif
"""


def test_type_declarations_take_the_c_view_of_the_headers(tmp_path):
    (tmp_path / "a.h").write_text(HEADER_A)
    (tmp_path / "b.h").write_text('#include "a.h"\ntypedef struct B { uint8_t x; } B;\n')
    assert BUILD.type_declarations(["a.h", "b.h"], tmp_path) == [
        "typedef struct B { uint8_t x; } B;",     # where a.h includes it (and only once)
        "#define A_LEN 4u", "#define A_NEG ...",
        "typedef struct A { int32_t v[A_LEN]; B b; } A;",
        "static const int A_OK = 0;",
        "typedef enum AKind { A_ONE = 1, A_TWO = 2, } AKind;",
        "typedef struct AThing { AKind kind; } AThing;",
    ]


@pytest.mark.parametrize("text", ["#if A_LEN > 2\n#endif\n", "struct Opaque;\n"])
def test_type_declarations_stop_at_what_they_cannot_read(tmp_path, text):
    (tmp_path / "c.h").write_text(text)
    with pytest.raises(SystemExit, match="c.h"):
        BUILD.type_declarations(["c.h"], tmp_path)


def test_the_types_are_the_headers():
    """The cdef declares what the module's C source includes, no more, no less: the structs its
    Python side fills in (full, so cffi checks every field against the compiler), and the rest."""
    names = {m.group(1) for m in map(re.compile(r"typedef .*\b(\w+);$").match, BUILD.type_declarations()) if m}
    assert {"GertModelLoadConfig", "GertModelRunConfig", "GertModelRunCallbacks", "Om2ModelTables", "Om2OpDef",
            "Om2CustomTensorDesc", "Om2xEntryPoints", "Om2rtProfMark", "aclDataType", "aclrtStream"} <= names
    assert "..." not in " ".join(d for d in BUILD.type_declarations() if not d.startswith("#define"))


TYPES = [re.search(r"(\w+);$", d).group(1) for d in BUILD.type_declarations()
         if re.match(r"typedef (struct|union|enum)\b.*\}", d)]


def _layout(ffi, name: str):
    t = ffi.typeof(name)
    if t.kind == "enum":
        return sorted(t.elements.items())
    return ffi.sizeof(t), [(field, f.offset, _plain(f.type.cname)) for field, f in t.fields]


@pytest.fixture(scope="module")
def fresh_ffi():
    fresh = BUILD.FFI()
    fresh.cdef(BUILD.CDEF)
    return fresh


@pytest.mark.parametrize("name", TYPES)
def test_the_built_module_has_the_headers_types(name, fresh_ffi):
    from om2gen.native import ffi
    got, want = _layout(ffi, name), _layout(fresh_ffi, name)
    assert got == want, (f"{name}: om2gen/_native.abi3.so was built with {got}, the headers now declare "
                         f"{want}: rebuild it (python setup.py build_ext)")
