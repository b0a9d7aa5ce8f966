"""com.microsoft.DynamicQuantizeLSTM, which ONNX Runtime's quantize_dynamic makes of an LSTM:
LSTM's inputs and attributes, but W [dirs, input, 4H] and R [dirs, H, 4H] are int8 or uint8,
with per-direction scales (or one per column) and zero points as inputs 8-11.

The arithmetic is ONNX Runtime's (uni_directional_lstm.cc with quantized weights, rnn_helpers'
quantized ComputeGemm): per direction, X of every step is quantized dynamically to uint8 at
once (range widened to hold 0, scale (max - min) / 255) and projected by one integer GEMM; each
step quantizes each sequence's hidden state the same way (ORT runs the batch's rows apart) and
adds its integer projection, each
product dequantized by the activation's scale times the weight's. The gates are LSTM's
(ops/recurrent.py: activations, clip, peepholes, input_forget), with MLAS's sigmoid and tanh; the
gates' float sums run in another order than ORT's, so results agree within float rounding.
The weights' zero points are taken out at compile time (int16 weights); W, R, their scales and
zero points must be constants, and sequence_lens is not supported.
"""
from __future__ import annotations

import numpy as np

from ..errors import NeedsConstantError, ShapeError, UnsupportedOpError
from ..ir.program import Derived, KernelCall
from . import common
from .qlinear import MS
from .recurrent import B_IN, C0_IN, H0_IN, LENS_IN, LSTM, P_IN, R_IN, W_IN, X_IN
from .registry import register

W_SCALE, W_ZP, R_SCALE, R_ZP = range(8, 12)


