"""Loads an export the two ways TF Serving users do, in a process where
Keras and keras_transformer cannot be imported, and prints what each
signature returns.

    python load_without_keras.py SAVED_MODEL_DIR INPUTS.json

`INPUTS.json` maps signature names to their inputs: `{"serving_default":
{"text": [...]}, ...}`, strings as latin-1 (raw bytes, maybe invalid
UTF-8), numbers as (nested) lists or scalars.

Stricter than importing `tensorflow` and `tensorflow_text`: the Python
package `tensorflow_text` itself imports Keras (for its Keras layers), so
only its SentencePiece op library is loaded, which is what TF Serving links.
Prints one JSON object: per signature, its outputs from
`tf.saved_model.load` (`"eager"`) and from the TF1 session loader
(`"session"`, what TF Serving's C++ server does), strings decoded as UTF-8
with replacement; the names of all the export's signatures; the op types
of the graph and its function library, and which of them TensorFlow
alone, or with TF Text's ops, registers.
"""

import importlib.util
import json
import os
import sys

for blocked in ("keras", "keras_transformer", "tf_keras"):
    sys.modules[blocked] = None  # as if not installed: importing raises

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.framework import op_def_registry  # noqa: E402

path, inputs_path = sys.argv[1], sys.argv[2]
with open(inputs_path) as f:
    requests = json.load(f)


def op_types(graph_def):
    types = {node.op for node in graph_def.node}
    for function in graph_def.library.function:
        types |= {node.op for node in function.node_def}
    return types


from tensorflow.core.protobuf import saved_model_pb2  # noqa: E402

saved_model = saved_model_pb2.SavedModel()
with open(os.path.join(path, "saved_model.pb"), "rb") as f:
    saved_model.ParseFromString(f.read())
used = set()
for meta_graph in saved_model.meta_graphs:
    used |= op_types(meta_graph.graph_def)
core = {op for op in used if op_def_registry.get(op) is not None}

text_dir = importlib.util.find_spec("tensorflow_text").submodule_search_locations[0]
tf.load_op_library(os.path.join(text_dir, "python", "ops", "_sentencepiece_tokenizer.so"))

with_text = {op for op in used if op_def_registry.get(op) is not None}
assert all(sys.modules.get(name) is None for name in ("keras", "keras_transformer"))


def as_tensor_value(values, dtype):
    """JSON inputs as a signature's `dtype` takes them (strings from
    latin-1, so any bytes)."""
    if dtype == tf.string:
        return np.vectorize(lambda v: v.encode("latin-1"), otypes=[object])(np.array(values))
    return np.array(values, dtype=dtype.as_numpy_dtype)


def as_json(value):
    value = np.asarray(value)
    if value.dtype == object:
        return np.vectorize(lambda b: b.decode("utf-8", "replace"), otypes=[object])(value).tolist()
    return value.tolist()


loaded = tf.saved_model.load(path)
requests = {
    name: {
        key: as_tensor_value(
            values, loaded.signatures[name].structured_input_signature[1][key].dtype
        )
        for key, values in inputs.items()
    }
    for name, inputs in requests.items()
}
results = {name: {} for name in requests}
for name, inputs in requests.items():
    outputs = loaded.signatures[name](**{k: tf.constant(v) for k, v in inputs.items()})
    results[name]["eager"] = {k: as_json(v.numpy()) for k, v in outputs.items()}

with tf.compat.v1.Session(graph=tf.Graph()) as session:
    meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
    for name, inputs in requests.items():
        signature = meta.signature_def[name]
        fetches = {key: info.name for key, info in signature.outputs.items()}
        feed = {signature.inputs[key].name: value for key, value in inputs.items()}
        outputs = session.run(fetches, feed_dict=feed)
        results[name]["session"] = {k: as_json(v) for k, v in outputs.items()}

print(
    json.dumps(
        {
            "results": results,
            "signatures": sorted(loaded.signatures),
            "ops": sorted(used),
            "core": sorted(core),
            "text": sorted(with_text - core),
            "unknown": sorted(used - with_text),
        }
    )
)
