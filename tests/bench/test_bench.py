"""`om2gen bench` and the benchmark suite's pieces on tiny models. Timings are never asserted:
only that the command runs, measures what it says and prints every field."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from helpers import make_model
from onnx import helper

import om2gen
from om2gen.cli import bench, bench_report
from om2gen.cli.entry import main

ROOT = Path(__file__).resolve().parents[2]
RUN = ["--runs", "3", "--warmup", "1", "--loads", "2", "--threads", "1", "--fresh", "1"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """An Add + Relu model: its .onnx, .om2 and classic .om."""
    d = tmp_path_factory.mktemp("bench")
    x = np.zeros((1, 8), np.float32)
    model = make_model([helper.make_node("Add", ["x", "y"], ["s"]), helper.make_node("Relu", ["s"], ["z"])],
                       {"x": x, "y": x}, ["z"])
    onnx.save(model, d / "tiny.onnx")
    om2gen.compile(d / "tiny.onnx", d / "tiny.om2")
    om2gen.compile(d / "tiny.onnx", d / "tiny.om", format="om")
    return d


def test_bench_prints_every_figure_next_to_onnxruntime(tiny, capsys):
    assert main(["bench", str(tiny / "tiny.om2"), "--onnx", str(tiny / "tiny.onnx"), *RUN]) == 0
    out = capsys.readouterr().out
    assert "(OM2)" in out and "ONNX Runtime" in out and "1 thread(s)" in out
    assert "x float32[1, 8] (random, seed 0)" in out
    for row in ("load, median", "load, first in process", "fresh process: import", "fresh process: load",
                "fresh process: first run", "fresh process: load + first run", "run, median", "run, p90", "run, min",
                "per-run overhead (us)", "Python run call (us)", "engine call, bound buffers (us)"):
        line = next(ln.strip() for ln in out.splitlines() if ln.strip().startswith(row))
        assert len(line[len(row):].split()) >= 2, line   # om2gen, ORT (and the ratio)
    assert "om2gen/ORT" in out


def test_bench_json_has_the_measurements(tiny, capsys):
    assert main(["bench", str(tiny / "tiny.om2"), "--onnx", str(tiny / "tiny.onnx"), "--json", *RUN]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["format"] == "OM2" and r["threads"] == 1 and r["runs"] == 3
    for engine in ("om2gen", "onnxruntime"):
        assert r["load"][engine]["n"] == 2 and r["load"][engine]["median_ms"] > 0 and r["load"][engine]["first_ms"] > 0
        run = r["run"][engine]
        assert run["n"] == 3 and 0 < run["min_ms"] <= run["median_ms"] <= run["p90_ms"]
        ov = r["overhead"][engine]
        assert ov["run_call_us"] > 0 and ov["engine_call_us"] > 0 and ov["stderr_us"] >= 0
        assert isinstance(ov["resolved"], bool) and isinstance(ov["overhead_us"], float)
    run = r["run"]
    assert r["ratio"]["run_median"] == pytest.approx(run["om2gen"]["median_ms"] / run["onnxruntime"]["median_ms"])
    core = {"load", "run_median", "run_p90", "run_min", "overhead"}
    if r["openvino"]["status"] == "measured":   # (OpenVINO installed: the optional bench extra)
        assert r["machine"]["openvino"] == r["openvino"]["version"]
        assert r["openvino"]["config"] == {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": 1,
                                           "INFERENCE_PRECISION_HINT": "f32"}
        ov_run = run["openvino"]
        assert ov_run["n"] == 3 and 0 < ov_run["min_ms"] <= ov_run["median_ms"] <= ov_run["p90_ms"]
        assert r["overhead"]["openvino"]["engine_call_us"] > 0
        assert r["ratio"]["openvino_run_median"] == pytest.approx(ov_run["median_ms"] / run["onnxruntime"]["median_ms"])
        assert r["ratio"]["run_median_vs_openvino"] == pytest.approx(run["om2gen"]["median_ms"] / ov_run["median_ms"])
        core |= {f"openvino_run_{k}" for k in ("median", "p90", "min")} | \
            {f"run_{k}_vs_openvino" for k in ("median", "p90", "min")}
    else:
        assert r["openvino"]["status"].startswith("not installed") and "openvino" not in run
    assert set(r["ratio"]) == core
    assert r["machine"]["onnxruntime"] and r["machine"]["cores"] >= 1
    for engine in ("om2gen", "onnxruntime"):   # one fresh process each: the sum is of the same process
        fresh = r["fresh"][engine]
        assert fresh["n"] == 1 and min(fresh[f"{k}_ms"] for k in ("import", "load", "first_run")) > 0
        assert fresh["load_first_run_ms"] == pytest.approx(fresh["load_ms"] + fresh["first_run_ms"])


def test_bench_without_openvino_says_so_and_measures_the_others(tiny, capsys, monkeypatch):
    from om2gen.cli import bench_openvino
    monkeypatch.setattr(bench_openvino, "_openvino", lambda: None)
    assert main(["bench", str(tiny / "tiny.om2"), "--onnx", str(tiny / "tiny.onnx"), *RUN]) == 0
    out = capsys.readouterr().out
    assert "OpenVINO: not installed (pip install 'om2gen[bench]')" in out and "OV/ORT" not in out
    assert "om2gen/ORT" in out
    assert main(["bench", str(tiny / "tiny.om2"), "--onnx", str(tiny / "tiny.onnx"), "--no-openvino", "--json",
                 *RUN]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["openvino"]["status"] == "not measured (--no-openvino)" and set(r["run"]) == {"om2gen", "onnxruntime"}


def test_bench_without_onnx_and_of_a_classic_om_file(tiny, capsys):
    assert main(["bench", str(tiny / "tiny.om"), *RUN]) == 0
    out = capsys.readouterr().out
    assert "(OM)" in out and "ORT" not in out and "run, median" in out


def test_bench_phases_side_by_side(tiny, capsys):
    assert main(["bench", str(tiny / "tiny.om2"), "--phases", "--compare", str(tiny / "tiny.om"), "--loads", "2",
                 "--onnx", str(tiny / "tiny.onnx")]) == 0
    out = capsys.readouterr().out
    assert "tiny.om2 (OM2)" in out and "tiny.om (OM)" in out
    rows = {ln[:38].strip(): ln[38:].split() for ln in out.splitlines()}
    assert rows["open the archive"][1] == "-"            # OM2 only
    assert rows["parse the partition table"][0] == "-"   # OM only
    for common in ("read the file", "register kernels", "capture tasks", "total of the stages", "om2gen.load wall time"):
        assert len(rows[common]) == 2 and all(v != "-" for v in rows[common]), common
    assert "ONNX Runtime session creation" in out


def test_bench_phases_json(tiny, capsys):
    assert main(["bench", str(tiny / "tiny.om"), str(tiny / "tiny.om2"), "--phases", "--loads", "2", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert [m["format"] for m in r["models"]] == ["OM", "OM2"]
    for m in r["models"]:
        assert m["stages"] and m["total_ms"] == pytest.approx(m["total_ms"]) and m["wall_ms"] >= m["total_ms"] * 0.5
        assert all(s["median_ms"] >= 0 for s in m["stages"])


def test_bench_given_inputs(tiny, tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.ones((1, 8), np.float32))
    assert main(["bench", str(tiny / "tiny.om2"), "--input", f"x={tmp_path / 'x.npy'}", "--json", *RUN]) == 0
    r = json.loads(capsys.readouterr().out)
    assert {i["name"]: i["data"] for i in r["inputs"]} == {"x": "given", "y": "random, seed 0"}


def _batched_add_relu() -> onnx.ModelProto:
    """z = relu(x + b) over x[N, 8]."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Relu", ["s"], ["z"])], "batched",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, ["N", 8])],
        [onnx.numpy_helper.from_array(np.linspace(-1, 1, 8, dtype=np.float32), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.fixture(scope="module")
def geared(tmp_path_factory):
    """z = relu(x + b) over x[N, 8], compiled with gears of the batch 1, 2, 4."""
    d = tmp_path_factory.mktemp("bench_gears")
    onnx.save(_batched_add_relu(), d / "geared.onnx")
    om2gen.compile(d / "geared.onnx", d / "geared.om2", input_shapes={"x": (-1, 8)}, dynamic_batch_size=[1, 2, 4])
    return d


def test_bench_of_a_gear_model_times_every_gear_and_the_switch(geared, capsys):
    assert main(["bench", str(geared / "geared.om2"), "--onnx", str(geared / "geared.onnx"), *RUN]) == 0
    out = capsys.readouterr().out
    assert "(OM2, 3 gears of dynamic batch)" in out and "x float32[-1, 8] (random, seed 0)" in out
    assert "per gear 3 runs" in out
    for row in ("load, median", "load, first in process"):
        assert len(next(ln for ln in out.splitlines() if ln.startswith(row))[len(row):].split()) == 3
    table = out.split("run at each gear (ms)\n")[1].splitlines()
    assert table[0].split()[:2] == ["gear", "shapes"]
    engines = 3 if "OV/ORT" in table[0] else 2   # (OpenVINO's columns when it is installed)
    for gear, batch in enumerate((1, 2, 4)):
        cells = table[1 + gear].split()
        # 3 figures per engine and the ratios to ORT
        assert cells[:2] == [str(gear), f"x[{batch},8]"] and len(cells) == 2 + 3 * engines + engines - 1, cells
    assert "gear switch between gear 0 (x[1,8]) and gear 1 (x[2,8])" in out
    for who in ("om2gen, gear 0", "om2gen, gear 1", "ORT, gear 0", "ORT, gear 1"):
        assert len(next(ln for ln in out.splitlines() if ln.startswith(who))[len(who):].split()) >= 3, who


def test_bench_of_a_gear_model_json(geared, capsys):
    assert main(["bench", str(geared / "geared.om2"), "--onnx", str(geared / "geared.onnx"), "--switch", "2,0",
                 "--json", *RUN]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["gear_type"] == "dynamic batch" and set(r["ratio"]) == {"load"} and "run" not in r
    assert [g["shapes"] for g in r["gears"]] == [{"x": [b, 8]} for b in (1, 2, 4)]
    for g in r["gears"]:
        for engine in ("om2gen", "onnxruntime"):
            assert g["run"][engine]["n"] == 3 and 0 < g["run"][engine]["min_ms"] <= g["run"][engine]["median_ms"]
        assert g["ratio"]["run_median"] == pytest.approx(g["run"]["om2gen"]["median_ms"] /
                                                         g["run"]["onnxruntime"]["median_ms"])
    sw = r["switch"]
    assert sw["gears"] == [2, 0] and sw["rounds"] == 5   # at least 5 rounds
    for engine in ("om2gen", "onnxruntime"):
        assert len(sw[engine]) == 2
        for x in sw[engine]:
            assert x["repeat"]["n"] == x["switched"]["n"] == 2 * sw["rounds"]
            assert isinstance(x["cost_ms"], float) and x["stderr_ms"] >= 0 and isinstance(x["resolved"], bool)


def test_bench_of_a_gear_model_at_the_gear_of_a_given_input(geared, tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.ones((2, 8), np.float32))
    assert main(["bench", str(geared / "geared.om2"), "--input", f"x={tmp_path / 'x.npy'}", "--json", *RUN]) == 0
    r = json.loads(capsys.readouterr().out)
    assert [g["gear"] for g in r["gears"]] == [1] and "switch" not in r   # one gear: nothing to switch to
    np.save(tmp_path / "x.npy", np.ones((3, 8), np.float32))
    assert main(["bench", str(geared / "geared.om2"), "--input", f"x={tmp_path / 'x.npy'}", *RUN]) != 0
    assert "x[3, 8]: no gear of the model has these shapes; its gears are x[1,8]; x[2,8]; x[4,8]" in \
        capsys.readouterr().err


@pytest.mark.parametrize("switch, message", [("0,3", "gear 3 is not among the measured gears (0, 1, 2)"),
                                             ("1,1", "needs two different gears"),
                                             ("0", "expected two gear indices")])
def test_bench_switch_errors(geared, capsys, switch, message):
    try:
        rc = main(["bench", str(geared / "geared.om2"), "--switch", switch, *RUN])
    except SystemExit as exc:   # argparse's usage error
        rc = exc.code
    assert rc != 0 and message in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["MODEL", "MODEL"], "two (or --compare) only with --phases"),
    (["MODEL", "--onnx", "missing.onnx"], "--onnx missing.onnx: no such file"),
    (["MODEL", "--input", "nope=X.npy"], "nope"),
    (["MISSING.om2"], "cannot open"),
])
def test_bench_errors_are_typed(tiny, tmp_path, capsys, argv, message):
    np.save(tmp_path / "X.npy", np.ones((1, 8), np.float32))
    argv = [a.replace("MODEL", str(tiny / "tiny.om2")).replace("X.npy", str(tmp_path / "X.npy"))
            .replace("MISSING", str(tmp_path / "missing")) for a in argv]
    assert main(["bench", *argv, *RUN]) != 0
    assert message in capsys.readouterr().err


