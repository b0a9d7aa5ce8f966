"""Writes an ONNX model that mixes the sample custom operators with built-in ones, and prints its path.

    python samples/custom_op/model.py [--out DIR]      (default DIR: samples/custom_op/build)

    x ─ Relu ─ r ─┐
                  AddCustom ─ s ─ ScaleShift(alpha=2, beta=0.5) ─┬─ y0 ─┐
    y ────────────┘                                              └─ y1 ─ Mul ─ z

AddCustom and ScaleShift are in the domain "om2.sample" (opset import ("om2.sample", 1)); they are
implemented by libom2_sample_ops.so (build.py). reference(x, y) computes the model's outputs with
numpy, for tests and for checking a compiled model by hand.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "build"
MODEL_NAME = "custom_op_sample.onnx"

DOMAIN = "om2.sample"
SHAPE = (2, 4, 64, 64)        # static: 32768 elements, so the custom kernels run with 2 blocks
ALPHA = 2.0
BETA = 0.5
INPUTS = ("x", "y")
OUTPUTS = ("z",)


def make_model(shape: tuple[int, ...] = SHAPE):
    """The sample model as an onnx.ModelProto."""
    import onnx
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("AddCustom", ["r", "y"], ["s"], name="add_custom", domain=DOMAIN),
        helper.make_node("ScaleShift", ["s"], ["y0", "y1"], name="scale_shift", domain=DOMAIN,
                         alpha=float(ALPHA), beta=float(BETA)),
        helper.make_node("Mul", ["y0", "y1"], ["z"], name="mul"),
    ]
    graph = helper.make_graph(
        nodes, "om2_custom_op_sample",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)) for name in INPUTS],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)) for name in OUTPUTS])
    model = helper.make_model(graph, producer_name="om2gen-samples",
                              opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def make_inputs(seed: int = 0, shape: tuple[int, ...] = SHAPE) -> dict[str, np.ndarray]:
    """Deterministic float32 inputs (x has negative values, so Relu matters)."""
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(shape).astype(np.float32) for name in INPUTS}


def reference(x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    """The model's outputs computed with numpy in float32, keyed by output name."""
    x = np.asarray(x, dtype=np.float32)
    y = np.asarray(y, dtype=np.float32)
    alpha, beta = np.float32(ALPHA), np.float32(BETA)
    s = np.maximum(x, np.float32(0)) + y                 # Relu, AddCustom
    y0 = s * alpha + beta                                # ScaleShift output 0
    y1 = s * alpha - beta                                # ScaleShift output 1
    return {"z": (y0 * y1).astype(np.float32)}           # Mul


def write(out_dir: Path = DEFAULT_OUT) -> Path:
    import onnx

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / MODEL_NAME
    onnx.save(make_model(), path)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output directory (default: {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    print(write(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
