"""Exports of a `Translator`: a SavedModel for TF Serving, and a CTranslate2
model directory for fast CPU inference (the optional `ctranslate2` extra),
which `keras_transformer_runtime.CTranslate2Translator` runs."""

from keras_transformer.export.ctranslate2 import export_ctranslate2
from keras_transformer.export.saved_model import export_saved_model
from keras_transformer.export.versions import existing_versions
from keras_transformer.export.versions import resolve_version_dir

__all__ = [
    "existing_versions",
    "export_ctranslate2",
    "export_saved_model",
    "resolve_version_dir",
]