def test_bench_needs_frozen_inputs_for_onnxruntime(tmp_path, capsys):
    """An input frozen at compile time (--input-value) is still an ORT input: bench says how to give it."""
    x = np.zeros((1, 4), np.float32)
    model = make_model([helper.make_node("Mul", ["x", "k"], ["z"])], {"x": x, "k": x}, ["z"])
    onnx.save(model, tmp_path / "m.onnx")
    om2gen.compile(tmp_path / "m.onnx", tmp_path / "m.om2", input_values={"k": [2.0] * 4})
    assert main(["bench", str(tmp_path / "m.om2"), "--onnx", str(tmp_path / "m.onnx"), *RUN]) == 8
    assert "needs input 'k'" in capsys.readouterr().err
    np.save(tmp_path / "k.npy", np.full((1, 4), 2.0, np.float32))
    assert main(["bench", str(tmp_path / "m.om2"), "--onnx", str(tmp_path / "m.onnx"), "--input",
                 f"k={tmp_path / 'k.npy'}", *RUN]) == 0


def test_overhead_is_the_median_paired_difference_and_says_when_it_is_noise():
    quiet = bench.overhead([12e-6, 13e-6, 12e-6, 12.5e-6], [10e-6, 11e-6, 10e-6, 10.5e-6])
    assert quiet["overhead_us"] == pytest.approx(2.0) and quiet["stderr_us"] == pytest.approx(0.0)
    assert quiet["resolved"]
    noisy = bench.overhead([0.10, 0.13, 0.09, 0.12], [0.12, 0.10, 0.11, 0.09])
    assert not noisy["resolved"] and noisy["stderr_us"] > abs(noisy["overhead_us"]) / 2