@register("DynamicQuantizeLSTM", since=1, domain=MS)
class DynamicQuantizeLSTM(LSTM):
    dynamic_shapes = False

    def dims(self, node, ins):
        x, w, r = ins[X_IN], ins[W_IN], ins[R_IN]
        for v, what in ((x, "X"), (w, "W"), (r, "R")):
            if len(v.shape) != 3:
                raise ShapeError(f"node {node.name!r} (DynamicQuantizeLSTM): {what} must be 3-D, got {list(v.shape)}")
        common.require_float(node, x, "X")
        for v, what in ((w, "W"), (r, "R")):
            if v.dtype.name not in ("int8", "uint8"):
                raise UnsupportedOpError(f"node {node.name!r} (DynamicQuantizeLSTM): {what} is {v.dtype.name}; "
                                         "int8 or uint8 expected")
        seq, batch, size = x.shape
        d = len(self.reverses(node))
        hs = self.attr(node, "hidden_size")
        h = int(hs) if hs is not None else r.shape[1]
        g = 4 * h
        expect = {"W": (w, (d, size, g)), "R": (r, (d, h, g)), "B": (self.opt(ins, B_IN), (d, 2 * g)),
                  "initial_h": (self.opt(ins, H0_IN), (d, batch, h)),
                  "initial_c": (self.opt(ins, C0_IN), (d, batch, h)), "P": (self.opt(ins, P_IN), (d, 3 * h))}
        for what, (v, shape) in expect.items():
            if v is not None and tuple(v.shape) != shape:
                raise ShapeError(f"node {node.name!r} (DynamicQuantizeLSTM): {what} has shape {list(v.shape)}, "
                                 f"expected {list(shape)}")
        if self.opt(ins, LENS_IN) is not None:
            raise UnsupportedOpError(f"node {node.name!r} (DynamicQuantizeLSTM): sequence_lens is not supported; "
                                     "give every sequence the full length (leave the input out)")
        return seq, batch, size, h, d

    def weight(self, node, ins, i, scale_i, zp_i, d, g) -> tuple[np.ndarray, np.ndarray]:
        """(int16 weights less their zero point, per direction in pairs of k (_in_pairs), float32
        scales [d, 4H])."""
        names = {W_IN: "W", R_IN: "R"}
        parts = [(ins[i], names[i]), (self.opt(ins, scale_i), f"{names[i]}_scale"),
                 (self.opt(ins, zp_i), f"{names[i]}_zero_point")]
        for v, what in parts:
            if v is None or not v.is_const:
                raise NeedsConstantError(f"node {node.name!r} (DynamicQuantizeLSTM): {what} must be a constant (as "
                                         "quantize_dynamic writes it)", v.name if v is not None else what)
        w, scale, zp = (np.asarray(v.const) for v, _ in parts)
        zp = zp.reshape(d, -1)
        if not (zp == zp[:, :1]).all():
            raise UnsupportedOpError(f"node {node.name!r} (DynamicQuantizeLSTM): {names[i]}_zero_point differs "
                                     "between columns; ONNX Runtime takes one per direction")
        if scale.size not in (d, d * g):
            raise ShapeError(f"node {node.name!r} (DynamicQuantizeLSTM): {names[i]}_scale has {scale.size} elements; "
                             f"one per direction ({d}) or per column ({d * g}) expected")
        scales = np.broadcast_to(scale.astype(np.float32).reshape(d, -1), (d, g))
        return _in_pairs(w.astype(np.int16) - zp[:, :1, None].astype(np.int16)), np.ascontiguousarray(scales)

    def lower(self, node, ins, outs, ctx):
        seq, batch, size, h, d = self.dims(node, ins)
        g = 4 * h
        acts = self.activations(node, d)
        if any(a != acts[0] for a in acts):
            raise UnsupportedOpError(f"node {node.name!r} (DynamicQuantizeLSTM): the directions' activations differ; "
                                     "om2gen compiles one set for both")
        w, w_scale = self.weight(node, ins, W_IN, W_SCALE, W_ZP, d, g)
        r, r_scale = self.weight(node, ins, R_IN, R_SCALE, R_ZP, d, g)

        def srcs(*idx):
            return tuple(ins[i].name for i in idx if self.opt(ins, i) is not None)
        inputs = [ins[X_IN].name, Derived(w, srcs(W_IN, W_ZP), "W less its zero point, int16, in pairs of k"),
                  Derived(r, srcs(R_IN, R_ZP), "R less its zero point, int16, in pairs of k"),
                  Derived(w_scale, srcs(W_SCALE), "W_scale per column"),
                  Derived(r_scale, srcs(R_SCALE), "R_scale per column")]
        slot = {"X": 0, "W": 1, "R": 2, "W_scale": 3, "R_scale": 4}
        for key, i in (("B", B_IN), ("h0", H0_IN), ("c0", C0_IN), ("P", P_IN)):
            v = self.opt(ins, i)
            slot[key] = len(inputs) if v is not None else None
            if v is not None:
                common.require_float(node, v, key)
                inputs.append(v.name)
        outputs = []
        for key, i in (("Y", 0), ("Yh", 1), ("Yc", 2)):
            name = node.outputs[i] if i < len(node.outputs) else ""
            slot[key] = len(inputs) + len(outputs) if name else None
            if name:
                outputs.append(name)
        slot["ws"] = len(inputs) + len(outputs)
        # workspace per direction, in bytes: gx [S*batch, 4H], h and c [batch, H] (floats), the
        # quantized X (or h) and the accumulators (int32)
        off, at = {}, 0
        for key, n in (("gx", seq * batch * g), ("h", batch * h), ("c", batch * h),
                       ("q", max(seq * batch * size, h)), ("acc", g)):
            off[key] = at
            at += 4 * n
        reverses = self.reverses(node)
        gate = {"i": 0, "o": h, "f": 2 * h, "c": 3 * h}
        t_expr = {(False,): "step", (True,): f"{seq - 1} - step",
                  (False, True): f"dir ? {seq - 1} - step : step"}[reverses]
        names = sorted(set(acts[0]))
        params = {
            "summary": f"DynamicQuantizeLSTM {self.attr(node, 'direction')} hidden={h}: X {ins[X_IN].describe()} -> "
                       + ", ".join(o.describe() for o in outs),
            "direction": self.attr(node, "direction"), "S": seq, "batch": batch, "I": size, "H": h, "GH": g,
            "w_dir": size * g, "r_dir": h * g, "x_n": seq * batch * size, "rows": seq * batch, "bh": batch * h,
            "bgh": batch * g, "b_dir": 2 * g, "p_dir": 3 * h, "y_ts": d * batch * h, "t_expr": t_expr,
            "slot": slot, "n_addr": slot["ws"] + 1, "ws_item": at, "off": off,
            "gate_in": self.gate_inputs(gate, {"i": 0, "o": h, "f": 2 * h}, slot["P"] is not None, False,
                                        self.attr(node, "clip")),
            "input_forget": bool(self.attr(node, "input_forget")),
            "acts": [{"name": f"act{i}", "expr": e} for i, e in enumerate(names)],
            "dir_acts": [f"act{names.index(e)}" for e in acts[0]],
        }
        return KernelCall("kernels/dynamic_quantize_lstm.c.j2", "DynamicQuantizeLSTM", params, inputs, outputs,
                          block_dim=d, tiling={"items": d}, workspace=d * at)


def _in_pairs(w: np.ndarray) -> np.ndarray:
    """[d, K, N] -> per direction [K // 2, N, 2] (k = 2i and 2i + 1 of each column side by side,
    what vpmaddwd multiplies and adds), then row K - 1 alone when K is odd; flattened to [d, K * N]."""
    d, k, n = w.shape
    even = k - k % 2
    pairs = w[:, :even].reshape(d, even // 2, 2, n).transpose(0, 1, 3, 2).reshape(d, even * n)
    return np.ascontiguousarray(np.concatenate([pairs, w[:, even:].reshape(d, -1)], axis=1))
