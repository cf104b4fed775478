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

import tensorflow as tf

from keras_transformer import _backend
from keras_transformer.export.versions import claimed_version
from keras_transformer.export.versions import new_staging_dir
from keras_transformer.export.versions import remove_stale
from keras_transformer.export.versions import swap_in
from keras_transformer.export.versions import unmark
from keras_transformer.translator.signatures import BANNED
from keras_transformer.translator.signatures import CONSTRAINTS
from keras_transformer.translator.signatures import MAX_OUTPUT_LENGTH
from keras_transformer.translator.signatures import PHRASE_SEPARATOR
from keras_transformer.translator.signatures import PREFIX
from keras_transformer.translator.signatures import SEED
from keras_transformer.translator.signatures import SOURCE
from keras_transformer.translator.signatures import TARGET
from keras_transformer.translator.signatures import TEXT
from keras_transformer_runtime import validation

SETTINGS_FILE = "keras_transformer.json"
WARMUP_FILE = "tf_serving_warmup_requests"
DEFAULT_WARMUP = ("A man is riding a bicycle.", "", "Two dogs play in the snow.")
# Request limits of the translation signatures: what one request may cost.
DEFAULT_MAX_BATCH_SIZE = 256
DEFAULT_MAX_INPUT_TOKENS = 16_384
DEFAULT_MAX_PHRASES = 32