def test_summary_and_stage_order():
    s = bench.summary([0.003, 0.001, 0.002, 0.010])
    assert s == {"median_ms": pytest.approx(2.5), "p90_ms": pytest.approx(10.0), "min_ms": pytest.approx(1.0), "n": 4}
    assert bench_report.merge_stage_order([["open", "digests", "kernels", "register", "capture"],
                                    ["read", "parse", "kernels", "weights", "register", "capture"]]) == \
        ["open", "digests", "read", "parse", "kernels", "weights", "register", "capture"]
    assert bench_report.merge_stage_order([["a", "b"]]) == ["a", "b"]


def test_flop_count_of_conv_gemm_matmul():
    sys.path.insert(0, str(ROOT))
    from benchmarks import flops
    x = np.zeros((1, 3, 8, 8), np.float32)
    w = np.zeros((4, 3, 3, 3), np.float32)
    model = make_model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                        helper.make_node("Flatten", ["c"], ["f"]),
                        helper.make_node("Gemm", ["f", "g"], ["y"], transB=1),
                        helper.make_node("MatMul", ["y", "m"], ["z"])],
                       {"x": x}, ["z"], {"w": w, "g": np.zeros((10, 256), np.float32),
                                         "m": np.zeros((10, 5), np.float32)})
    got = flops.count(model)
    assert got["by_op"] == {"Conv": 2 * 4 * 8 * 8 * 3 * 9, "Gemm": 2 * 10 * 256, "MatMul": 2 * 5 * 10}
    assert got["flops"] == sum(got["by_op"].values()) and got["unknown"] == []


