"""Compiles the shipped sample model, runs it, and compares the outputs with ONNX Runtime.

    python samples/run_sample.py [--out DIR]
"""
import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import om2gen

SAMPLE = Path(__file__).resolve().parent / "cnn" / "model.onnx"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="directory for sample.om2 (default: a temporary directory)")
    args = p.parse_args()
    out_dir = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="om2gen-sample-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    archive = out_dir / "sample.om2"

    t0 = time.perf_counter()
    om2gen.compile(SAMPLE, archive, input_shapes={"image": (1, 3, 32, 32)})
    t1 = time.perf_counter()
    print(f"compiled {SAMPLE.name} -> {archive} ({archive.stat().st_size} bytes) in {t1 - t0:.2f} s")

    image = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    with om2gen.load(archive) as model:
        probs = model.run({"image": image})["probs"]
    print("om2gen probs:      ", np.array2string(probs[0], precision=5, max_line_width=200))

    try:
        import onnxruntime as ort
    except ImportError:
        print("onnxruntime is not installed: skipping the comparison (pip install onnxruntime)")
        return 0
    sess = ort.InferenceSession(str(SAMPLE), providers=["CPUExecutionProvider"])
    ref = sess.run(None, {"image": image})[0]
    print("onnxruntime probs: ", np.array2string(ref[0], precision=5, max_line_width=200))
    err = float(np.max(np.abs(probs - ref)))
    bound = 1e-4 * max(1.0, float(np.max(np.abs(ref))))
    print(f"max abs difference: {err:.3g} (bound {bound:.3g}) -> {'OK' if err <= bound else 'MISMATCH'}")
    return 0 if err <= bound else 1


if __name__ == "__main__":
    sys.exit(main())
