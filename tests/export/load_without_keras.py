"""Loads an export the two ways TF Serving users do, in a process where
Keras and keras_transformer cannot be imported, and prints what each
returns.

    python load_without_keras.py SAVED_MODEL_DIR INPUTS.json

Stricter than importing `tensorflow` and `tensorflow_text`: the Python
package `tensorflow_text` itself imports Keras (for its Keras layers), so
only its SentencePiece op library is loaded, which is what TF Serving links.
Prints one JSON object: the translations and scores from
`tf.saved_model.load` and from the TF1 session loader (what TF Serving's
C++ server does), the op types of the graph and its function library, and
which of them TensorFlow alone, or with TF Text's ops, registers.
"""

import importlib.util
import json
import os
import sys

for blocked in ("keras", "keras_transformer", "tf_keras"):
    sys.modules[blocked] = None  # as if not installed: importing raises

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402
from tensorflow.python.framework import op_def_registry  # noqa: E402

path, inputs_path = sys.argv[1], sys.argv[2]
with open(inputs_path, "rb") as f:
    sentences = [s.encode("latin-1") for s in json.load(f)]  # raw bytes, maybe invalid UTF-8


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

loaded = tf.saved_model.load(path)
eager = loaded.signatures["serving_default"](text=tf.constant(sentences, tf.string))

with tf.compat.v1.Session(graph=tf.Graph()) as session:
    meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
    signature = meta.signature_def["serving_default"]
    fetches = {name: info.name for name, info in signature.outputs.items()}
    session_out = session.run(fetches, feed_dict={signature.inputs["text"].name: sentences})

print(
    json.dumps(
        {
            "eager": [t.decode("utf-8", "replace") for t in eager["translation"].numpy()],
            "eager_scores": eager["score"].numpy().tolist(),
            "session": [t.decode("utf-8", "replace") for t in session_out["translation"]],
            "session_scores": session_out["score"].tolist(),
            "ops": sorted(used),
            "core": sorted(core),
            "text": sorted(with_text - core),
            "unknown": sorted(used - with_text),
        }
    )
)