def test_benchmark_models_are_deterministic_and_run(tmp_path, monkeypatch):
    monkeypatch.setenv("OM2GEN_CACHE_DIR", str(tmp_path))
    sys.path.insert(0, str(ROOT))
    from benchmarks import models
    a = models.path("mlp")
    data = a.read_bytes()
    a.unlink()
    assert models.path("mlp").read_bytes() == data
    om2gen.compile(models.path("add"), tmp_path / "add.om2")
    with om2gen.load(tmp_path / "add.om2") as m:
        x, y = np.ones((1, 128), np.float32), np.full((1, 128), 2.0, np.float32)
        assert np.array_equal(m.run({"x": x, "y": y})["z"], x + y)


def test_fma_peak_measures_positive_gflops():
    sys.path.insert(0, str(ROOT))
    from benchmarks import fma_peak
    peaks = fma_peak.measure(threads=1, seconds=0.01)
    assert peaks and all(g > 0 for by in peaks.values() for g in by.values())
    assert all(set(by) == {1} for by in peaks.values())


def test_suite_writes_the_markdown_table(tmp_path):
    import subprocess
    out, raw = tmp_path / "table.md", tmp_path / "raw.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "suite.py"), "--models", "add", "--threads", "1",
                           "--runs", "3", "--no-peak", "--out", str(out), "--json", str(raw)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert text in proc.stdout
    assert ("| model | threads | load om2gen | load ORT | load ratio | run om2gen | run ORT | run OpenVINO | run ratio "
            "| OpenVINO ratio |") in text
    row = next(ln for ln in text.splitlines() if ln.startswith("| add | 1 |"))
    cells = row.strip("|").split("|")
    assert len(cells) == 10 and "-" not in "".join(cells[:7] + cells[8:9])
    raw_row = json.loads(raw.read_text())["rows"][0]["result"]
    if raw_row["openvino"]["status"] == "measured":   # (the optional bench extra installed)
        assert float(cells[7]) > 0 and float(cells[9]) > 0 and "OpenVINO ratios (OpenVINO / ORT)" in text
    else:
        assert cells[7].strip() == "not installed" and "OpenVINO not installed" in text
    assert "CPU: " in text and "ISA flags: " in text
    assert "Geometric mean of the run ratios" in text and "| issue 6 and 16 target | measured | met |" in text
    assert "| no row's run ratio above 1.0 (issue 16) |" in text
    assert "| per-run overhead (single-Add run) <= 0.5 of ORT, 1 thread(s) |" in text
    assert "ONNX Runtime" in text and "Python" in text
    assert json.loads(raw.read_text())["rows"][0]["result"]["run"]["om2gen"]["n"] == 3


