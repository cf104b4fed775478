"""keras_transformer_runtime: what runs without TensorFlow or Keras.

The decoding settings every translator shares (`DecodingSettings`), the
Python API they share (`Runner`), what they return (`TargetScore`,
`Hypothesis`, `AlignedTranslation`, scored with `length_penalty`),
`SavedModelTranslator`, a client of a TF Serving export (TensorFlow and
TF Text imported when it is made), `CTranslate2Translator`, which runs a
`keras_transformer.export.export_ctranslate2` directory with only
`ctranslate2` and `sentencepiece` installed, and `LiteRTTranslator` and
`ONNXTranslator`, which run the search exported as one model file by
`export_litert` (`ai-edge-litert`) or `export_onnx` (`onnxruntime`): a CPU
inference server or a device needs neither TensorFlow nor Keras.
`keras_transformer` builds on this package; nothing here imports it.

Example:

>>> from keras_transformer_runtime import CTranslate2Translator
>>> CTranslate2Translator("ende_ct2", compute_type="int8").translate(["A dog runs."])
['Ein Hund läuft.']
"""

from keras_transformer_runtime.batching import in_length_order
from keras_transformer_runtime.runners.ctranslate2 import CTranslate2Translator
from keras_transformer_runtime.runners.litert import LiteRTTranslator
from keras_transformer_runtime.runners.onnx import ONNXTranslator
from keras_transformer_runtime.runners.results import AlignedTranslation
from keras_transformer_runtime.runners.results import Hypothesis
from keras_transformer_runtime.runners.results import RefusedRequestError
from keras_transformer_runtime.runners.results import TargetScore
from keras_transformer_runtime.runners.results import length_penalty
from keras_transformer_runtime.runners.runner import Runner
from keras_transformer_runtime.runners.saved_model import SavedModelTranslator
from keras_transformer_runtime.runners.settings import DecodingSettings
from keras_transformer_runtime.text.documents import LongInputWarning
from keras_transformer_runtime.text.glossary import Glossary

__all__ = [
    "AlignedTranslation",
    "CTranslate2Translator",
    "DecodingSettings",
    "Glossary",
    "Hypothesis",
    "LiteRTTranslator",
    "LongInputWarning",
    "ONNXTranslator",
    "RefusedRequestError",
    "Runner",
    "SavedModelTranslator",
    "TargetScore",
    "in_length_order",
    "length_penalty",
]
