"""Shape-only operators are views (no kernel); Transpose and Concat move data."""
from __future__ import annotations

from ..errors import ShapeError
from ..ir import symbolic
from ..ir.program import Alias, KernelCall
from . import common
from .registry import Op, register


class View(Op):
    """The output is the input's bytes under another shape."""

    def out_shape(self, node, ins) -> tuple[int, ...]:
        raise NotImplementedError

    def infer(self, node, ins):
        shape = self.out_shape(node, ins)
        if common.prod(shape) != ins[0].size:
            raise ShapeError(f"node {node.name!r} ({node.op_type}): cannot view {list(ins[0].shape)} as {list(shape)}")
        return [common.out(ins[0].dtype, shape)]

    def lower(self, node, ins, outs, ctx):
        return Alias(ins[0].name)


@register("Reshape", since=5)
class Reshape(View):
    dynamic_shapes = True
    attrs = {"allowzero": 0}

    def out_shape(self, node, ins):
        spec = common.const_ints(node, ins[1], "the target shape")
        src = ins[0].shape
        allowzero = self.attr(node, "allowzero")
        shape = [src[i] if d == 0 and not allowzero and i < len(src) else d for i, d in enumerate(spec)]
        if shape.count(-1) > 1:
            raise ShapeError(f"node {node.name!r} (Reshape): more than one -1 in the target shape {spec}")
        if -1 in shape:
            known = common.prod([d for d in shape if d != -1])
            if known == 0 or ins[0].size % known:
                raise ShapeError(f"node {node.name!r} (Reshape): cannot reshape {list(src)} to {spec}")
            shape[shape.index(-1)] = ins[0].size // known
        return tuple(shape)


@register("Flatten", since=1)
class Flatten(View):
    dynamic_shapes = True
    attrs = {"axis": 1}

    def out_shape(self, node, ins):
        shape = ins[0].shape
        a = int(self.attr(node, "axis"))
        if not -len(shape) <= a <= len(shape):
            raise ShapeError(f"node {node.name!r} (Flatten): axis {a} is out of range for rank {len(shape)}")
        a = a + len(shape) if a < 0 else a
        outer = common.prod(shape[:a])
        return (outer, common.prod(shape[a:]))


@register("Squeeze", since=1)
class Squeeze(View):
    dynamic_shapes = True
    attrs = {"axes": None}

    def axes(self, node, ins):
        return self.attr(node, "axes")

    def out_shape(self, node, ins):
        shape = ins[0].shape
        axes = self.axes(node, ins)
        if axes is None:
            return tuple(d for d in shape if d != 1)
        axes = {common.axis(node, a, len(shape)) for a in axes}
        for a in axes:
            if shape[a] != 1:
                raise ShapeError(f"node {node.name!r} (Squeeze): dim {a} has size {shape[a]}, not 1")
        return tuple(d for i, d in enumerate(shape) if i not in axes)


@register("Squeeze", since=13)
class Squeeze13(Squeeze):
    attrs = {}

    def axes(self, node, ins):
        return common.const_ints(node, ins[1] if len(ins) > 1 else None, "axes")


@register("Unsqueeze", since=1)
class Unsqueeze(View):
    dynamic_shapes = True
    attrs = {"axes": None}

    def axes(self, node, ins):
        return self.attr(node, "axes")

    def out_shape(self, node, ins):
        axes = self.axes(node, ins)
        if axes is None:
            raise ShapeError(f"node {node.name!r} (Unsqueeze): axes are required")
        rank = len(ins[0].shape) + len(axes)
        axes = sorted(common.axis(node, a, rank) for a in axes)
        shape = list(ins[0].shape)
        for a in axes:
            shape.insert(a, 1)
        return tuple(shape)


@register("Unsqueeze", since=13)
class Unsqueeze13(Unsqueeze):
    attrs = {}

    def axes(self, node, ins):
        return common.const_ints(node, ins[1] if len(ins) > 1 else None, "axes")


