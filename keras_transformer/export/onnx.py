"""Export a `Translator`'s search to ONNX.

`export_onnx(translator, "ende.onnx")` converts the same search as
`export_litert` (source ids in, output ids and scores out, the search
inside the model) with `tf2onnx`, and writes the tokenizer and settings
beside it (`keras_transformer_runtime.runners.exported_search`);
`keras_transformer_runtime.ONNXTranslator` runs it with ONNX Runtime.

The search is traced with fixed shapes from step to step, as under XLA
(every sentence of a batch stays in the loop until the last one ends, and
the cache grows in `decoding.loop.CACHE_SEGMENTS` loops one after the
other): tf2onnx converts a loop whose tensors change size inside another
loop into an ONNX `Loop` that ONNX Runtime refuses ("subgraph input has
unknown shape").
"""

import os

from keras_transformer import _backend
from keras_transformer.export.exported_search import SOURCE_IDS_SPEC
from keras_transformer.export.exported_search import SearchModule
from keras_transformer.export.exported_search import check_exportable
from keras_transformer.export.exported_search import export_record
from keras_transformer.export.exported_search import write_model_file
from keras_transformer_runtime import validation

DEFAULT_OPSET = 17


def import_tf2onnx():
    """The `tf2onnx` module, or an `ImportError` that says how to get it."""
    try:
        import tf2onnx
    except ImportError:
        raise ImportError(
            "tf2onnx is not installed; it is an optional extra of keras_transformer: "
            'pip install -e ".[onnx]" (or `pip install tf2onnx onnxruntime`).'
        ) from None
    return tf2onnx


@_backend.tensorflow_only("export.export_onnx", "it converts a TensorFlow graph")
def export_onnx(translator, path, opset=DEFAULT_OPSET, overwrite=False):
    """Writes `translator`'s search as the ONNX model `path`, with its
    tokenizer and settings beside it.

    Args:
        translator: a `keras_transformer.Translator` (beam or greedy
            search; its settings are fixed in the model).
        path: the `.onnx` file to write.
        opset: the ONNX operator set to target.
        overwrite: replace an existing `path`.

    Returns:
        The absolute path of the model file.

    Raises:
        ImportError: tf2onnx is not installed.
        ValueError: a sampling translator, or a bad `opset`.
        FileExistsError: `path` exists and not `overwrite`.

    Example:

    >>> export_onnx(translator, "ende.onnx")
    >>> ONNXTranslator("ende.onnx").translate(["A dog runs."])
    ['Ein Hund läuft.']
    """
    validation.check_positive_int(opset=opset)
    tf2onnx = import_tf2onnx()
    path = os.fspath(path)
    check_exportable(translator, path, overwrite, "export_onnx")
    module = SearchModule(translator, fixed_shapes=True)

    def write_model(file):
        proto, _ = tf2onnx.convert.from_function(
            module.traced.function, input_signature=[SOURCE_IDS_SPEC], opset=opset
        )
        with open(file, "wb") as f:
            f.write(proto.SerializeToString())

    record = export_record(translator, "onnx", None)
    return write_model_file(path, translator, record, write_model)
