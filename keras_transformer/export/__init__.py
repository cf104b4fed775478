"""Exports of a `Translator`: a SavedModel for TF Serving, a CTranslate2
model directory for fast CPU inference (the optional `ctranslate2` extra),
which `keras_transformer_runtime.CTranslate2Translator` runs, and the search
as one LiteRT or ONNX model file for devices (the `litert` and `onnx`
extras), which `LiteRTTranslator` and `ONNXTranslator` run."""

from keras_transformer.export.ctranslate2 import export_ctranslate2
from keras_transformer.export.litert import export_litert
from keras_transformer.export.litert import litert_operators
from keras_transformer.export.onnx import export_onnx
from keras_transformer.export.saved_model import export_saved_model
from keras_transformer_runtime.runners.saved_model import existing_versions
from keras_transformer_runtime.runners.saved_model import resolve_version_dir

__all__ = [
    "existing_versions",
    "export_ctranslate2",
    "export_litert",
    "export_onnx",
    "export_saved_model",
    "litert_operators",
    "resolve_version_dir",
]
