"""The ONNX backend conformance suite (onnx.backend.test.BackendTest) against om2gen.

Runs the node tests of every supported operator and all simple, pytorch-converted and
pytorch-operator model tests. Known failures (known_failures.txt) are expected to fail; one
that passes is reported as an unexpected success, so the list only shrinks.
"""
import onnx.backend.test
import pytest

from om2gen.backend import Om2Backend

import suite

pytestmark = pytest.mark.conformance

backend_test = onnx.backend.test.BackendTest(Om2Backend, __name__)
for case in suite.supported_node_cases() + suite.model_cases():
    backend_test.include(f"^{case.name}_cpu$")
for name in suite.known_failures():
    backend_test.xfail(f"^{name}_cpu$")

globals().update(backend_test.test_cases)
