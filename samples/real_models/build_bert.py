"""Builds samples/real_models/bert_tiny.onnx: a BERT-style encoder exported by torch.onnx.

Not written as ONNX by hand: a PyTorch model (token + position + type embeddings, post-LN
transformer encoder layers with GELU feed-forward, masked self-attention from an int64
attention mask, a tanh pooler) with seeded weights, exported by torch's own exporter, as a
user's export would be: torch.onnx.export with dynamo=True (torch.export, the default exporter of torch 2.x)
and the batch and sequence axes dynamic, so that the file runs at any batch and sequence length
(the TorchScript exporter, dynamo=False, traced the attention's view(tgt_len, ...) with the
example's length as a constant). Needs torch and onnxscript (not om2gen dependencies):

    pip install torch==2.13.0 onnxscript && python samples/real_models/build_bert.py

The same torch version and seed give the same file; catalog.py pins its sha256.
"""
from pathlib import Path

import torch
from torch import nn

VOCAB, HIDDEN, LAYERS, HEADS, FFN, MAX_POS, SEQ = 1024, 128, 4, 4, 512, 128, 128


class TinyBert(nn.Module):
    def __init__(self):
        super().__init__()
        self.word = nn.Embedding(VOCAB, HIDDEN)
        self.position = nn.Embedding(MAX_POS, HIDDEN)
        self.token_type = nn.Embedding(2, HIDDEN)
        self.norm = nn.LayerNorm(HIDDEN, eps=1e-12)
        layer = nn.TransformerEncoderLayer(HIDDEN, HEADS, FFN, dropout=0.0, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.pooler = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, input_ids, attention_mask, token_type_ids):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        x = self.word(input_ids) + self.position(positions) + self.token_type(token_type_ids)
        x = self.norm(x)
        x = self.encoder(x, src_key_padding_mask=attention_mask == 0)
        return x, torch.tanh(self.pooler(x[:, 0]))


def main():
    torch.manual_seed(20261129)
    model = TinyBert().eval()
    # an example batch of 2: torch.export specialises a dim of size 1 in the example to the constant 1
    ids = torch.randint(0, VOCAB, (2, SEQ), dtype=torch.int64)
    mask = torch.ones(2, SEQ, dtype=torch.int64)
    types = torch.zeros(2, SEQ, dtype=torch.int64)
    out = Path(__file__).with_name("bert_tiny.onnx")
    torch.onnx.export(model, (ids, mask, types), str(out), input_names=["input_ids", "attention_mask", "token_type_ids"],
                      output_names=["last_hidden_state", "pooler_output"], opset_version=17,
                      dynamic_axes={"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
                                    "token_type_ids": {0: "batch", 1: "sequence"}}, dynamo=True, external_data=False)
    print(f"wrote {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
