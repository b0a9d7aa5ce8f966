"""RNN, GRU and LSTM (opsets 7 and 14): one kernel per node, the time loop sequential inside it.

Parallelism: one work item is one (direction, batch) sequence. Sequences are independent, so
the blocks of a single launch run them concurrently without synchronising; the time steps of
one sequence depend on each other and stay in one block. The alternative (one launch per time
step, split over hidden units) would cost seq_length tasks and a barrier per step, which for
the small batches of inference buys little.

Constant W and R are transposed at compile time to [dir, in, gates*H], so each gate projection
streams one contiguous weight row per input element (a vectorizable axpy); runtime weights are
read in ONNX's [dir, gates*H, in] layout as dot products. Gate pre-activations, the running
hidden/cell state and GRU's reset product live in the task's workspace, one slice per item.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..codegen.literals import c_float
from ..errors import ShapeError, UnsupportedOpError
from ..ir.program import KernelCall
from . import common
from .registry import Op, register

# lower-case name -> (C expression over float x with {alpha}/{beta}, default alpha, default beta);
# None marks a parameter the function does not take (it then consumes no activation_alpha/beta).
_ACTIVATIONS = {
    "relu": ("x > 0.0f ? x : 0.0f", None, None),
    "tanh": ("om2_mlas_tanhf(x)", None, None),          # ORT's gates use MLAS's (om2_vmath.h)
    "sigmoid": ("om2_mlas_logisticf(x)", None, None),
    "affine": ("{alpha} * x + {beta}", 1.0, 0.0),
    "leakyrelu": ("x >= 0.0f ? x : {alpha} * x", 0.01, None),
    "thresholdedrelu": ("x > {alpha} ? x : 0.0f", 1.0, None),
    "scaledtanh": ("{alpha} * om2_tanhf({beta} * x)", 1.0, 1.0),
    "hardsigmoid": ("fmaxf(0.0f, fminf(1.0f, {alpha} * x + {beta}))", 0.2, 0.5),
    "elu": ("x >= 0.0f ? x : {alpha} * (om2_expf(x) - 1.0f)", 1.0, None),
    "softsign": ("x / (1.0f + fabsf(x))", None, None),
    "softplus": ("x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x))", None, None),
}

_DIRECTIONS = {"forward": (False,), "reverse": (True,), "bidirectional": (False, True)}

# ONNX input positions
X_IN, W_IN, R_IN, B_IN, LENS_IN, H0_IN, C0_IN, P_IN = range(8)


class _Recurrent(Op):
    dynamic_shapes = True
    gates: ClassVar[int]                 # gate blocks stacked in W/R: RNN 1, GRU 3 (zrh), LSTM 4 (iofc)
    default_acts: ClassVar[tuple[str, ...]]
    n_outputs: ClassVar[int]
    attrs = {"activation_alpha": [], "activation_beta": [], "activations": None, "clip": None,
             "direction": "forward", "hidden_size": None}

    # --- attributes and shapes -------------------------------------------------------------------

    def layout(self, node) -> int:
        return int(self.attr(node, "layout")) if "layout" in self.attrs else 0

    def reverses(self, node) -> tuple[bool, ...]:
        direction = self.attr(node, "direction")
        if direction not in _DIRECTIONS:
            raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): direction {direction!r} is not one of "
                                     f"{', '.join(_DIRECTIONS)}")
        return _DIRECTIONS[direction]

    def dims(self, node, ins):
        """(seq_length, batch, input_size, hidden_size, num_directions), after checking every shape."""
        x, w, r = ins[X_IN], ins[W_IN], ins[R_IN]
        for v, what in ((x, "X"), (w, "W"), (r, "R")):
            if len(v.shape) != 3:
                raise ShapeError(f"node {node.name!r} ({node.op_type}): {what} must be 3-D, got {list(v.shape)}")
            common.require_float(node, v, what)
        seq, batch, size = (x.shape[1], x.shape[0], x.shape[2]) if self.layout(node) else x.shape
        d = len(self.reverses(node))
        hs = self.attr(node, "hidden_size")
        h = int(hs) if hs is not None else w.shape[1] // self.gates
        g = self.gates * h
        expect = {"W": (w, (d, g, size)), "R": (r, (d, g, h)), "B": (self.opt(ins, B_IN), (d, 2 * g)),
                  "sequence_lens": (self.opt(ins, LENS_IN), (batch,)),
                  "initial_h": (self.opt(ins, H0_IN), self.state_shape(node, d, batch, h)),
                  "initial_c": (self.opt(ins, C0_IN), self.state_shape(node, d, batch, h)),
                  "P": (self.opt(ins, P_IN), (d, 3 * h))}
        for what, (v, shape) in expect.items():
            if v is not None and tuple(v.shape) != shape:
                raise ShapeError(f"node {node.name!r} ({node.op_type}): {what} has shape {list(v.shape)}, "
                                 f"expected {list(shape)}")
            if v is not None and what != "sequence_lens":
                common.require_float(node, v, what)
        lens = self.opt(ins, LENS_IN)
        if lens is not None and lens.dtype.name not in ("int32", "int64"):
            raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): sequence_lens is {lens.dtype.name}; "
                                     "int32 (or int64) expected")
        return seq, batch, size, h, d

    def state_shape(self, node, d, batch, h):
        return (batch, d, h) if self.layout(node) else (d, batch, h)

    @staticmethod
    def opt(ins, i):
        return ins[i] if i < len(ins) else None

    def infer(self, node, ins):
        seq, batch, _, h, d = self.dims(node, ins)
        dtype = ins[X_IN].dtype
        y = (batch, seq, d, h) if self.layout(node) else (seq, d, batch, h)
        state = self.state_shape(node, d, batch, h)
        return [common.out(dtype, y)] + [common.out(dtype, state) for _ in range(self.n_outputs - 1)]

    def activations(self, node, d):
        """Per direction, the (C expression) of each activation slot, alpha/beta resolved."""
        n = len(self.default_acts)
        names = self.attr(node, "activations")
        names = list(self.default_acts) * d if names is None else list(names)
        if len(names) not in (n, n * d):
            raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): {len(names)} activations given, "
                                     f"expected {n * d} ({n} per direction)")
        alphas = list(self.attr(node, "activation_alpha") or [])
        betas = list(self.attr(node, "activation_beta") or [])
        exprs = []
        for name in names:
            key = str(name).lower()
            if key not in _ACTIVATIONS:
                raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): activation {name!r} is not supported "
                                         f"(supported: {', '.join(sorted(_ACTIVATIONS))})")
            expr, alpha, beta = _ACTIVATIONS[key]
            # a function consumes the next alpha/beta only if it takes one (ONNX Runtime's reading)
            if alpha is not None and alphas:
                alpha = alphas.pop(0)
            if beta is not None and betas:
                beta = betas.pop(0)
            exprs.append(expr.format(alpha=c_float(alpha if alpha is not None else 0.0),
                                     beta=c_float(beta if beta is not None else 0.0)))
        if len(exprs) == n:
            exprs = exprs * d   # one direction's list given for a bidirectional node: both use it
        return [exprs[i * n:(i + 1) * n] for i in range(d)]

    # --- lowering --------------------------------------------------------------------------------

    def gate_inputs(self, gate: dict, peep: dict, peepholes: bool, lbr: bool, clip) -> dict:
        """Each gate's activation argument for element j, as C: its pre-activation in gates[] (LSTM
        peepholes and GRU's linear-before-reset term added), clipped to [-clip, clip] when asked."""
        def clipped(e: str) -> str:
            return e if clip is None else f"fminf(fmaxf({e}, {c_float(-float(clip))}), {c_float(float(clip))})"

        def pre(name: str, extra: str = "") -> str:
            return clipped(f"gates[{gate[name]} + j]{extra}")

        if self.gates == 1:
            return {"h": clipped("gates[j]")}
        if self.gates == 3:
            return {"z": pre("z"), "r": pre("r"), "hh": pre("hh", " + r * tmp[j]" if lbr else "")}
        with_state = {n: f" + p[{peep[n]} + j] * {'c_new' if n == 'o' else 'c_prev'}" if peepholes else ""
                      for n in peep}
        return {"i": pre("i", with_state["i"]), "f": pre("f", with_state["f"]), "c": pre("c"),
                "o": pre("o", with_state["o"])}

    def lower(self, node, ins, outs, ctx):
        seq, batch, size, h, d = self.dims(node, ins)
        g = self.gates * h
        layout = self.layout(node)
        present = {name: self.opt(ins, i) is not None for name, i in
                   (("B", B_IN), ("lens", LENS_IN), ("h0", H0_IN), ("c0", C0_IN), ("P", P_IN))}
        if self.gates != 4:
            present["c0"] = present["P"] = False

        # Address slots: present inputs in ONNX order, then present outputs, then the workspace.
        inputs, slot = [], {}
        for key, i in (("X", X_IN), ("W", W_IN), ("R", R_IN), ("B", B_IN), ("lens", LENS_IN), ("h0", H0_IN),
                       ("c0", C0_IN), ("P", P_IN)):
            v = self.opt(ins, i)
            if key in ("X", "W", "R") or present.get(key):
                slot[key] = len(inputs)
                inputs.append(v.name)
            else:
                slot[key] = None
        kmajor = {}
        for key, i in (("W", W_IN), ("R", R_IN)):
            v = ins[i]
            kmajor[key] = v.is_const
            if v.is_const:
                inputs[slot[key]] = np.asarray(np.asarray(v.const, np.float32).transpose(0, 2, 1), order="C")
        outputs = []
        for key, i in (("Y", 0), ("Yh", 1), ("Yc", 2)):
            name = node.outputs[i] if i < len(node.outputs) and i < self.n_outputs else ""
            slot[key] = len(inputs) + len(outputs) if name else None
            if name:
                outputs.append(name)
        slot["ws"] = len(inputs) + len(outputs)

        # Element strides of X (time, batch), Y (time, direction, batch) and states (direction, batch).
        x_ts, x_bs = (size, seq * size) if layout else (batch * size, size)
        y_ts, y_ds, y_bs = (d * h, h, seq * d * h) if layout else (d * batch * h, batch * h, h)
        s_ds, s_bs = (h, d * h) if layout else (batch * h, h)

        # Workspace per item: h [H], gates [G*H], then c [H] (LSTM) or the reset product [H] (GRU).
        ws_item = h + g + (h if self.gates > 1 else 0)
        acts = self.activations(node, d)
        unique = sorted({e for per_dir in acts for e in per_dir})
        act_name = {e: f"act{i}" for i, e in enumerate(unique)}

        def matvec(acc, acc_off, mat, x, m0, rows, cols, dir_index):
            """acc[acc_off + m] += sum_k mat[dir, m0 + m, k] x[k] for m < rows."""
            base = dir_index * g * cols
            if kmajor[mat]:
                return {"fn": "matvec_kmajor", "acc": acc, "acc_off": acc_off, "w": mat, "w_off": base + m0,
                        "x": x, "rows": rows, "cols": cols, "ld": g}
            return {"fn": "matvec_mmajor", "acc": acc, "acc_off": acc_off, "w": mat, "w_off": base + m0 * cols,
                    "x": x, "rows": rows, "cols": cols, "ld": cols}

        lbr = self.gates == 3 and bool(self.attr(node, "linear_before_reset"))
        dirs = []
        for i, reverse in enumerate(self.reverses(node)):
            pre = [matvec("gates", 0, "W", "x", 0, g, size, i)]
            post = []
            if self.gates == 3:   # GRU: the hidden gate's recurrent term depends on the reset gate
                pre.append(matvec("gates", 0, "R", "h", 0, 2 * h, h, i))
                if lbr:
                    pre.append(matvec("tmp", 0, "R", "h", 2 * h, h, h, i))
                else:
                    post.append(matvec("gates", 2 * h, "R", "tmp", 2 * h, h, h, i))
            else:
                pre.append(matvec("gates", 0, "R", "h", 0, g, h, i))
            dirs.append({"index": i, "reverse": reverse, "acts": [act_name[e] for e in acts[i]],
                         "wb": i * 2 * g, "rb": i * 2 * g + g, "p": i * 3 * h,
                         "y": i * y_ds, "state": i * s_ds, "pre": pre, "post": post})
        clip = self.attr(node, "clip")
        fns = {mv["fn"] for dd in dirs for mv in dd["pre"] + dd["post"]}
        gate = {"z": 0, "r": h, "hh": 2 * h} if self.gates == 3 else {"i": 0, "o": h, "f": 2 * h, "c": 3 * h}
        peep = {"i": 0, "o": h, "f": 2 * h}
        items = d * batch
        tiling = {"items": items}   # with a dynamic model's sequence length (common.tiling_field)
        params = {
            "summary": f"{node.op_type} {self.attr(node, 'direction')} layout={layout} hidden={h}: "
                       f"X {ins[X_IN].describe()} -> " + ", ".join(f"{o.describe()}" for o in outs),
            "cell": node.op_type, "S": common.tiling_field(tiling, seq, "S"), "batch": batch, "I": size, "H": h,
            "GH": g,
            "gate": gate, "gate_in": self.gate_inputs(gate, peep, present["P"], lbr, clip),
            "rb_rows": 2 * h if lbr else g, "lbr": lbr,
            "input_forget": self.gates == 4 and bool(self.attr(node, "input_forget")),
            "slot": slot, "n_addr": slot["ws"] + 1,
            "lens_ctype": ins[LENS_IN].dtype.c_type if present["lens"] else None,
            "x_ts": x_ts, "x_bs": x_bs, "y_ts": y_ts, "y_bs": y_bs, "s_bs": s_bs,
            "ws_item": ws_item, "ws_gates": h, "ws_extra": h + g,
            "acts": [{"name": act_name[e], "expr": e} for e in unique],
            "kmajor": "matvec_kmajor" in fns, "mmajor": "matvec_mmajor" in fns,
            "dirs": dirs, "bidirectional": d > 1,
        }
        if len(tiling) > 1:
            params["tiling_fields"] = list(tiling)
        return KernelCall("kernels/recurrent.c.j2", node.op_type, params, inputs, outputs,
                          block_dim=common.block_dim_for(items, seq * g * (size + h)), tiling=tiling,
                          workspace=items * ws_item * 4)


@register("RNN", since=7)
class RNN(_Recurrent):
    gates = 1
    default_acts = ("Tanh",)
    n_outputs = 2


@register("GRU", since=7)
class GRU(_Recurrent):
    gates = 3
    default_acts = ("Sigmoid", "Tanh")
    n_outputs = 2
    attrs = {**_Recurrent.attrs, "linear_before_reset": 0}


@register("LSTM", since=7)
class LSTM(_Recurrent):
    gates = 4
    default_acts = ("Sigmoid", "Tanh", "Tanh")
    n_outputs = 3
    attrs = {**_Recurrent.attrs, "input_forget": 0}


@register("RNN", since=14)
class RNN14(RNN):
    attrs = {**RNN.attrs, "layout": 0}


@register("GRU", since=14)
class GRU14(GRU):
    attrs = {**GRU.attrs, "layout": 0}


@register("LSTM", since=14)
class LSTM14(LSTM):
    attrs = {**LSTM.attrs, "layout": 0}
