"""A BERT-base encoder cut to 4 layers (hidden 768, 12 heads, feed-forward 3072, sequence 128,
vocabulary 30522), built here with seeded weights in the form torch.onnx exports BERT: embedding
Gathers, LayerNormalization, per layer Q/K/V MatMul + Add, Reshape/Transpose to heads, scaled
Q.K^T + additive mask from the int64 attention mask, Softmax, context MatMul, output projection,
residual Adds, Erf-GELU feed-forward. Weights are random (std 0.02, as BERT's initialiser):
timings and sizes are those of the real architecture, outputs mean nothing."""
import numpy as np
from onnx import TensorProto

from .graph import Graph

WHAT = "BERT-base encoder, 4 layers, hidden 768, 12 heads, seq 128, vocab 30522, SYNTHETIC seeded weights"
WHAT_SEQ = "the same BERT-base encoder with a symbolic sequence length S: for gears of the sequence"
LAYERS, HIDDEN, HEADS, FFN, SEQ, VOCAB, MAX_POS = 4, 768, 12, 3072, 128, 30522, 512


def _dense(g: Graph, x: str, k: int, n: int) -> str:
    return g.op("Add", [g.op("MatMul", [x, g.normal("w", (k, n), 0.02)]), g.normal("b", (n,), 0.02)])


def _layer_norm(g: Graph, x: str) -> str:
    scale = g.const("ln_scale", np.ones(HIDDEN, np.float32))
    bias = g.const("ln_bias", np.zeros(HIDDEN, np.float32))
    return g.op("LayerNormalization", [x, scale, bias], axis=-1, epsilon=1e-12)


def _heads(g: Graph, x: str, perm, seq: int) -> str:
    shape = g.const("heads_shape", np.array([1 if seq > 0 else 0, seq, HEADS, HIDDEN // HEADS], np.int64))
    return g.op("Transpose", [g.op("Reshape", [x, shape])], perm=perm)


def _encoder_layer(g: Graph, x: str, mask: str, seq: int) -> str:
    """seq: the sequence length, or -1 (with a 0 batch dim copied) when it is symbolic."""
    q = _heads(g, _dense(g, x, HIDDEN, HIDDEN), [0, 2, 1, 3], seq)
    k = _heads(g, _dense(g, x, HIDDEN, HIDDEN), [0, 2, 3, 1], seq)
    v = _heads(g, _dense(g, x, HIDDEN, HIDDEN), [0, 2, 1, 3], seq)
    scale = g.const("scale", np.array(1.0 / np.sqrt(HIDDEN // HEADS), np.float32))
    scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), scale]), mask])
    ctx = g.op("Transpose", [g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])], perm=[0, 2, 1, 3])
    ctx = g.op("Reshape", [ctx, g.const("merge_shape", np.array([1 if seq > 0 else 0, seq, HIDDEN], np.int64))])
    x = _layer_norm(g, g.op("Add", [_dense(g, ctx, HIDDEN, HIDDEN), x]))
    h = _dense(g, x, HIDDEN, FFN)
    erf = g.op("Erf", [g.op("Div", [h, g.const("sqrt2", np.array(np.sqrt(2.0), np.float32))])])
    h = g.op("Mul", [g.op("Mul", [h, g.op("Add", [erf, g.const("one", np.array(1.0, np.float32))])]),
                     g.const("half", np.array(0.5, np.float32))])
    return _layer_norm(g, g.op("Add", [_dense(g, h, FFN, HIDDEN), x]))


def build(seed: int = 3, dynamic_seq: bool = False):
    """dynamic_seq: the sequence length is a symbolic dim S, as torch.onnx exports BERT with a
    dynamic axis: the position ids sliced to the length of input_ids (Shape, Gather, Unsqueeze,
    Slice), the heads split and merged by reshapes to [0, -1, heads, head size] and [0, -1,
    hidden]; for gears of the sequence length (benchmarks/bench_gears.py). (The model's doc
    string stays the module's, so the static model's bytes do not depend on this one.)"""
    g = Graph(seed)
    seq_dim = "S" if dynamic_seq else SEQ
    ids = g.input("input_ids", TensorProto.INT64, (1, seq_dim))
    attention = g.input("attention_mask", TensorProto.INT64, (1, seq_dim))
    word = g.normal("word_embeddings", (VOCAB, HIDDEN), 0.02)
    position = g.normal("position_embeddings", (MAX_POS, HIDDEN), 0.02)
    token_type = g.normal("token_type_embedding", (HIDDEN,), 0.02)   # every token is type 0
    if dynamic_seq:
        length = g.op("Unsqueeze", [g.op("Gather", [g.op("Shape", [ids]), g.const("dim", np.array(1, np.int64))]),
                                    g.const("axes", np.array([0], np.int64))])
        positions = g.op("Slice", [g.const("position_ids", np.arange(MAX_POS, dtype=np.int64)[None, :]),
                                   g.const("starts", np.array([0], np.int64)), length,
                                   g.const("axes", np.array([1], np.int64))])
    else:
        positions = g.const("position_ids", np.arange(SEQ, dtype=np.int64)[None, :])
    x = g.op("Add", [g.op("Add", [g.op("Gather", [word, ids]), g.op("Gather", [position, positions])]), token_type])
    x = _layer_norm(g, x)
    # (1 - mask) * -10000, broadcast over heads and query positions: [1, 1, 1, SEQ]
    m = g.op("Cast", [g.op("Unsqueeze", [attention, g.const("axes", np.array([1, 2], np.int64))])],
             to=TensorProto.FLOAT)
    mask = g.op("Mul", [g.op("Sub", [g.const("one", np.array(1.0, np.float32)), m]),
                        g.const("neg", np.array(-10000.0, np.float32))])
    for _ in range(LAYERS):
        x = _encoder_layer(g, x, mask, -1 if dynamic_seq else SEQ)
    g.output(x, "last_hidden_state", shape=(1, seq_dim, HIDDEN))
    return g.model("bert_base_4l", __doc__)


def make_inputs(rng) -> dict:
    mask = np.ones((1, SEQ), np.int64)
    mask[:, 100:] = 0
    return {"input_ids": rng.integers(0, VOCAB, (1, SEQ)).astype(np.int64), "attention_mask": mask}
