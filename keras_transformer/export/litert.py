"""Export a `Translator`'s search to LiteRT (TensorFlow Lite), for phones,
browsers and small servers.

`export_litert(translator, "ende.tflite")` writes one `.tflite` file that
takes source ids and returns output ids and scores, the search (beam or
greedy, with its cache and its stopping rules) inside the model, in
LiteRT's built-in ops only (no TensorFlow "Select" ops, so the plain
LiteRT runtime runs it), and the tokenizer and settings beside it (the
layout: `keras_transformer_runtime.runners.exported_search`).
`keras_transformer_runtime.LiteRTTranslator` runs it with the
`ai-edge-litert` and `sentencepiece` packages; `kt-translate --model ende.tflite` is its command
line.

The converter needs no fixed sizes: the model takes any batch and any
source length (up to the exported `max_input_length`), and its search
drops finished sentences as the plain graph does.
"""

import collections
import os
import tempfile

import tensorflow as tf

from keras_transformer import _backend
from keras_transformer.export.exported_search import SearchModule
from keras_transformer.export.exported_search import check_exportable
from keras_transformer.export.exported_search import export_record
from keras_transformer.export.exported_search import write_model_file
from keras_transformer_runtime import validation
from keras_transformer_runtime.runners.exported_search import SIGNATURE

# `None` keeps float32.
LITERT_QUANTIZATIONS = (None, "dynamic_int8", "float16")


@_backend.tensorflow_only("export.export_litert", "it converts a TensorFlow graph")
def export_litert(translator, path, quantization=None, overwrite=False):
    """Writes `translator`'s search as the LiteRT model `path`, with its
    tokenizer and settings beside it.

    Args:
        translator: a `keras_transformer.Translator` (beam or greedy
            search; its settings are fixed in the model).
        path: the `.tflite` file to write.
        quantization: `None` (float32 weights), `"dynamic_int8"` (int8
            weights, per output channel, multiplied in int8 with inputs
            quantized on the fly: LiteRT's dynamic-range quantization, with
            `share_quantized_constants`) or
            `"float16"` (float16 weights, widened to float32 on a CPU; for
            GPU delegates).
        overwrite: replace an existing `path`.

    Returns:
        The absolute path of the model file.

    Raises:
        ValueError: an unknown `quantization`, a sampling translator, or
            weights that are NaN or infinite.
        FileExistsError: `path` exists and not `overwrite`.

    Example:

    >>> export_litert(translator, "ende.tflite", quantization="dynamic_int8")
    >>> LiteRTTranslator("ende.tflite").translate(["A dog runs."])
    ['Ein Hund läuft.']
    """
    validation.check_choice(LITERT_QUANTIZATIONS, quantization=quantization)
    path = os.fspath(path)
    check_exportable(translator, path, overwrite, "export_litert")
    module = SearchModule(translator, fixed_shapes=False)

    def write_model(file):
        with tempfile.TemporaryDirectory(dir=os.path.dirname(file)) as saved:
            tf.saved_model.save(module, saved, signatures={SIGNATURE: module.concrete})
            converter = tf.lite.TFLiteConverter.from_saved_model(saved, signature_keys=[SIGNATURE])
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
            if quantization is not None:
                converter.optimizations = [tf.lite.Optimize.DEFAULT]
            if quantization == "float16":
                converter.target_spec.supported_types = [tf.float16]
            flatbuffer = converter.convert()
        if quantization == "dynamic_int8":
            flatbuffer = share_quantized_constants(flatbuffer)
        with open(file, "wb") as f:
            f.write(flatbuffer)

    record = export_record(translator, "litert", quantization)
    return write_model_file(path, translator, record, write_model)


