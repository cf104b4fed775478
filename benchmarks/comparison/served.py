"""Our search as a served SavedModel: the same search as the `ours` rows,
without XLA (as `export_saved_model` writes it, so that stock TF Serving
loads it), saved with its weights and run either by the TF1 session loader
(`served`: what TF Serving's C++ server runs, `SessionSignature`) or by
`tf.saved_model.load` (`served_load`: what a Python server runs)."""

import tempfile

from comparison.measure import quiet_tensorflow
from comparison.measure import time_calls
from comparison.workload import decode_sources


def session_config(threads=0):
    """The `ConfigProto` TF Serving builds from its default flags
    (`--tensorflow_intra_op_parallelism`, `--tensorflow_inter_op_parallelism`
    and `--tensorflow_session_parallelism` 0: one thread per core, Grappler
    on)."""
    import tensorflow as tf

    return tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads
    )


class SessionSignature:
    """One signature of a SavedModel loaded by the TF1 session loader, as
    TF Serving loads it: called with numpy inputs by name, it returns the
    outputs by name as numpy arrays.

    >>> serve = SessionSignature("/models/ende/1", "serving_default")
    >>> serve(text=np.array([b"A dog runs."]))["translation"]
    """

    def __init__(self, path, name="serving_default", config=None):
        import tensorflow as tf
        from tensorflow.python.util import deprecation

        self.graph = tf.Graph()
        self.session = tf.compat.v1.Session(graph=self.graph, config=config or session_config())
        # The TF1 loader warns that it is deprecated: it is what TF Serving runs.
        with self.graph.as_default(), deprecation.silence():
            meta = tf.compat.v1.saved_model.loader.load(self.session, ["serve"], path)
        signature = meta.signature_def[name]
        self.inputs = {key: value.name for key, value in signature.inputs.items()}
        self.outputs = {key: value.name for key, value in signature.outputs.items()}

    def __call__(self, **inputs):
        feed = {self.inputs[key]: value for key, value in inputs.items()}
        return self.session.run(self.outputs, feed)


def save_search(model, run, path):
    """Saves the `tf.function` `run` (the search over `model`) as the
    `serving_default` signature of a SavedModel at `path`, with the
    model's variables, as `export_saved_model` saves them."""
    import tensorflow as tf

    module = tf.Module()
    module.model_variables = [v.value for v in model.variables]
    module.run = run
    tf.saved_model.save(module, path, signatures={"serving_default": run})


def signatures(path, loader):
    """`signature name -> call(**numpy inputs) -> {output: numpy array}`
    for the SavedModel at `path`, loaded by `loader`: `"session"` (the TF1
    session loader, TF Serving's) or `"load"` (`tf.saved_model.load`)."""
    if loader == "session":
        return lambda name: SessionSignature(path, name)
    import tensorflow as tf

    loaded = tf.saved_model.load(path)

    def caller(name):
        function = loaded.signatures[name]

        def call(**inputs):
            outputs = function(**{key: tf.constant(value) for key, value in inputs.items()})
            return {key: value.numpy() for key, value in outputs.items()}

        return call

    return caller


def save_compare_search(cfg, ids, shape, path, precision="fp32"):
    """Saves the `ours` decoding search of `compare.py` for the
    configuration `cfg` and the `DECODE_SHAPES` entry `shape` without XLA
    at `path` (`save_search`); returns the sources it decodes."""
    from comparison.ours import build_model
    from comparison.ours import searcher

    model = build_model(cfg, precision, dropout=0.0)
    save_search(model, searcher(model, shape["beam"], shape["steps"], ids, jit=False), path)
    return decode_sources(cfg, ids, (shape["batch"], shape["source_len"]))


def worker_decode(spec):
    """The `ours/decode` work through a saved search: `spec["loader"]` is
    `"session"` (TF Serving's loader) or `"load"` (`tf.saved_model.load`)."""
    quiet_tensorflow()
    import numpy as np

    ids = spec["ids"]
    with tempfile.TemporaryDirectory() as path:
        source = save_compare_search(spec["cfg"], ids, spec["decode"], path, spec["precision"])
        serve = signatures(path, spec["loader"])("serving_default")
        outputs = []
        step = lambda: outputs.append(serve(source=source)["output_0"])  # noqa: E731
        times = time_calls(step, spec["warmup"], spec["steps"])
    lengths = np.sum(outputs[-1] != ids["pad"], axis=-1)
    return {"times": times, "tokens": int(lengths.sum()), "out_shape": list(outputs[-1].shape)}


def worker_session(spec):
    """`worker_decode` through the TF1 session loader (TF Serving's)."""
    return worker_decode({**spec, "loader": "session"})


def worker_load(spec):
    """`worker_decode` through `tf.saved_model.load`."""
    return worker_decode({**spec, "loader": "load"})
