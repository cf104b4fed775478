"""Translate with an ONNX export, without TensorFlow.

`keras_transformer.export.export_onnx(translator, "ende.onnx")` writes one
ONNX model that holds the whole search and, beside it, the tokenizer and
settings (`exported_search`); `ONNXTranslator` runs it with ONNX Runtime
(`pip install onnxruntime`) and `sentencepiece` on the host.
"""

import os

from keras_transformer_runtime.runners.exported_search import SOURCE_IDS
from keras_transformer_runtime.runners.exported_search import ExportedSearchTranslator
from keras_transformer_runtime.validation import check_positive_int


def import_onnxruntime():
    """The `onnxruntime` module, or an `ImportError` that says how to get it."""
    try:
        import onnxruntime
    except ImportError:
        raise ImportError(
            "ONNX Runtime is not installed; it is an optional extra of the runtime: "
            "pip install 'keras-transformer-runtime[onnx]' (or `pip install onnxruntime`)."
        ) from None
    return onnxruntime


class ONNXTranslator(ExportedSearchTranslator):
    """Translates raw strings with an ONNX model written by `export_onnx`,
    with the decoding settings exported into it.

    Args:
        path: the `.onnx` file (its tokenizer and settings beside it).
        num_threads: ONNX Runtime's intra-op threads (default: every core).
        inter_op_threads: ONNX Runtime's inter-op threads: with more than
            one, independent operators of the graph run in parallel
            (`ExecutionMode.ORT_PARALLEL`), each on `num_threads`.

    Attributes:
        settings: the exported `DecodingSettings`.
        quantization: `"float32"`.

    Example:

    >>> translator = ONNXTranslator("ende.onnx")
    >>> translator.translate(["A dog runs."])
    ['Ein Hund läuft.']
    """

    def __init__(self, path, num_threads=None, inter_op_threads=1):
        check_positive_int(allow_none=True, num_threads=num_threads)
        check_positive_int(inter_op_threads=inter_op_threads)
        onnxruntime = import_onnxruntime()
        super().__init__(path, "onnx")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = num_threads or os.cpu_count()
        options.inter_op_num_threads = inter_op_threads
        if inter_op_threads > 1:
            options.execution_mode = onnxruntime.ExecutionMode.ORT_PARALLEL
        self._session = onnxruntime.InferenceSession(
            self.path, options, providers=["CPUExecutionProvider"]
        )

    def _search(self, source_ids):
        found = self._session.run(self.outputs, {SOURCE_IDS: source_ids})
        return dict(zip(self.outputs, found, strict=True))
