"""cffi builder of om2gen._native: the CPU ACL runtime plus the executor's native helpers.

Built once when om2gen is installed (setup.py's cffi_modules), never at load time. The sources
are runtime_abi/src/**/*.cpp (the CPU ACL runtime is runtime_abi/src/acl_rt/) plus the model
load-and-run code (templates/model/load_and_run.cpp.j2) rendered in its table-driven form: the
classic-OM executor runs OM files through the same code every OM2 model library carries. The
Python executor reaches them through the cdef below, whose types and functions are read from the
C headers.
"""
import os
import re
from pathlib import Path

import jinja2
from cffi import FFI

_ROOT = Path(__file__).resolve().parents[1]
_RUNTIME = _ROOT / "runtime_abi"
_GENERATED = _ROOT / "build" / "om2gen_native"


def _version() -> str:
    text = (_ROOT / "om2gen" / "version.py").read_text()
    return re.search(r'__version__ = "([^"]+)"', text).group(1)


def _table_driven_load_and_run() -> Path:
    """templates/model/load_and_run.cpp.j2 with table_driven=True, written under build/."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(_ROOT / "templates")),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    text = env.get_template("model/load_and_run.cpp.j2").render(generator=f"om2gen {_version()}",
                                                                 table_driven=True)
    _GENERATED.mkdir(parents=True, exist_ok=True)
    path = _GENERATED / "om2_load_and_run_tables.cpp"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


# The headers the module's C source includes; the cdef's types are read from them (and the headers
# they include), in include order, so a struct, enum or constant cannot drift from its header.
INCLUDES = ("om2/om2_executor.h", "om2/om2_cpu_runtime.h", "om2/om2_kernel.h", "om2/custom_op.h",
            "om2/om2_model_tables.h", "om2/om2_so_in_om.h", "om2/om2_op_host.h", "om2/om2_rt2.h")

_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_DIRECTIVE = re.compile(r"\s*#\s*(\w+)\s*(.*?)\s*$")
_INT_LITERAL = re.compile(r"(?:0[xX][0-9a-fA-F]+|\d+)[uUlL]*")
_INT_EXPRESSION = re.compile(r"[-+~()\s]*(?:0[xX][0-9a-fA-F]+|\d+)[uUlL]*[()\s]*")
# Braces that open no declaration of their own: their contents are declared at file scope.
_TRANSPARENT = re.compile(r'\s*(?:namespace\s*\w*|extern\s*"C")\s*')
# The C view of the headers: what a C compiler defines that they test (never __cplusplus).
_PREDEFINED = frozenset({"__GNUC__"})


def _condition(directive: str, arg: str, defined: set, where: str) -> bool:
    name = re.fullmatch(r"defined\s*\(?\s*(\w+)\s*\)?" if directive == "if" else r"(\w+)", arg)
    if name is None:
        raise SystemExit(f"_build_native: {where}: cannot evaluate #{directive} {arg}; the cdef understands "
                         "#ifdef, #ifndef and #if defined(NAME) only")
    return (name.group(1) in defined) != (directive == "ifndef")


def _define(arg: str, defined: set) -> str | None:
    """`#define NAME value` for the cdef: a literal as it is (an array length may use it), any other
    integer expression as `...` (cffi reads its value from the compiler); None for the rest (guards,
    visibility and function-like macros)."""
    name, function_like, value = re.match(r"(\w+)(\(?)\s*(.*)", arg).groups()
    defined.add(name)
    if function_like or not _INT_EXPRESSION.fullmatch(value):
        return None
    return f"#define {name} {value if _INT_LITERAL.fullmatch(value) else '...'}"


def _statement(text: str, where: str) -> str | None:
    """One file-scope statement (without its ';') as cffi takes it, or None when it declares no type.
    Anything else stops the build: a type the cdef cannot take must not vanish from it unnoticed."""
    text = " ".join(text.split())
    if not text or text.startswith("extern ") or (not re.match(r"(typedef|struct|union|enum)\b", text) and "(" in text):
        return None    # functions (FUNCTIONS below), variables, static_asserts
    if text.startswith("typedef ") or re.fullmatch(r"static const \w+ \w+ = [-\w]+", text):
        return text + ";"
    cxx = re.fullmatch(r"(struct|union|enum) (\w+)(?: : [\w ]+)? (\{.*\})", text)
    if cxx:    # C++ spelling (om2_model_tables.h): the tag names the type; an enum's base type goes
        kind, name, body = cxx.groups()
        return f"typedef {kind} {name} {body} {name};"
    raise SystemExit(f"_build_native: {where}: the cdef has no rule for `{text[:80]}`")


def _statements(code: str, where: str) -> list[str]:
    """The type declarations of a header's code (comments and directives gone) at file scope:
    namespaces and extern "C" blocks are looked through, function bodies dropped."""
    out, start, depth, function = [], 0, 0, False
    for m in re.finditer(r"[{};]", code):
        head = code[start:m.start()]
        if m.group() == "{" and depth == 0 and _TRANSPARENT.fullmatch(head):
            start = m.end()
        elif m.group() == "{":
            if depth == 0:
                function = re.search(r"\)\s*(const\s*)?$", head) is not None
            depth += 1
        elif m.group() == "}" and depth == 0:    # the end of a namespace or extern "C" block
            start = m.end()
        elif m.group() == "}":
            depth -= 1
            if depth == 0 and function:
                start = m.end()
        elif depth == 0:
            out.extend(filter(None, [_statement(head, where)]))
            start = m.end()
    return out


def _scan_types(include_dir: Path, name: str, seen: set, defined: set, out: list) -> None:
    """Appends the cdef declarations of header `name` (and first of those it includes) to `out`."""
    if name in seen:
        return
    seen.add(name)
    text = _COMMENT.sub(" ", (include_dir / name).read_text()).replace("\\\n", " ")
    live, code = [True], []   # live: per open #if, whether its lines count
    for line in text.split("\n"):
        d = _DIRECTIVE.match(line)
        if d is None:
            if all(live):
                code.append(line)
            continue
        directive, arg = d.groups()
        if directive in ("if", "ifdef", "ifndef"):
            live.append(all(live) and _condition(directive, arg, defined, name))
        elif directive == "else":
            live[-1] = all(live[:-1]) and not live[-1]
        elif directive == "endif":
            live.pop()
        elif all(live) and directive == "define":
            out.extend(filter(None, [_define(arg, defined)]))
        elif all(live) and directive == "include" and arg.startswith('"'):
            out.extend(_statements("\n".join(code), name))
            code = []
            _scan_types(include_dir, arg.strip('"'), seen, defined, out)
    out.extend(_statements("\n".join(code), name))


def type_declarations(includes=INCLUDES, include_dir: Path = _RUNTIME / "include") -> list[str]:
    """The typedefs, structs, unions, enums and integer constants of the headers `includes` (names
    under include_dir), as cffi's cdef takes them: comments, #ifdef __cplusplus parts, functions,
    inline bodies and other macros dropped."""
    out: list[str] = []
    seen: set = set()
    defined = set(_PREDEFINED)
    for name in includes:
        _scan_types(include_dir, name, seen, defined, out)
    return out


# The functions the Python side calls: their declarations are taken from the headers (from the
# runtime source or the load-and-run template that defines them where no header declares one), so
# the cdef follows the headers (tests/package/test_cdef_headers.py checks the built module does).
FUNCTIONS = (
    "om2x_custom_prepare", "om2x_free", "Om2ListCustomOps", "om2x_custom_launch_count",
    "om2rtLoadSharedObjectFromMemory", "om2x_custom_library_load", "om2x_custom_library_ops",
    "om2x_custom_scope_enter", "om2x_custom_scope_leave", "om2x_custom_scope_current", "om2x_so_load",
    "om2x_so_unload", "om2x_so_symbol", "om2x_tables_model_load", "om2x_tables_entry_points",
    "om2x_fill_load_callbacks", "om2x_bin_store_size", "om2x_dlopen_from_memory", "om2x_resolve_entry_points",
    "om2x_dlclose", "om2x_protect_read_only", "om2x_model_tables", "om2x_abi_version", "om2x_last_error",
    "om2x_model_load", "om2x_model_run", "om2x_model_run_dims", "om2x_model_run_async", "om2x_model_unload",
    "aclrtCreateStream",
    "aclrtDestroyStream", "aclrtSynchronizeStream", "aclrtMalloc", "aclrtFree", "aclrtMemcpy",
    "aclGetRecentErrMsg", "om2rtSetThreadCount", "om2rtTakeProfMarks", "om2rtGetThreadCount",
    "om2rtSetIssueThreadCount", "om2rtGetIssueThreadCount", "om2rtGetLaunchCount",
    "om2rtGetLiveAllocationCount", "om2x_rt2_load", "om2x_rt2_prepare", "om2x_rt2_execute", "om2x_rt2_stats",
    "om2x_rt2_unload",
)

_HEADERS = [*sorted((_RUNTIME / "include").rglob("*.h")), *sorted((_RUNTIME / "src").glob("*.h"))]
_SOURCES = sorted((_RUNTIME / "src").rglob("*.cpp"))
_DEFINERS = [*_SOURCES, _ROOT / "templates" / "model" / "load_and_run.cpp.j2"]
_DECL = re.compile(r"(?:^|[;}\n])\s*((?:[A-Za-z_]\w*[\s*]+)+?)\b([A-Za-z_]\w*)\s*\(([^()]*)\)\s*(?=[;{])", re.S)
_NOT_A_TYPE = re.compile(r"\b(return|if|while|for|switch|sizeof|else|case|define)\b")


def declarations(text: str) -> dict[str, list[str]]:
    """{function: its C declarations ("ret name(params);")} in a header or source text, without
    comments, extern "C", static/inline and visibility macros (XXX_API, XXX_VISIBILITY)."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*|\{#.*?#\}", " ", text, flags=re.S).replace('extern "C"', " ")
    out: dict[str, list[str]] = {}
    for m in _DECL.finditer(text):
        ret, name, params = m.groups()
        if _NOT_A_TYPE.search(ret):
            continue
        ret = " ".join(w for w in ret.split() if w not in ("static", "inline")
                       and not re.fullmatch(r"[A-Z0-9_]+_(API|VISIBILITY)", w))
        out.setdefault(name, []).append(f"{ret} {name}({' '.join(params.split())});")
    return out