@register("Transpose", since=1)
class Transpose(Op):
    dynamic_shapes = True
    attrs = {"perm": None}

    def perm(self, node, rank):
        perm = self.attr(node, "perm")
        perm = list(range(rank - 1, -1, -1)) if perm is None else [int(p) for p in perm]
        if sorted(perm) != list(range(rank)):
            raise ShapeError(f"node {node.name!r} (Transpose): perm {perm} is not a permutation of 0..{rank - 1}")
        return perm

    def infer(self, node, ins):
        shape = ins[0].shape
        return [common.out(ins[0].dtype, [shape[p] for p in self.perm(node, len(shape))])]

    def lower(self, node, ins, outs, ctx):
        src = ins[0]
        perm = self.perm(node, len(src.shape))
        # Output dims in order, with the source stride each one walks; merge runs that stay contiguous.
        src_strides = [common.prod(src.shape[i + 1:]) for i in range(len(src.shape))]
        # (a dynamic dim stays, though the run may make it 1; merging and the view need proof)
        dims = [(src.shape[p], src_strides[p]) for p in perm
                if not (isinstance(src.shape[p], int) and src.shape[p] == 1)] or [(1, 1)]
        merged = [list(dims[0])]
        for size, stride in dims[1:]:
            if symbolic.decided(lambda: merged[-1][1] == stride * size, False):
                merged[-1] = [merged[-1][0] * size, stride]
            else:
                merged.append([size, stride])
        if len(merged) == 1 and symbolic.decided(lambda: merged[0][1] == 1, False):
            return Alias(src.name)  # a transpose that moves only size-1 dims is a view
        inner_size, inner_stride = merged[-1]
        rows = common.prod([s for s, _ in merged[:-1]]) if len(merged) > 1 else 1
        tiling = {"rows": rows}
        outer = [{"size": common.tiling_field(tiling, s, f"d{i}"),
                  "strides": [common.tiling_field(tiling, st, f"s{i}")]} for i, (s, st) in enumerate(reversed(merged[:-1]))]
        params = {
            "summary": f"Transpose perm={perm}: {src.describe()} -> {outs[0].describe()}",
            "ctype": src.dtype.c_type, "outer": outer, "inner": common.tiling_field(tiling, inner_size, "inner"),
            "inner_stride": common.tiling_field(tiling, inner_stride, "inner_stride"),
        }
        if len(tiling) > 1:
            params["tiling_fields"] = list(tiling)
        return KernelCall("kernels/transpose.c.j2", "Transpose", params, [src.name], [outs[0].name],
                          block_dim=common.block_dim_for(rows, inner_size), tiling=tiling)


@register("Concat", since=4)
class Concat(Op):
    dynamic_shapes = True
    attrs = {"axis": None}

    def infer(self, node, ins):
        a = node.attrs.get("axis")
        if a is None:
            raise ShapeError(f"node {node.name!r} (Concat): attribute axis is required")
        rank = len(ins[0].shape)
        a = common.axis(node, a, rank)
        shape = list(ins[0].shape)
        for v in ins[1:]:
            if len(v.shape) != rank or any(v.shape[i] != shape[i] for i in range(rank) if i != a):
                raise ShapeError(f"node {node.name!r} (Concat): {v.name!r} {list(v.shape)} does not match "
                                 f"{list(ins[0].shape)} outside axis {a}")
            if v.dtype != ins[0].dtype:
                raise ShapeError(f"node {node.name!r} (Concat): inputs mix {ins[0].dtype.name} and {v.dtype.name}")
            shape[a] += v.shape[a]
        return [common.out(ins[0].dtype, shape)]

    def lower(self, node, ins, outs, ctx):
        rank = len(outs[0].shape)
        a = common.axis(node, node.attrs["axis"], rank)
        outer = common.prod(outs[0].shape[:a])
        inner = common.prod(outs[0].shape[a + 1:])
        parts, offset = [], 0
        present = [v for v in ins if symbolic.decided(lambda v=v: v.size > 0, True)]   # (a count may be 0 or not)
        tiling = {"rows": outer}    # with a dynamic model's sizes (common.tiling_field)
        for i, v in enumerate(present):
            parts.append({"chunk": common.tiling_field(tiling, v.shape[a] * inner, f"chunk{i}"),
                          "offset": common.tiling_field(tiling, offset, f"offset{i}")})
            offset += v.shape[a] * inner
        params = {
            "summary": f"Concat axis={a}: {', '.join(v.describe() for v in ins)} -> {outs[0].describe()}",
            "ctype": outs[0].dtype.c_type, "parts": parts, "row": common.tiling_field(tiling, offset, "row"),
            "itemsize": outs[0].dtype.itemsize,
        }
        if len(tiling) > 1:
            params["tiling_fields"] = list(tiling)
        return KernelCall("kernels/concat.c.j2", "Concat", params, [v.name for v in present], [outs[0].name],
                          block_dim=common.block_dim_for(outer, offset), tiling=tiling)
