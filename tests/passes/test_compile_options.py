"""fusion and winograd are compile options: the environment variables are overrides the pipeline
reads once, an option given wins over them, and the manifest records the value used."""
import json
import zipfile

import numpy as np
import pytest
from helpers import make_model, rand
from onnx import helper

import om2gen
from om2gen import pipeline
from om2gen.cli.entry import build_parser
from om2gen.errors import CompileError
from om2gen.formats.om2 import layout


def conv_relu_model():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"], name="act")]
    return make_model(nodes, {"x": rand(1, 16, 12, 12)}, ["y"], {"w": rand(16, 16, 3, 3, seed=1)})


def compile_bytes(tmp_path, name, **opts) -> bytes:
    out = tmp_path / f"{name}.om2"
    om2gen.compile(conv_relu_model(), out, **opts)
    return out.read_bytes()


def options(data: bytes) -> dict:
    import io
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return json.loads(z.read(layout.MANIFEST))["options"]


def test_environment_and_option_give_the_same_archive(tmp_path, monkeypatch):
    monkeypatch.delenv(pipeline.FUSION_ENV, raising=False)
    monkeypatch.delenv(pipeline.WINOGRAD_ENV, raising=False)
    default = compile_bytes(tmp_path, "default")
    assert options(default)["fusion"] is True and options(default)["winograd"] == "auto"
    by_option = compile_bytes(tmp_path, "option", fusion="off", winograd="off")
    monkeypatch.setenv(pipeline.FUSION_ENV, "0")
    monkeypatch.setenv(pipeline.WINOGRAD_ENV, "0")
    by_env = compile_bytes(tmp_path, "env")
    assert by_env == by_option != default
    assert options(by_env)["fusion"] is False and options(by_env)["winograd"] == 0


def test_an_option_given_wins_over_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(pipeline.FUSION_ENV, "0")
    monkeypatch.setenv(pipeline.WINOGRAD_ENV, "0")
    data = compile_bytes(tmp_path, "on", fusion=True, winograd=2)
    assert options(data)["fusion"] is True and options(data)["winograd"] == 2


@pytest.mark.parametrize("value, want", [(None, True), (True, True), (False, False), ("on", True), ("OFF", False),
                                         ("0", False), ("yes", True)])
def test_fusion_settings(value, want, monkeypatch):
    monkeypatch.delenv(pipeline.FUSION_ENV, raising=False)
    assert pipeline.fusion_setting(value) is want


@pytest.mark.parametrize("value, want", [(None, None), ("auto", None), ("off", 0), (0, 0), ("2", 2), (4, 4)])
def test_winograd_settings(value, want, monkeypatch):
    monkeypatch.delenv(pipeline.WINOGRAD_ENV, raising=False)
    assert pipeline.winograd_setting(value) == want


def test_bad_settings_name_where_they_came_from(monkeypatch):
    with pytest.raises(CompileError, match="fusion='maybe'"):
        pipeline.fusion_setting("maybe")
    monkeypatch.setenv(pipeline.WINOGRAD_ENV, "3")
    with pytest.raises(CompileError, match="OM2GEN_WINOGRAD='3'"):
        pipeline.winograd_setting(None)
    with pytest.raises(CompileError, match="winograd=True"):
        pipeline.winograd_setting(True)


def test_cli_flags():
    args = build_parser().parse_args(["compile", "m.onnx", "-o", "m.om2", "--fusion", "off", "--winograd", "4"])
    assert (args.fusion, args.winograd) == ("off", "4")
    args = build_parser().parse_args(["compile", "m.onnx", "-o", "m.om2"])
    assert (args.fusion, args.winograd) == (None, None)