def litert_operators(path):
    """How often each operator occurs in the LiteRT model `path`, over all
    its subgraphs (a `collections.Counter` of names: LiteRT's built-in
    operators by their names, e.g. `"WHILE"`, custom ones by their custom
    code, e.g. `"FlexTensorStridedSliceUpdate"` for a TensorFlow op).

    Example:

    >>> sorted(litert_operators("ende.tflite"))[:3]
    ['ADD', 'BATCH_MATMUL', 'CAST']
    """
    from tensorflow.lite.python import schema_py_generated as schema

    with open(path, "rb") as f:
        model = schema.ModelT.InitFromPackedBuf(f.read(), 0)
    names = {code: name for name, code in vars(schema.BuiltinOperator).items() if name.isupper()}
    counts = collections.Counter()
    for subgraph in model.subgraphs:
        for operator in subgraph.operators:
            code = model.operatorCodes[operator.opcodeIndex]
            if code.customCode:
                counts[code.customCode.decode()] += 1
            else:
                # Codes above 127 are in `builtinCode` only.
                counts[names[max(code.builtinCode, code.deprecatedBuiltinCode)]] += 1
    return counts


def share_quantized_constants(flatbuffer):
    """The LiteRT model `flatbuffer` (bytes) with each int8 matrix stored
    once where dynamic-range quantization stored it twice.

    A tied embedding is both looked up and multiplied: the converter
    quantizes it per tensor for a `DEQUANTIZE` (the lookups) and per row
    for a `FULLY_CONNECTED` (the output projection), two int8 copies of
    one matrix (a quarter of a small model's file). Where a `DEQUANTIZE`
    reads a per-tensor int8 constant and a per-row int8 constant of the
    same shape holds the same values (every element within half a
    quantization step of each), the `DEQUANTIZE` reads the per-row one,
    which LiteRT dequantizes row by row, as exactly as the other, and the
    first copy is dropped. Returns the model as bytes."""
    import flatbuffers
    import numpy as np
    from tensorflow.lite.python import schema_py_generated as schema

    model = schema.ModelT.InitFromPackedBuf(flatbuffer, 0)
    dequantize = {
        i
        for i, code in enumerate(model.operatorCodes)
        if max(code.builtinCode, code.deprecatedBuiltinCode) == schema.BuiltinOperator.DEQUANTIZE
    }

    def values(tensor, per_row):
        """The float values of an int8 constant, or `None`."""
        quantization, data = tensor.quantization, model.buffers[tensor.buffer].data
        if tensor.type != schema.TensorType.INT8 or data is None or quantization is None:
            return None
        scales = np.asarray(quantization.scale if quantization.scale is not None else [])
        if per_row != (scales.size > 1) or (per_row and quantization.quantizedDimension != 0):
            return None
        ints = np.asarray(data, np.uint8).view(np.int8).reshape(tensor.shape)
        return ints * scales.reshape([-1] + [1] * (ints.ndim - 1)), scales

    per_row = [
        (tensor, found)
        for subgraph in model.subgraphs
        for tensor in subgraph.tensors
        if (found := values(tensor, per_row=True)) is not None
    ]
    replaced = set()
    for subgraph in model.subgraphs:
        for operator in subgraph.operators:
            if operator.opcodeIndex not in dequantize:
                continue
            tensor = subgraph.tensors[operator.inputs[0]]
            found = values(tensor, per_row=False)
            if found is None:
                continue
            (value, scale), dropped = found, tensor.buffer
            for other, (other_value, other_scales) in per_row:
                if other_value.shape != value.shape:
                    continue
                step = (scale[0] + other_scales.reshape([-1] + [1] * (value.ndim - 1))) / 2
                if np.all(np.abs(value - other_value) <= step * (1 + 1e-6)):
                    tensor.buffer, tensor.quantization = other.buffer, other.quantization
                    replaced.add(dropped)
                    break
    # A replaced copy is dropped unless another tensor still reads it.
    for buffer in replaced - {t.buffer for g in model.subgraphs for t in g.tensors}:
        model.buffers[buffer].data = None
    builder = flatbuffers.Builder(len(flatbuffer))
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())