class _ServingModule(tf.Module):
    """What is saved: the translator's model and tokenizer, its decoding
    settings as a constant, and one `tf.function` per signature."""

    def __init__(self, translator, limits):
        super().__init__(name="keras_transformer_translator")
        self.limits = dict(limits)
        # The functions read the `tf.Variable`s inside Keras's variables, and
        # those are what must be saved: exporting a Keras variable writes a
        # second copy, which the TF1 session loader (TF Serving) restores
        # instead of the one the graph reads. So the Keras model stays out of
        # the object graph, and its `tf.Variable`s are listed explicitly.
        object.__setattr__(self, "translator", translator)
        object.__setattr__(self, "graph", translator.graph)
        self.model_variables = [v.value for v in translator.model.variables]
        # The tokenizer's resources (a MarianTokenizer's lookup table), so
        # that the export creates and initializes them on load.
        self.tokenizer = translator.tokenizer
        # Likewise the lookup tables of banned phrases' spellings.
        self.spellings = translator.graph.spellings
        # A variable, not a constant: constants are not saved as objects.
        self.settings_json = tf.Variable(
            json.dumps(self.settings(), sort_keys=True), trainable=False, name="settings_json"
        )

    def settings(self):
        """The translator's decoding settings and the request limits."""
        return {**self.translator.settings.to_dict(), **self.limits}

    def _within_limits(self, text, side="source"):
        """`text`, after assertions that the request is within the limits
        (an `InvalidArgument` error names the limit otherwise); `side`
        says how the text counts: `"text"` every token (the signatures
        that split texts translate them all), `"source"` truncated to
        `max_input_length`, `"target"` to the model's `max_length`."""
        max_batch, max_tokens = self.limits["max_batch_size"], self.limits["max_input_tokens"]
        truncated_to = {
            "text": None,
            "source": self.translator.settings.max_input_length,
            "target": self.translator.model.max_length,
        }[side]
        tokenizer = self.translator.tokenizer
        tokenize = tokenizer.tokenize_target if side == "target" else tokenizer.tokenize
        lengths = tf.cast(tokenize(text).row_lengths(), tf.int64) + 1
        if truncated_to is not None:
            lengths = tf.minimum(lengths, truncated_to)
        tokens = tf.reduce_sum(lengths)
        side = "source" if side == "text" else side
        checks = [
            tf.debugging.assert_less_equal(
                tf.size(text),
                max_batch,
                message=f"A request may hold at most max_batch_size={max_batch} sentences.",
            ),
            tf.debugging.assert_less_equal(
                tokens,
                tf.cast(max_tokens, tokens.dtype),
                message=f"A request may hold at most max_input_tokens={max_tokens} {side} tokens.",
            ),
        ]
        with tf.control_dependencies(checks):
            return tf.identity(text)

    def _phrases_within_limits(self, phrases, name, longest_checked=True):
        """`phrases` (each sentence's, joined by `|||`), after assertions
        that the request is within the limits: each sentence has at most
        `max_phrases` phrases, each phrase (with `longest_checked`) at most
        the longest output's tokens (`max_output_length - 1`, room for
        EOS), and all of them, counted whole, at most `max_input_tokens`. The searches keep
        phrases whole, and a constrained step's cost grows with the square
        of a phrase's length: truncated counts would not bound it."""
        batch = tf.size(phrases)
        split = tf.strings.strip(tf.strings.split(tf.reshape(phrases, [-1]), PHRASE_SEPARATOR))
        lengths = tf.cast(
            self.translator.tokenizer.tokenize_target(split.flat_values).row_lengths(), tf.int64
        )
        counted = tf.RaggedTensor.from_row_splits(
            tf.cast(lengths > 0, tf.int64), split.row_splits, validate=False
        )
        per_sentence = tf.reduce_max(tf.concat([tf.reduce_sum(counted, axis=1), [0]], 0))
        longest = tf.reduce_max(tf.concat([lengths, [0]], 0))
        most_phrases = self.limits["max_phrases"]
        most_tokens = self.translator.settings.max_output_length - 1
        max_tokens = self.limits["max_input_tokens"]
        checks = [
            tf.debugging.assert_less_equal(
                tf.cast(batch, tf.int64),
                tf.cast(self.limits["max_batch_size"], tf.int64),
                message=(
                    f"A request may hold at most max_batch_size={self.limits['max_batch_size']} "
                    "sentences."
                ),
            ),
            tf.debugging.assert_less_equal(
                per_sentence,
                tf.cast(most_phrases, tf.int64),
                message=f"A request may hold at most max_phrases={most_phrases} {name} phrases "
                "per sentence.",
            ),
            tf.debugging.assert_less_equal(
                longest if longest_checked else tf.constant(0, tf.int64),
                tf.cast(most_tokens, tf.int64),
                message=f"A request may hold at most {most_tokens} target tokens in one {name} "
                "phrase (the longest output, EOS aside).",
            ),
            tf.debugging.assert_less_equal(
                tf.reduce_sum(lengths),
                tf.cast(max_tokens, tf.int64),
                message=f"A request may hold at most max_input_tokens={max_tokens} {name} tokens.",
            ),
        ]
        with tf.control_dependencies(checks):
            return tf.identity(phrases)

    # Plain methods, made `tf.function`s by `signatures()` and kept off the
    # object: `tf.saved_model.save` traces a saved object's functions again
    # (in its own context); the signatures it is given it saves as traced.
    def _serving_default(self, text):
        return self.graph.serving_default(self._within_limits(text, "text"))

    def _n_best(self, text):
        return self.graph.n_best(self._within_limits(text, "text"))

    def _translate_with_options(self, text, prefix, max_output_length):
        return self.graph.translate_with_options(
            self._within_limits(text, "text"),
            self._within_limits(prefix, "target"),
            max_output_length,
        )

    def _translate_with_constraints(self, text, constraints, banned):
        return self.graph.translate_with_constraints(
            self._within_limits(text),
            self._phrases_within_limits(constraints, "constraints"),
            # A banned phrase longer than any output cannot occur (the
            # search drops it): refused only by the counts.
            self._phrases_within_limits(banned, "banned", longest_checked=False),
        )

    def _translate_with_alignments(self, text):
        return self.graph.translate_with_alignments(self._within_limits(text))

    def _sample(self, text, seed):
        return self.graph.sample(self._within_limits(text, "text"), seed)

    def _score(self, source, target):
        return self.graph.score(self._within_limits(source), self._within_limits(target, "target"))

    def signatures(self):
        """Each signature's concrete function: the graph's functions, those
        that run the model behind the request limits (`tokenize` and
        `detokenize` as they are)."""
        limited = {
            "serving_default": (self._serving_default, [TEXT]),
            "n_best": (self._n_best, [TEXT]),
            "translate_with_options": (
                self._translate_with_options,
                [TEXT, PREFIX, MAX_OUTPUT_LENGTH],
            ),
            "translate_with_alignments": (self._translate_with_alignments, [TEXT]),
            "translate_with_constraints": (
                self._translate_with_constraints,
                [TEXT, CONSTRAINTS, BANNED],
            ),
            "sample": (self._sample, [TEXT, SEED]),
            "score": (self._score, [SOURCE, TARGET]),
        }
        functions = self.graph.signature_functions()
        for name, (method, inputs) in limited.items():
            functions[name] = tf.function(method, input_signature=inputs)
        return {name: function.get_concrete_function() for name, function in functions.items()}


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


