"""GertModelRunCallbacks: the executor's run reports around each replay, in both copies of the
load-and-run code -- an OM2 model library's, and the classic-OM executor's (the table-driven copy
in om2gen._native). A report records what it was given and the kernel launches so far, so the
launch count proves the order: preprocess before any kernel of the run, postprocess after all."""
from pathlib import Path

import numpy as np
import pytest

import om2gen
from om2gen.native import ffi, lib

ROOT = Path(__file__).resolve().parents[2]
IMAGE = np.zeros((1, 3, 32, 32), np.float32)
REPORT = "int32_t(*)(void *, const GertModelRunReportInfo *)"


@pytest.fixture(scope="module", params=["om2", "om"])
def model(request, sample_cnn_debug, tmp_path_factory):
    path = sample_cnn_debug
    if request.param == "om":
        path = tmp_path_factory.mktemp("run_callbacks") / "sample_cnn.om"
        om2gen.compile(ROOT / "samples" / "cnn" / "model.onnx", path, input_shapes={"image": (1, 3, 32, 32)},
                       format="om")
    with om2gen.load(path) as m:
        yield m


class Reports:
    """GertModelRunCallbacks that record each call; `returns` says what a stage answers (0: go on),
    `missing` which stage has no callback (NULL)."""

    def __init__(self, returns=None, missing=()):
        self.calls = []
        self._callbacks = {stage: ffi.callback(REPORT, self._recorder(stage, (returns or {}).get(stage, 0)))
                           for stage in ("preprocess", "postprocess") if stage not in missing}
        self.struct = ffi.new("GertModelRunCallbacks *", {
            "struct_size": ffi.sizeof("GertModelRunCallbacks"),
            **{f"report_run_info_{stage}": cb for stage, cb in self._callbacks.items()}})

    def _recorder(self, stage, rc):
        def report(instance, info):
            self.calls.append({"stage": stage, "instance": instance, "struct_size": info.struct_size,
                               "model_id": info.model_id, "stream": info.stream, "is_async": info.is_async,
                               "launches": lib.om2rtGetLaunchCount()})
            return rc
        return report

    def stages(self):
        return [c["stage"] for c in self.calls]


@pytest.fixture
def reporting(model):
    """Attaches Reports to the model's run config for one test, and takes them off again."""
    def attach(reports: Reports) -> Reports:
        model._runs[0].cfg.run_callbacks = reports.struct
        return reports
    yield attach
    model._runs[0].cfg.run_callbacks = ffi.NULL


def test_reports_come_before_and_after_the_replay(model, reporting):
    reports = reporting(Reports())
    before = lib.om2rtGetLaunchCount()
    model.run({"image": IMAGE})
    after = lib.om2rtGetLaunchCount()
    assert after > before
    assert reports.stages() == ["preprocess", "postprocess"]
    pre, post = reports.calls
    assert pre["launches"] == before and post["launches"] == after
    for call in reports.calls:
        assert call["instance"] == ffi.cast("void *", model._instance)
        assert call["struct_size"] == ffi.sizeof("GertModelRunReportInfo")
        assert call["model_id"] == 0                       # om2gen's executor loads with model_id 0
        assert call["stream"] == ffi.NULL and call["is_async"] == 0   # aclmdlRIExecute takes no stream


def test_async_reports_name_the_stream(model, reporting):
    reports = reporting(Reports())
    stream = ffi.new("aclrtStream *")
    assert lib.aclrtCreateStream(stream) == 0
    out = np.zeros((1, 10), np.float32)
    keep = [ffi.from_buffer(IMAGE), ffi.from_buffer(out)]
    try:
        model._runs[0].in_t[0].data, model._runs[0].out_t[0].data = keep
        before = lib.om2rtGetLaunchCount()
        assert lib.om2x_model_run_async(model._ep, model._handle, stream[0], model._runs[0].cfg) == 0
        assert lib.aclrtSynchronizeStream(stream[0]) == 0
    finally:
        lib.aclrtDestroyStream(stream[0])
    assert reports.stages() == ["preprocess", "postprocess"]
    assert reports.calls[0]["launches"] == before          # the replay is queued after the preprocess
    assert lib.om2rtGetLaunchCount() > before
    for call in reports.calls:
        assert call["stream"] == stream[0] and call["is_async"] == 1


def test_a_failing_preprocess_stops_the_run(model, reporting):
    reports = reporting(Reports(returns={"preprocess": 12345}))
    before = lib.om2rtGetLaunchCount()
    with pytest.raises(om2gen.RuntimeFailure, match=r"\(12345\).*GertModelRun: the executor's "
                                                     r"report_run_info_preprocess returned 12345"):
        model.run({"image": IMAGE})
    assert lib.om2rtGetLaunchCount() == before             # no replay
    assert reports.stages() == ["preprocess"]


def test_a_failing_postprocess_fails_the_run_after_the_replay(model, reporting):
    reports = reporting(Reports(returns={"postprocess": 54321}))
    before = lib.om2rtGetLaunchCount()
    with pytest.raises(om2gen.RuntimeFailure, match="report_run_info_postprocess returned 54321"):
        model.run({"image": IMAGE})
    assert lib.om2rtGetLaunchCount() > before
    assert reports.stages() == ["preprocess", "postprocess"]
    model._runs[0].cfg.run_callbacks = ffi.NULL                 # the model still runs
    assert model.run({"image": IMAGE})["probs"].shape == (1, 10)


def test_a_null_callback_is_skipped(model, reporting):
    reports = reporting(Reports(missing=("preprocess",)))
    model.run({"image": IMAGE})
    assert reports.stages() == ["postprocess"]