def test_bench_gears_measures_and_prints_every_figure(geared, tmp_path, monkeypatch):
    """benchmarks/bench_gears.py's pieces on the tiny gear model: every figure of (a)-(d)."""
    monkeypatch.setenv("OM2GEN_CACHE_DIR", str(tmp_path))
    sys.path.insert(0, str(ROOT))
    from benchmarks import bench_gears, suite
    m = bench_gears.GearModel("tiny", suite.Case("tiny", "Add + Relu over x[N, 8]", lambda: geared / "geared.onnx",
                                                 {"x": (-1, 8)}),
                              "dynamic_batch_size", (1, 2, 4), size_gears=((1, 2, 3, 4),))
    a = bench_gears.compile_all(m, "test", lambda msg: None)
    assert a.shapes == [{"x": (b, 8)} for b in (1, 2, 4)] and len(a.static) == 3
    assert set(a.gear) == {(1, 2, 4), (1, 2, 3, 4)} and a.geared == a.gear[(1, 2, 4)]
    with om2gen.load(a.static[1]) as s:
        assert s.gears == [] and s.inputs[0].shape == (2, 8)
    rows = bench_gears.run_times(a, 1, runs=3, warmup=1, budget=None)
    assert [r["shapes"] for r in rows] == [{"x": [b, 8]} for b in (1, 2, 4)]
    assert all(r["n"] == 3 and r["static_ms"] > 0 and r["gear_ms"] > 0 and r["paired_ratio"] > 0 for r in rows)
    assert rows[0]["ratio"] == pytest.approx(rows[0]["gear_ms"] / rows[0]["static_ms"])
    loads = bench_gears.load_times({"static": a.static[-1], "gear": a.geared}, 1, 2)
    assert set(loads) == {"static", "gear"} and all(v > 0 for v in loads.values())
    sw = bench_gears.switch_cost(m, a, 1, runs=5, budget=None)
    assert sw["gears"] == [0, 1] and sw["shapes"] == a.shapes[:2] and sw["rounds"] == 5
    assert all(len(sw[e]) == 2 for e in ("om2gen", "onnxruntime"))
    sizes = {"static, largest gear": a.static[-1].stat().st_size, "3 gears": a.geared.stat().st_size}
    report = {"runs": 3, "loads": 2, "load_threads": 1, "command": "python benchmarks/bench_gears.py", "commit": "x",
              "machine": bench.machine_info(), "avx512": bench_gears.cpu_flags(), "machine_load": "unknown",
              "models": [{"name": "tiny", "run": {1: rows}, "switch": {1: sw}, "sizes": sizes,
                          "load": {"static, largest gear": loads["static"], "3 gears": loads["gear"]}}]}
    monkeypatch.setitem(bench_gears.MODELS, "tiny", m)
    text = bench_gears.render(report)
    assert "AVX-512 flags:" in text and "### tiny:" in text
    assert "3 gears (dynamic_batch_size=1;2;4) against the static compile" in text
    for b in (1, 2, 4):
        row = next(ln for ln in text.splitlines() if ln.startswith(f"| 1 | x[{b},8] |"))
        assert len(row.strip("|").split("|")) == 8, row
    assert sum(ln.startswith("| 1 | om2gen | x[") or ln.startswith("| 1 | ORT | x[") for ln in text.splitlines()) == 4
    assert "| 3 gears |" in text and "| static, largest gear |" in text