@_backend.tensorflow_only("export.export_saved_model", "a TensorFlow SavedModel")
def export_saved_model(
    translator,
    export_dir,
    version=None,
    overwrite=False,
    warmup_sentences=DEFAULT_WARMUP,
    max_batch_size=DEFAULT_MAX_BATCH_SIZE,
    max_input_tokens=DEFAULT_MAX_INPUT_TOKENS,
    max_phrases=DEFAULT_MAX_PHRASES,
):
    """Exports `translator` to `export_dir/<version>/` for TF Serving.

    The SavedModel is written to a hidden staging directory inside
    `export_dir` (TF Serving ignores it) and renamed into place when
    complete: a watcher never sees half a model, and a failed export leaves
    no version directory behind. The version number is claimed atomically,
    so exports running at once (two pipelines, the workers of one run) get
    different versions; staging directories and claims of exports that
    died are removed. With `overwrite=True` a failed swap puts the old
    version back.

    Signatures:
        `serving_default`: `text` string `[batch]` -> `translation` string
            `[batch]`, `score` float32 `[batch]` (length-penalized
            log-probability, summed over a text's sentences), `truncated`
            bool `[batch]`. With the settings' `split_sentences` each text
            is translated sentence by sentence and joined back with its
            own separators; either way a sentence over `max_input_length`
            is translated in pieces of whole words (a word alone over it
            cut), and `truncated` marks the texts that had one.
        `n_best`: `text` -> `translations` `[batch, beam]`, `scores`,
            `truncated` (a text's k-th joins its sentences' k-th best).
        `translate_with_options`: `text`, `prefix` string `[batch]` (`""`:
            none), `max_output_length` int32 scalar (<= 0: the exported
            one) -> `translation`, `score`, `truncated`: translations that
            start with their prefix (a text's first sentence's), at most
            `max_output_length` tokens long per sentence.
        `translate_with_alignments`: `text` -> `translation`, `score`,
            `alignments` int32 `[batch, target_len]` (for each output
            token, the source token it attends to most; -1 after EOS),
            `token_scores` float32 `[batch, target_len]` (each output
            token's log-probability, as `score` gives it; 0 after EOS),
            `target_tokens`, `source_tokens` string (pieces, `""` at
            padding).
        `translate_with_constraints`: `text`, `constraints`, `banned`
            string `[batch]` (each sentence's phrases joined by `|||`,
            `""` for none) -> `translation`, `score`, `constraints_met`
            bool: translations that contain every constraint and no banned
            phrase (`Translator.translate_with_constraints`).
        `sample`: `text`, `seed` int64 scalar -> `translation`, `score`,
            `truncated`: one translation per text (split as
            `serving_default` splits) drawn at random with the
            translator's `temperature`, `top_k` and `top_p`, the same for
            the same seed and batch.
        `score`: `source`, `target` string `[batch]` -> `log_prob`,
            `score` float32 `[batch]`, `token_scores` float32 `[batch,
            length]`, `target_tokens` string `[batch, length]`: each target
            scored as a translation of its source (forced decoding, see
            `Translator.score_targets`).
        `tokenize`: `text` -> `ids` int32 `[batch, length]` (padded with
            the model's pad id), `lengths` int32 `[batch]`.
        `detokenize`: `ids` int32 `[batch, length]` -> `text` `[batch]`.

    `translate_with_alignments` and `translate_with_constraints` take each
    text as one sentence, cut at `max_input_length` tokens, and say so in
    a `truncated` output (`SavedModelTranslator` splits texts before it
    calls them); `score` likewise cuts its sources.

    A request over `max_batch_size` texts or `max_input_tokens` source
    tokens (every token, for the signatures that split texts; after
    truncation to the translator's `max_input_length` for the others), or
    as many target tokens, fails with `InvalidArgument` naming the limit,
    instead of exhausting the server's memory; so does one whose
    terminology phrases (`translate_with_constraints`) exceed
    `max_input_tokens` tokens in all (counted whole: the search keeps
    phrases whole), `max_phrases` phrases for a sentence, or, in one
    phrase, the tokens the longest output can hold. The decoding settings and
    the limits are fixed at export; they are recorded in the SavedModel
    (`settings_json`) and in `assets.extra/keras_transformer.json` (see
    `python -m keras_transformer.translate --export_dir D --info`). A
    translator compiled with XLA is exported without it (stock TF Serving
    does not run XLA on a CPU).

    Args:
        translator: a `keras_transformer.Translator`.
        export_dir: the model's base directory (TF Serving's
            `model_base_path`), on a local or POSIX file system.
        version: a positive integer; default one more than the highest
            version already there or claimed (1 for a new directory).
        overwrite: replace an existing `version` instead of refusing.
        warmup_sentences: sentences for `assets.extra/tf_serving_warmup_requests`
            (TF Serving runs them at load, so the first user request does
            not pay for graph initialization); empty for no warm-up file.
        max_batch_size: the most sentences a translation request may hold.
        max_input_tokens: the most source tokens (EOS included) a
            translation request may hold, and the most constraint and
            banned tokens.
        max_phrases: the most constraint (and banned) phrases one
            sentence of a `translate_with_constraints` request may have.

    Returns:
        The path of the version directory.

    Raises:
        FileExistsError: `version` exists (without `overwrite`) or another
            export is writing it.
        ValueError: a bad argument, or weights that are NaN or infinite.

    Example:

    >>> path = export_saved_model(Translator(model, tokenizer), "/models/ende")
    """
    export_dir = os.fspath(export_dir)
    if version is not None:
        validation.check_positive_int(version=version)
    validation.check_positive_int(
        max_batch_size=max_batch_size, max_input_tokens=max_input_tokens, max_phrases=max_phrases
    )
    if not all(bool(tf.reduce_all(tf.math.is_finite(w))) for w in translator.model.weights):
        raise ValueError("The model's weights hold NaN or infinite values; nothing exported.")
    if translator.jit_compile:
        translator = translator.without_xla()
    os.makedirs(export_dir, exist_ok=True)
    remove_stale(export_dir)
    limits = {
        "max_batch_size": max_batch_size,
        "max_input_tokens": max_input_tokens,
        "max_phrases": max_phrases,
    }
    with claimed_version(export_dir, version) as version:
        final = os.path.join(export_dir, str(version))
        if os.path.exists(final) and not overwrite:
            raise FileExistsError(
                f"Version {version} already exists at {final}; pass overwrite=True to "
                "replace it, or leave `version` unset to add the next one."
            )
        staging = new_staging_dir(export_dir, version)
        try:
            _write_export(translator, staging, version, limits, warmup_sentences)
            swap_in(staging, final, aside_prefix=f".tmp-old-{version}-")
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return final


def _write_export(translator, directory, version, limits, warmup_sentences):
    module = _ServingModule(translator, limits)
    tf.saved_model.save(module, directory, signatures=module.signatures())
    unmark(directory)  # the staging marker is not part of the export
    extra = os.path.join(directory, "assets.extra")
    tf.io.gfile.makedirs(extra)
    with open(os.path.join(extra, SETTINGS_FILE), "w") as f:
        json.dump({"version": version, **module.settings()}, f, indent=2, sort_keys=True)
    if warmup_sentences:
        _write_warmup(os.path.join(extra, WARMUP_FILE), warmup_sentences)