def _scan(paths) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in paths:
        for name, decls in declarations(path.read_text()).items():
            found.setdefault(name, []).extend(decls)
    return found


def function_declarations() -> list[str]:
    headers, definers = _scan(_HEADERS), _scan(_DEFINERS)
    out = []
    for name in FUNCTIONS:
        decls = headers.get(name) or definers.get(name)
        if not decls:
            raise SystemExit(f"_build_native: {name} is declared in no header under {_RUNTIME}")
        out.append(decls[0])
    return out


CDEF = "\n".join([*type_declarations(), *function_declarations()]) + "\n"

ffibuilder = FFI()
ffibuilder.cdef(CDEF)
ffibuilder.set_source(
    "om2gen._native",
    "".join(f'#include "{name}"\n' for name in INCLUDES) + 'using namespace om2;\n'
    'extern "C" int32_t om2x_tables_model_load(const void *, const GertModelLoadConfig *, GertModelHandle *);\n'
    'extern "C" void om2x_tables_entry_points(Om2xEntryPoints *);\n'
    'extern "C" int32_t om2x_custom_prepare(const char *, const char *, const Om2CustomTensorDesc *, size_t,\n'
    '    Om2CustomTensorDesc *, size_t, const Om2CustomAttr *, size_t, uint8_t **, size_t *, char *, size_t);\n'
    'extern "C" void om2x_free(void *);\n',
    source_extension=".cpp",
    # relative to the working directory: setup.py runs from the project root and wants relative paths
    sources=[os.path.relpath(p) for p in [*_SOURCES, _table_driven_load_and_run()]],
    include_dirs=[str(_RUNTIME / "include")],
    extra_compile_args=["-std=c++17", "-O2", "-pthread", "-fvisibility=default"],
    extra_link_args=["-pthread"],
    libraries=["dl", "stdc++"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
