"""What the LiteRT and ONNX translators check before running a model."""

import json
import sys

import pytest

from keras_transformer_runtime import LiteRTTranslator
from keras_transformer_runtime import ONNXTranslator
from keras_transformer_runtime.runners.exported_search import read_export


def test_a_path_that_is_not_an_export_is_refused(tmp_path):
    with pytest.raises(ValueError, match="m.tflite does not exist"):
        read_export(tmp_path / "m.tflite", "litert")
    (tmp_path / "m.tflite").write_bytes(b"a model")
    with pytest.raises(ValueError, match=r"m.tflite.json does not exist \(export_litert"):
        read_export(tmp_path / "m.tflite", "litert")
    (tmp_path / "m.tflite.json").write_text(json.dumps({"runtime": "onnx"}))
    with pytest.raises(ValueError, match="exported for the runtime 'onnx', not for 'litert'"):
        read_export(tmp_path / "m.tflite", "litert")
    assert read_export(tmp_path / "m.tflite", "onnx") == {"runtime": "onnx"}


@pytest.mark.parametrize(
    "runtime, module, extra",
    [(LiteRTTranslator, "ai_edge_litert", "litert"), (ONNXTranslator, "onnxruntime", "onnx")],
)
def test_a_missing_runtime_names_its_extra(tmp_path, monkeypatch, runtime, module, extra):
    monkeypatch.setitem(sys.modules, module, None)  # `import` then raises ImportError
    monkeypatch.setitem(sys.modules, f"{module}.interpreter", None)
    with pytest.raises(ImportError, match=rf"pip install 'keras-transformer-runtime\[{extra}\]'"):
        runtime(tmp_path / "m.model")
