"""Loading an export by its path: which runner runs it (`runner_kind`) and
that runner, made with a number of threads (`load_runner`), as the server
and the corpus pipeline load them.

Example:

>>> load_runner("ende.tflite", threads=1).translate(["A dog runs."])
['Ein Hund läuft.']
"""

import os

from keras_transformer_runtime import validation

KINDS = ("litert", "onnx", "ctranslate2", "saved_model")


def runner_kind(path):
    """Which runner runs the export at `path`: `"litert"`, `"onnx"`,
    `"ctranslate2"` or `"saved_model"`.

    Example:

    >>> runner_kind("ende.tflite")
    'litert'
    """
    path = os.fspath(path)
    if path.endswith(".tflite"):
        return "litert"
    if path.endswith(".onnx"):
        return "onnx"
    if os.path.isfile(os.path.join(path, "model.bin")):
        return "ctranslate2"
    if os.path.isdir(path):
        return "saved_model"
    raise ValueError(
        f"`model` must be a .tflite file, an .onnx file, a CTranslate2 directory or a "
        f"SavedModel directory. Received: model={path!r}"
    )


def runner_kind_or_none(path):
    """`runner_kind(path)`, or `None` where the path does not tell it."""
    try:
        return runner_kind(path)
    except ValueError:
        return None


def check_kind(kind):
    """`kind` if it is one of `KINDS`; a `ValueError` naming them otherwise."""
    if kind not in KINDS:
        raise ValueError(f"`kind` must be one of {', '.join(KINDS)}. Received: kind={kind!r}")
    return kind


def load_runner(
    path,
    threads=None,
    version=None,
    compute_type="default",
    parallel_calls=1,
    kind=None,
    **settings,
):
    """The runner of the export at `path`, of `kind` (default: read from
    the path, `runner_kind`), running on `threads` threads (default: the
    runtime's own choice).

    A SavedModel's threads are TensorFlow's, one pool per process: they
    are set when TensorFlow has not run anything yet in this process, and
    a `RuntimeError` says so otherwise. `version` picks a SavedModel base
    directory's version; `compute_type` is CTranslate2's, and so is
    `parallel_calls`: its `inter_threads`, the calls from that many threads
    that run side by side (each on `threads`).

    `settings` are `DecodingSettings` fields to decode with instead of the
    exported ones (e.g. `temperature=0.7, top_k=50` for sampling): a
    CTranslate2 export takes them; the other kinds run the search they
    were exported with, and a `ValueError` names a setting that differs.
    """
    validation.check_positive_int(allow_none=True, threads=threads)
    validation.check_positive_int(parallel_calls=parallel_calls)
    kind = runner_kind(path) if kind is None else check_kind(kind)
    if kind == "ctranslate2":
        from keras_transformer_runtime.runners.ctranslate2 import CTranslate2Translator

        return CTranslate2Translator(
            path,
            compute_type=compute_type,
            intra_threads=threads or 0,
            inter_threads=parallel_calls,
            **settings,
        )
    if kind == "saved_model":
        runner = _saved_model(path, threads, version)
    elif kind == "litert":
        from keras_transformer_runtime.runners.litert import LiteRTTranslator

        runner = LiteRTTranslator(path, num_threads=threads)
    else:
        from keras_transformer_runtime.runners.onnx import ONNXTranslator

        runner = ONNXTranslator(path, num_threads=threads)
    _check_exported(runner, kind, settings)
    return runner


def _check_exported(runner, kind, settings):
    """A `ValueError` naming the first of `settings` that differs from the
    ones `runner` was exported with (its search is in the export)."""
    exported = runner.settings.to_dict()
    for name, value in settings.items():
        if name not in exported:
            raise ValueError(f"`{name}` is not a decoding setting. Received: {name}={value!r}")
        if value != exported[name]:
            raise ValueError(
                f"A {kind} export decodes with the settings it was exported with "
                f"({name}={exported[name]!r}); only a CTranslate2 export takes them when loaded. "
                f"Received: {name}={value!r}"
            )


def _saved_model(path, threads, version):
    from keras_transformer_runtime.runners.saved_model import SavedModelTranslator
    from keras_transformer_runtime.runners.saved_model import import_tensorflow

    if threads is not None:
        threading = import_tensorflow().config.threading
        try:
            threading.set_intra_op_parallelism_threads(threads)
            threading.set_inter_op_parallelism_threads(threads)
        except RuntimeError as error:
            raise RuntimeError(
                f"TensorFlow's threads are set before it first runs; this process ran it "
                f"already, so `threads={threads}` cannot apply ({error})."
            ) from None
    return SavedModelTranslator(path, version)
