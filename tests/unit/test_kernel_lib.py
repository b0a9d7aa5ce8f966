"""Which kernel library objects a kernel links (toolchain/kernel_lib.py), read from its source,
and the blocking they are compiled with."""
import os

from om2gen.toolchain import compiler, kernel_lib


def _names(source):
    return [lib.name for lib in kernel_lib.needed(source)]


def test_needed_follows_the_calls():
    assert _names("om2_gemm_rect(m, n, k, a, b, c);") == ["om2_gemm_lib"]
    assert _names("om2_gemm_rect_t (a, b);\nom2_gemv(x, w, y);") == ["om2_gemm_lib", "om2_gemv_lib"]
    assert _names("om2_gemm_rect_t_images(a, b, n, 0);") == ["om2_gemm_lib"]
    # a name inside another, or in a comment, is no call
    assert _names("my_om2_gemv(x); om2_gemm_rectangle(y);") == []
    assert _names("/* om2_gemm_rect(a)\n */ x = 1; // om2_gemv(y)") == []


def test_defines_are_the_kernels_blocking():
    src = "#define OM2_GEMM_MR 6\n#define OM2_GEMM_NR 16\n#define OM2_GEMV_ROWS 4\n#define OTHER 3\n  # define OM2_GEMM_KC 9\n"
    assert kernel_lib.defines(src) == ("-DOM2_GEMM_MR=6", "-DOM2_GEMM_NR=16", "-DOM2_GEMV_ROWS=4", "-DOM2_GEMM_KC=9")


def test_every_library_source_ships():
    for lib in kernel_lib.LIBRARIES:
        assert "#include" in lib.source()


def test_recorded_names_the_package_source():
    rec = kernel_lib.recorded({"om2_gemv_lib.o": ["cc", "-c", "om2_gemv_lib.c"]})
    assert rec == {"om2_gemv_lib.o": {"source": "<om2gen>/runtime_abi/src/kernel_lib/om2_gemv_lib.c",
                                      "command": ["cc", "-c", "om2_gemv_lib.c"]}}


def test_cache_settings_set_and_restore_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("OM2GEN_CACHE_DIR", "/somewhere")
    monkeypatch.delenv("OM2GEN_NO_PREBUILT", raising=False)
    with compiler.cache_settings(tmp_path, prebuilt=False):
        assert compiler.cache_dir() == tmp_path and os.environ["OM2GEN_NO_PREBUILT"] == "1"
    assert os.environ["OM2GEN_CACHE_DIR"] == "/somewhere" and "OM2GEN_NO_PREBUILT" not in os.environ
