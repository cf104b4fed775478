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


def worker_decode(spec):
    """The `ours/decode` work through a saved search: `spec["loader"]` is
    `"session"` (TF Serving's loader) or `"load"` (`tf.saved_model.load`)."""
    quiet_tensorflow()
    import numpy as np
    import tensorflow as tf

    from comparison.ours import build_model
    from comparison.ours import searcher

    cfg, ids, shape = spec["cfg"], spec["ids"], spec["decode"]
    model = build_model(cfg, spec["precision"], dropout=0.0)
    run = searcher(model, shape["beam"], shape["steps"], ids, jit=False)
    source = decode_sources(cfg, ids, (shape["batch"], shape["source_len"]))
    with tempfile.TemporaryDirectory() as path:
        save_search(model, run, path)
        if spec["loader"] == "session":
            serve = SessionSignature(path)
            call = lambda: serve(source=source)["output_0"]  # noqa: E731
        else:
            loaded = tf.saved_model.load(path).signatures["serving_default"]
            call = lambda: loaded(source=tf.constant(source))["output_0"].numpy()  # noqa: E731
        outputs = []
        times = time_calls(lambda: outputs.append(call()), spec["warmup"], spec["steps"])
    lengths = np.sum(outputs[-1] != ids["pad"], axis=-1)
    return {"times": times, "tokens": int(lengths.sum()), "out_shape": list(outputs[-1].shape)}


def worker_session(spec):
    """`worker_decode` through the TF1 session loader (TF Serving's)."""
    return worker_decode({**spec, "loader": "session"})


def worker_load(spec):
    """`worker_decode` through `tf.saved_model.load`."""
    return worker_decode({**spec, "loader": "load"})
