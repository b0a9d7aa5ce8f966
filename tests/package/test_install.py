"""The package installs into a fresh venv with its templates and runtime, and compiles + runs a sample."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_install_into_fresh_venv_and_compile(tmp_path):
    venv = tmp_path / "venv"
    # a venv that sees nothing of this environment: om2gen and its run-time dependencies come from
    # this checkout's pyproject.toml, as for a user (pip's cache keeps this from downloading twice)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    proc = subprocess.run([str(py), "-m", "pip", "install", "--quiet", str(ROOT)],
                          capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    script = (
        "import om2gen, numpy as np, pathlib;"
        "import om2gen.resources as r;"
        "assert 'site-packages' in str(r.templates_dir()), r.templates_dir();"
        "assert (r.include_dir() / 'om2' / 'om2_model_api.h').is_file();"
        # the objects the install prebuilt (om2gen/prebuild.py), inside the installed package
        "assert 'site-packages' in str(r.prebuilt_dir()) and (r.prebuilt_dir() / 'prebuilt.json').is_file();"
        "assert any((r.prebuilt_dir() / 'objects').rglob('*.o'));"
        f"om2gen.compile({str(ROOT / 'samples/cnn/model.onnx')!r}, 'x.om2', input_shapes={{'image': (1, 3, 32, 32)}});"
        "m = om2gen.load('x.om2');"
        "p = m.run({'image': np.zeros((1, 3, 32, 32), np.float32)})['probs'];"
        "assert abs(float(p.sum()) - 1) < 1e-5;"
        "import om2gen.acl as acl;"
        f"om2gen.compile({str(ROOT / 'samples/cnn/model.onnx')!r}, 'x.om', input_shapes={{'image': (1, 3, 32, 32)}},"
        " format='om');"
        "mid, ret = acl.mdl.load_from_file('x.om'); assert ret == 0, acl.get_recent_err_msg();"
        "assert acl.mdl.unload(mid) == 0; print('ok')"
    )
    proc = subprocess.run([str(py), "-c", script], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok")
    proc = subprocess.run([str(venv / "bin" / "om2gen"), "inspect", "x.om2"], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, env=env)
    assert proc.returncode == 0 and "probs" in proc.stdout, proc.stderr