@pytest.fixture(scope="module")
def dynamic(tmp_path_factory):
    """z = relu(x + b) over x[N, 8] with N dynamic in 1~16."""
    d = tmp_path_factory.mktemp("bench_dynamic")
    onnx.save(_batched_add_relu(), d / "dyn.onnx")
    om2gen.compile(d / "dyn.onnx", d / "dyn.om2", input_shapes={"x": ("1~16", 8)})
    return d


def test_bench_of_a_dynamic_model_times_each_shape_and_its_first_run(dynamic, capsys):
    assert main(["bench", str(dynamic / "dyn.om2"), "--onnx", str(dynamic / "dyn.onnx"), "--input-shape", "x:3,8",
                 "--input-shape", "x:16,8", *RUN]) == 0
    out = capsys.readouterr().out
    assert "(OM2, dynamic shapes, 2 run shape(s))" in out and "per shape 3 runs" in out
    table = out.split("first = the first run the loaded model makes at that shape\n")[1].splitlines()
    assert table[0].split()[:3] == ["shapes", "om2gen", "first"]
    engines = 3 if "OV/ORT" in table[0] else 2   # (OpenVINO's columns when it is installed)
    for row, batch in zip(table[1:], (3, 16)):
        cells = row.split()
        # per engine the first run and 3 figures, and the ratios to ORT
        assert cells[0] == f"x[{batch},8]" and len(cells) == 1 + 4 * engines + engines - 1, cells


def test_bench_of_a_dynamic_model_json_defaults_to_its_largest_shape(dynamic, capsys, tmp_path):
    assert main(["bench", str(dynamic / "dyn.om2"), "--onnx", str(dynamic / "dyn.onnx"), "--json", *RUN]) == 0
    r = json.loads(capsys.readouterr().out)
    (s,) = r["shapes"]
    assert s["shapes"] == {"x": [16, 8]} and "run" not in r
    for engine in ("om2gen", "onnxruntime"):
        assert s["run"][engine]["n"] == 3 and s["first_run_ms"][engine] > 0
    assert s["ratio"]["run_median"] == pytest.approx(s["run"]["om2gen"]["median_ms"] /
                                                     s["run"]["onnxruntime"]["median_ms"])
    np.save(tmp_path / "x.npy", np.ones((5, 8), np.float32))   # a given array's shape is the run shape
    assert main(["bench", str(dynamic / "dyn.om2"), "--input", f"x={tmp_path / 'x.npy'}", "--json", *RUN]) == 0
    assert [s["shapes"] for s in json.loads(capsys.readouterr().out)["shapes"]] == [{"x": [5, 8]}]


@pytest.mark.parametrize("model, shape, message", [
    ("dyn", "x:17,8", "dim 0 (N) must be in 1~16"),
    ("dyn", "y:2,8", "names y, which the model has not"),
    ("dyn", "x:1~4,8", "a run shape has sizes, not ranges or -1"),
    ("tiny", "x:1,8", "--input-shape picks the run shapes of a dynamic-shape model"),
])
def test_bench_input_shape_errors(dynamic, tiny, capsys, model, shape, message):
    path = dynamic / "dyn.om2" if model == "dyn" else tiny / "tiny.om2"
    assert main(["bench", str(path), "--input-shape", shape, *RUN]) != 0
    assert message in capsys.readouterr().err


def test_archive_size_prints_each_format_against_the_onnx_file(tmp_path, capsys):
    """benchmarks/archive_size.py on the single-Add model: the row's sizes are the files'."""
    sys.path.insert(0, str(ROOT))
    from benchmarks import archive_size
    from benchmarks import models as bench_models
    assert archive_size.main(["--models", "add", "--keep", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    row = next(ln for ln in table.splitlines() if ln.startswith("| add |")).strip("|").split("|")
    onnx_size = bench_models.path("add").stat().st_size
    om2, om = (tmp_path / "add.om2").stat().st_size, (tmp_path / "add.om").stat().st_size
    assert [c.strip() for c in row[1:]] == [f"{onnx_size / 1e6:.2f}", f"{om2 / 1e6:.2f}", "0.00", f"{om / 1e6:.2f}",
                                            f"{om2 / onnx_size:.2f}", f"{om / onnx_size:.2f}", "no"]
