"""SavedModel export of a `Translator` for TF Serving.

The export is one self-contained SavedModel: raw strings in, translations
out, with the SentencePiece model, the weights and beam search inside the
graph. It uses only TensorFlow core and TensorFlow Text ops, so stock TF
Serving (which links TF Text) and plain `tf.saved_model.load` (with
`import tensorflow_text`) run it without Keras or this package.

Layout (what TF Serving watches):

    export_dir/
      1/  saved_model.pb  variables/  assets.extra/tf_serving_warmup_requests
                                      assets.extra/keras_transformer.json
      2/  ...
"""

import json
import os
import shutil
import tempfile

import tensorflow as tf

from keras_transformer.export.versions import existing_versions
from keras_transformer.translator import TEXT

SETTINGS_FILE = "keras_transformer.json"
WARMUP_FILE = "tf_serving_warmup_requests"
DEFAULT_WARMUP = ("A man is riding a bicycle.", "", "Two dogs play in the snow.")


class _ServingModule(tf.Module):
    """What is saved: the translator's model and tokenizer, its decoding
    settings as a constant, and one `tf.function` per signature."""

    def __init__(self, translator):
        super().__init__(name="keras_transformer_translator")
        # The functions read the `tf.Variable`s inside Keras's variables, and
        # those are what must be saved: exporting a Keras variable writes a
        # second copy, which the TF1 session loader (TF Serving) restores
        # instead of the one the graph reads. So the Keras model stays out of
        # the object graph, and its `tf.Variable`s are listed explicitly.
        object.__setattr__(self, "translator", translator)
        self.model_variables = [v.value for v in translator.model.variables]
        # A variable, not a constant: constants are not saved as objects.
        self.settings_json = tf.Variable(
            json.dumps(translator.settings(), sort_keys=True), trainable=False, name="settings_json"
        )

    @tf.function(input_signature=[TEXT])
    def serve(self, text):
        outputs = self.translator.translate_with_scores(text)
        return {"translation": outputs["translation"], "score": outputs["score"]}

    @tf.function(input_signature=[TEXT])
    def n_best(self, text):
        return self.translator.translate_n_best(text)

    @tf.function(input_signature=[TEXT])
    def tokenize(self, text):
        ids = self.translator.tokenizer.tokenize(text)
        return {
            "ids": ids.to_tensor(self.translator.pad_id),
            "lengths": tf.cast(ids.row_lengths(), tf.int32),
        }

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name="ids")])
    def detokenize(self, ids):
        return {"text": self.translator.tokenizer.detokenize(ids)}

    def signatures(self):
        return {
            "serving_default": self.serve.get_concrete_function(),
            "n_best": self.n_best.get_concrete_function(),
            "tokenize": self.tokenize.get_concrete_function(),
            "detokenize": self.detokenize.get_concrete_function(),
        }


def _write_warmup(path, sentences):
    """A TFRecord of `PredictionLog`s for TF Serving to run at load time."""
    from tensorflow_serving.apis import model_pb2
    from tensorflow_serving.apis import predict_pb2
    from tensorflow_serving.apis import prediction_log_pb2

    request = predict_pb2.PredictRequest(
        model_spec=model_pb2.ModelSpec(signature_name="serving_default")
    )
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(list(sentences), dtype=tf.string))
    log = prediction_log_pb2.PredictionLog(
        predict_log=prediction_log_pb2.PredictLog(request=request)
    )
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(log.SerializeToString())


def export_saved_model(
    translator,
    export_dir,
    version=None,
    overwrite=False,
    warmup_sentences=DEFAULT_WARMUP,
):
    """Exports `translator` to `export_dir/<version>/` for TF Serving.

    The SavedModel is written to a temporary directory inside `export_dir`
    (whose name is not a number, so TF Serving ignores it) and renamed into
    place when complete: a watcher never sees half a model, and a failed
    export leaves no version directory behind.

    Signatures:
        `serving_default`: `text` string `[batch]` -> `translation` string
            `[batch]`, `score` float32 `[batch]` (length-penalized
            log-probability).
        `n_best`: `text` -> `translations` `[batch, beam]`, `scores`.
        `tokenize`: `text` -> `ids` int32 `[batch, length]` (0-padded),
            `lengths` int32 `[batch]`.
        `detokenize`: `ids` int32 `[batch, length]` -> `text` `[batch]`.

    The decoding settings (beam size, alpha, length limits) are fixed at
    export; they are recorded in the SavedModel (`settings_json`) and in
    `assets.extra/keras_transformer.json` (see
    `python -m keras_transformer.translate --export_dir D --info`).

    Args:
        translator: a `keras_transformer.Translator`.
        export_dir: the model's base directory (TF Serving's `model_base_path`).
        version: a positive integer; default one more than the highest
            version already there (1 for a new directory).
        overwrite: replace an existing `version` instead of refusing.
        warmup_sentences: sentences for `assets.extra/tf_serving_warmup_requests`
            (TF Serving runs them at load, so the first user request does
            not pay for graph initialization); empty for no warm-up file.

    Returns:
        The path of the version directory.

    Example:

    >>> path = export_saved_model(Translator(model, tokenizer), "/models/ende")
    """
    export_dir = os.fspath(export_dir)
    versions = existing_versions(export_dir)
    if version is None:
        version = (versions[-1] + 1) if versions else 1
    if isinstance(version, bool) or not isinstance(version, int) or version <= 0:
        raise ValueError(f"`version` must be a positive integer. Received: version={version!r}")
    final = os.path.join(export_dir, str(version))
    if version in versions and not overwrite:
        raise FileExistsError(
            f"Version {version} already exists at {final}; pass overwrite=True to "
            "replace it, or leave `version` unset to add the next one."
        )
    tf.io.gfile.makedirs(export_dir)
    staging = tempfile.mkdtemp(prefix=f".tmp-export-{version}-", dir=export_dir)
    try:
        module = _ServingModule(translator)
        tf.saved_model.save(module, staging, signatures=module.signatures())
        extra = os.path.join(staging, "assets.extra")
        tf.io.gfile.makedirs(extra)
        with open(os.path.join(extra, SETTINGS_FILE), "w") as f:
            json.dump({"version": version, **translator.settings()}, f, indent=2, sort_keys=True)
        if warmup_sentences:
            _write_warmup(os.path.join(extra, WARMUP_FILE), warmup_sentences)
        if os.path.exists(final):  # overwrite: move the old one out first
            old = tempfile.mkdtemp(prefix=f".tmp-old-{version}-", dir=export_dir)
            os.rename(final, os.path.join(old, "model"))
            os.rename(staging, final)
            shutil.rmtree(old)
        else:
            os.rename(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final
