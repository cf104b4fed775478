"""Translate with a LiteRT (TensorFlow Lite) export, without TensorFlow.

`keras_transformer.export.export_litert(translator, "ende.tflite")` writes
one `.tflite` file that holds the whole search (built-in LiteRT ops only)
and, beside it, the tokenizer and settings (`exported_search`); the LiteRT
interpreter (`pip install ai-edge-litert`) runs it on a phone, in a
browser or on a server, and `LiteRTTranslator` runs it in Python with
`sentencepiece` on the host.
"""

import os

from keras_transformer_runtime import logs
from keras_transformer_runtime.runners.exported_search import SIGNATURE
from keras_transformer_runtime.runners.exported_search import SOURCE_IDS
from keras_transformer_runtime.runners.exported_search import ExportedSearchTranslator


def import_interpreter():
    """LiteRT's `Interpreter` class (`ai_edge_litert`), or an `ImportError`
    that says how to get it."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        raise ImportError(
            "The LiteRT interpreter is not installed; it is an optional extra of "
            "the runtime: pip install 'keras-transformer-runtime[litert]' (or `pip install "
            "ai-edge-litert`)."
        ) from None
    return Interpreter


class LiteRTTranslator(ExportedSearchTranslator):
    """Translates raw strings with a `.tflite` file written by
    `export_litert`, with the decoding settings exported into it.

    Args:
        path: the `.tflite` file (its tokenizer and settings beside it).
        num_threads: the interpreter's threads (default: every core).

    Attributes:
        settings: the exported `DecodingSettings`.
        quantization: `"float32"`, `"dynamic_int8"` or `"float16"`.

    Example:

    >>> translator = LiteRTTranslator("ende.tflite")
    >>> translator.translate(["A dog runs."])
    ['Ein Hund läuft.']
    """

    # LiteRT's search runs every row of a batch until the longest output
    # ends, with little cost per call: small batches waste the least.
    bulk_batch_size = 8

    def __init__(self, path, num_threads=None):
        interpreter_class = import_interpreter()
        super().__init__(path, "litert")
        interpreter = interpreter_class(
            model_path=self.path, num_threads=num_threads or os.cpu_count()
        )
        self._runner = interpreter.get_signature_runner(SIGNATURE)
        # The first search applies the XNNPACK delegate, which says so on
        # stderr ("INFO: Created TensorFlow Lite XNNPACK delegate"): run it
        # here, with the native lines hidden.
        with logs.native_logs_hidden():
            self.translate(["Hello"], target_lang=next(iter(self.languages), None))

    def _search(self, source_ids):
        return self._runner(**{SOURCE_IDS: source_ids})
