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
from keras_transformer.export._weights import check_finite
from keras_transformer.export.serving_module import ServingModule
from keras_transformer.export.versions import claimed_version
from keras_transformer.export.versions import new_staging_dir
from keras_transformer.export.versions import remove_stale
from keras_transformer.export.versions import swap_in
from keras_transformer.export.versions import unmark
from keras_transformer.translator.search_rows import DEFAULT_MAX_ROWS
from keras_transformer_runtime import validation

SETTINGS_FILE = "keras_transformer.json"
WARMUP_FILE = "tf_serving_warmup_requests"
DEFAULT_WARMUP = ("A man is riding a bicycle.", "", "Two dogs play in the snow.")
# Request limits of the translation signatures: what one request may cost.
DEFAULT_MAX_BATCH_SIZE = DEFAULT_MAX_ROWS  # 256: a default export samples as the translator
DEFAULT_MAX_INPUT_TOKENS = 16_384
DEFAULT_MAX_PHRASES = 32


def _write_warmup(path, sentences, languages):
    """A TFRecord of `PredictionLog`s for TF Serving to run at load time
    (a multilingual model's into its first language)."""
    from tensorflow_serving.apis import model_pb2
    from tensorflow_serving.apis import predict_pb2
    from tensorflow_serving.apis import prediction_log_pb2

    request = predict_pb2.PredictRequest(
        model_spec=model_pb2.ModelSpec(signature_name="serving_default")
    )
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(list(sentences), dtype=tf.string))
    if languages.requires_target_lang:
        target_lang = [languages.codes[0]] * len(sentences)
        request.inputs["target_lang"].CopyFrom(tf.make_tensor_proto(target_lang, dtype=tf.string))
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

    A multilingual model's (`translator.languages`: tags in its
    vocabulary, required on every source, as this package trains them;
    an imported OPUS-MT model takes the tag typed in the text instead)
    translating signatures, all but `tokenize` and `detokenize`, take one
    more input, `target_lang` string `[batch]`:
    each text's (or source's) target language, one of the model's (else
    `InvalidArgument` names them), or `""` for a text that starts with its
    tag (`>>fr<< A dog.`); every sentence of a text is translated into its
    language. The export's settings record the `languages`.

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
    `kt-translate --model D --info`). A
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
        max_batch_size: the most sentences a translation request may hold;
            the signatures that split texts into sentences search them
            this many at a time, so a text of any number of sentences
            costs the memory of `max_batch_size` (`TranslatorGraph`'s
            `max_rows`).
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
    check_finite(translator.model)
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
    module = ServingModule(translator, limits)
    tf.saved_model.save(module, directory, signatures=module.signatures())
    unmark(directory)  # the staging marker is not part of the export
    extra = os.path.join(directory, "assets.extra")
    tf.io.gfile.makedirs(extra)
    with open(os.path.join(extra, SETTINGS_FILE), "w") as f:
        json.dump({"version": version, **module.settings()}, f, indent=2, sort_keys=True)
    if warmup_sentences:
        _write_warmup(os.path.join(extra, WARMUP_FILE), warmup_sentences, translator.languages)
