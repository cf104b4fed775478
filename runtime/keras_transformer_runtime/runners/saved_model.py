"""Translate, sample and score with a SavedModel written by
`keras_transformer.export.export_saved_model`, as a TF Serving client
would: TensorFlow and TF Text, without Keras or `keras_transformer`.

TensorFlow is imported when a `SavedModelTranslator` is made (not when
this module is), so that the rest of the runtime imports without it. The
export's request limits (`max_batch_size`, `max_input_tokens`) are kept:
sentences go in requests of consecutive sentences within them, and one
sentence that alone exceeds them raises `RefusedRequestError` with the
results of those before it.

A SavedModel is a program that can read and write files: load only
exports you trust.
"""

import functools
import json
import os
import re

import numpy as np

from keras_transformer_runtime import logs
from keras_transformer_runtime import validation
from keras_transformer_runtime.runners import results
from keras_transformer_runtime.runners import runner
from keras_transformer_runtime.runners.settings import DecodingSettings
from keras_transformer_runtime.text import glossary
from keras_transformer_runtime.text.languages import TargetLanguages

SAVED_MODEL_FILE = "saved_model.pb"
# The texts whose lengths a translator remembers (`_source_lengths`).
LENGTHS_KEPT = 65536
# Lines per call of the `tokenize` signature, which counts tokens for the limits.
TOKENIZE_BATCH = 256
# Sentences per call when translating a long list (`bulk_batch_size`).
BULK_BATCH_SIZE = 256


def import_tensorflow():
    """`tensorflow`, with TF Text's ops registered (the export's graph uses
    them), or an `ImportError` that says how to get them."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        with logs.native_logs_hidden():
            import tensorflow as tf
            import tensorflow_text  # noqa: F401  (registers the ops the graph uses)
    except ImportError as error:
        raise ImportError(
            f"A SavedModel export runs with TensorFlow and TF Text, which cannot be imported "
            f"here ({error}): pip install 'keras-transformer-runtime[saved_model]'."
        ) from error
    return tf


def existing_versions(export_dir):
    """The integer versions in `export_dir`, sorted; `[]` if it does not exist.

    TF Serving watches a base directory (`model_base_path`) and serves the
    highest numbered subdirectory. Local file systems list `1`, object
    stores (`gs://`, `s3://`) list `1/`; both mean version 1. Names that
    are not plain ASCII numbers (temporary export directories, files) are
    not versions.

    Example:

    >>> existing_versions("/models/ende")
    [1, 2]
    """
    tf = import_tensorflow()
    export_dir = os.fspath(export_dir)
    if not tf.io.gfile.isdir(export_dir):
        return []
    names = (name.rstrip("/") for name in tf.io.gfile.listdir(export_dir))
    return sorted(int(name) for name in names if name.isascii() and name.isdigit())


def resolve_version_dir(export_dir, version=None):
    """The SavedModel directory to load from `export_dir`.

    `export_dir` may be a SavedModel itself (when `version` is `None`) or a
    base directory of numbered versions, of which `version` (default: the
    highest) is taken.

    Raises:
        FileNotFoundError: there is no such SavedModel; the message lists
            the versions that exist.

    Example:

    >>> resolve_version_dir("/models/ende")
    '/models/ende/2'
    """
    tf = import_tensorflow()
    export_dir = os.fspath(export_dir)
    if version is None and tf.io.gfile.exists(os.path.join(export_dir, SAVED_MODEL_FILE)):
        return export_dir
    versions = existing_versions(export_dir)
    if version is None:
        if not versions:
            raise FileNotFoundError(f"No SavedModel or numbered version in {export_dir}")
        version = versions[-1]
    path = os.path.join(export_dir, str(version))
    if not tf.io.gfile.exists(os.path.join(path, SAVED_MODEL_FILE)):
        raise FileNotFoundError(f"No SavedModel at {path} (versions: {versions})")
    return path


def batches_within(costs, batch_size, max_batch_size=None, max_input_tokens=None):
    """Consecutive `(start, end)` batches of the items whose token counts
    are `costs` (per item, a tuple: one count per input of the request):
    at most `batch_size` and `max_batch_size` items, and within
    `max_input_tokens` for each input, except an item that alone exceeds
    it, which goes alone (and the export refuses it).

    Example:

    >>> list(batches_within([(3,), (4,), (9,)], 10, max_input_tokens=8))
    [(0, 2), (2, 3)]
    """
    size = min(batch_size, max_batch_size or batch_size)
    start = 0
    while start < len(costs):
        end, totals = start, (0,) * len(costs[start])
        while end < len(costs) and end - start < size:
            grown = tuple(t + c for t, c in zip(totals, costs[end], strict=True))
            if end > start and max_input_tokens and max(grown) > max_input_tokens:
                break
            totals, end = grown, end + 1
        yield start, end
        start = end


class SavedModelTranslator(runner.Runner):
    """Translates, samples and scores with an export of
    `export_saved_model`, through its signatures (`Runner`'s API).

    Args:
        path: a SavedModel version directory, or the base directory that
            holds numbered versions.
        version: the version to load from a base directory (default: the
            newest).

    Attributes:
        path: the version directory loaded.
        settings: the exported `DecodingSettings`.
        limits: the export's request limits, `{"max_batch_size",
            "max_input_tokens"}` (`None`: no limit).
        signatures: the loaded signatures by name (`serving_default`, ...).

    Example:

    >>> translator = SavedModelTranslator("/models/ende")
    >>> translator.translate(["A dog runs."])
    ['Ein Hund läuft.']
    """

    methods = frozenset(runner.METHODS)
    has_token_scores = True
    shared_by_threads = True  # its functions are thread-safe

    def __init__(self, path, version=None):
        self._tf = import_tensorflow()
        if version is not None:
            validation.check_non_negative_int(version=version)
        self.path = resolve_version_dir(path, version)
        with logs.native_logs_hidden():  # TensorFlow's device probes
            self._loaded = self._tf.saved_model.load(self.path)  # owns the variables
        self.signatures = self._loaded.signatures
        self._lengths = {}  # text -> its pieces, for `_source_lengths`
        self.recorded = json.loads(self._loaded.settings_json.numpy().decode())
        self.settings = DecodingSettings.from_dict(self.recorded)
        self.limits = {
            name: self.recorded.get(name) for name in ("max_batch_size", "max_input_tokens")
        }
        self.languages = TargetLanguages(
            tuple(self.recorded.get("languages", ())), self.recorded.get("language_required", True)
        )
        self._warm_up()

    def _warm_up(self):
        """Translates a word once, with the native libraries' lines hidden
        (`logs.native_logs_hidden`): TF Text's SentencePiece and oneDNN
        write theirs on a process's first call, which this one is."""
        with logs.native_logs_hidden():
            self.translate(["Hello"], target_lang=next(iter(self.languages), None))

    @property
    def bulk_batch_size(self):
        """256 sentences (the export's `max_batch_size` if smaller): the
        graph's cost per search step is shared by more sentences."""
        return min(BULK_BATCH_SIZE, self.limits["max_batch_size"] or BULK_BATCH_SIZE)

    def describe(self):
        """The export's path, decoding settings and signatures, as text."""
        lines = [f"SavedModel: {self.path}"]
        # What the model needs (exports before 0.2.1 recorded a language
        # required of a model that has none).
        recorded = {**self.recorded, "language_required": self.languages.requires_target_lang}
        lines.append("decoding settings: " + json.dumps(recorded, sort_keys=True))

        def spec(s):
            return f"{s.dtype.name}{list(s.shape)}"

        for name, function in sorted(self.signatures.items()):
            inputs = function.structured_input_signature[1]
            outputs = function.structured_outputs
            lines.append(
                f"signature {name}: "
                + ", ".join(f"{k}: {spec(v)}" for k, v in sorted(inputs.items()))
                + " -> "
                + ", ".join(f"{k}: {spec(v)}" for k, v in sorted(outputs.items()))
            )
        return "\n".join(lines)

    def _token_counts(self, texts, truncated_to=None):
        """Each text's tokens as the export counts them against
        `max_input_tokens`: its pieces and EOS, at most `truncated_to`."""
        counts = [length + 1 for length in self._source_lengths(texts)]
        return [min(count, truncated_to) for count in counts] if truncated_to else counts

    def _phrase_token_counts(self, joined):
        """Each sentence's phrase tokens (its phrases joined by `|||`), as
        the export counts them against `max_input_tokens`: whole, no EOS
        (pieces of the source's vocabulary: the target's, where it
        differs, is the export's own)."""
        phrases = [glossary.split(value) for value in joined]
        lengths = iter(self._source_lengths([p for sentence in phrases for p in sentence]))
        return [sum(next(lengths) for _ in sentence) for sentence in phrases]

    def _source_lengths(self, texts):
        """Each text's pieces (the `tokenize` signature), each text asked
        once among the last `LENGTHS_KEPT`: a request's sentences are
        measured when they are split and again when batched."""
        texts = list(texts)
        known = {text: self._lengths.get(text) for text in texts}
        unknown = [text for text, length in known.items() if length is None]
        for start in range(0, len(unknown), TOKENIZE_BATCH):
            chunk = unknown[start : start + TOKENIZE_BATCH]
            found = self.signatures["tokenize"](text=self._strings(chunk))["lengths"].numpy()
            known.update(zip(chunk, (int(n) for n in found), strict=True))
        if len(self._lengths) + len(unknown) > LENGTHS_KEPT:
            self._lengths.clear()  # (several threads may share this translator)
        self._lengths.update((text, known[text]) for text in unknown)
        return [known[text] for text in texts]

    def _strings(self, texts):
        return self._tf.constant(list(texts), self._tf.string)

    def _requests(self, columns, batch_size, run):
        """`run(number, inputs)` (the results of request `number`, its
        inputs by name) over requests within the export's limits: `columns`
        are the signature's inputs by name, one value per item, the limits
        counting the tokens of the texts, sources and targets; the results
        of every request, concatenated (`constraints` and `banned`, each
        sentence's phrases joined, count their phrases' tokens).

        Raises:
            RefusedRequestError: the export refused an item that alone
                exceeds a limit; `done` holds the results before it.
        """
        if self.languages.requires_target_lang:  # each text tagged on the host already
            columns = {**columns, "target_lang": [""] * len(next(iter(columns.values())))}
        truncated = {
            "text": self.settings.max_input_length,
            "source": self.settings.max_input_length,
        }
        counts = [
            self._token_counts(values, truncated.get(name))
            if name in ("text", "source", "target")
            else self._phrase_token_counts(values)
            for name, values in columns.items()
        ]
        costs = list(zip(*counts, strict=True))
        done = []
        for number, (start, end) in enumerate(batches_within(costs, batch_size, **self.limits)):
            done += self._request(columns, start, end, functools.partial(run, number), done)
        return done

    def _request(self, columns, start, end, run, done):
        """`run`'s results for items `start` to `end` of `columns`; a
        request the export refuses is split in halves and tried again
        (where the client's counts differ from the export's, or one item
        is refused for itself), so that only an item refused alone raises
        `RefusedRequestError`, naming it."""
        inputs = {name: self._strings(values[start:end]) for name, values in columns.items()}
        try:
            return run(inputs)
        except self._tf.errors.InvalidArgumentError as error:
            if end - start == 1:
                raise _refused(error, start, end, done) from None
        middle = (start + end) // 2
        first = self._request(columns, start, middle, run, done)
        return first + self._request(columns, middle, end, run, done + first)

    def _run(self, name, parse):
        """A `run` of `_requests`: signature `name`'s outputs, `parse`d."""
        function = self.signatures[name]
        return lambda number, inputs: parse(results.numpy_outputs(function(**inputs)))

    def _translate_with_scores(self, sentences, n_best, token_scores, batch_size):
        """Beam search as exported (`serving_default`, `n_best`; with
        `token_scores`, `translate_with_alignments`, one hypothesis per
        sentence): for each sentence its `n_best` best `Hypothesis`."""
        runner.check_n_best(n_best, self.settings.beam_size)
        run = self._run(*results.scores_signature(n_best, token_scores))
        return self._requests({"text": list(sentences)}, batch_size, run)

    def _translate_with_alignments(self, sentences, batch_size):
        """An `AlignedTranslation` of each sentence (the signature
        `translate_with_alignments`)."""
        run = self._run("translate_with_alignments", results.aligned_translations)
        return self._requests({"text": list(sentences)}, batch_size, run)

    def _sample(self, sentences, num_samples, seed, batch_size):
        """`num_samples` random translations of each sentence (the `sample`
        signature), each drawn with a seed derived from `seed`, the draw
        and the request: the same for the same arguments."""
        validation.check_positive_int(num_samples=num_samples)
        validation.check_non_negative_int(seed=seed)
        function = self.signatures["sample"]

        def run(number, inputs):
            draws = [
                results.best_hypotheses(
                    results.numpy_outputs(
                        function(**inputs, seed=self._draw_seed(seed, draw, number))
                    )
                )
                for draw in range(num_samples)
            ]
            return [[options[0] for options in row] for row in zip(*draws, strict=True)]

        return self._requests({"text": list(sentences)}, batch_size, run)

    def _draw_seed(self, seed, draw, request):
        state = np.random.SeedSequence([seed, draw, request]).generate_state(1, np.uint64)
        return self._tf.constant(int(state[0]) >> 2, self._tf.int64)

    def score(self, sources, targets, batch_size=None, target_lang=None):
        """Each target's `TargetScore` for its source (the `score`
        signature; into `target_lang` for a multilingual model)."""
        batch_size = self.resolve_batch_size(batch_size)
        sources, targets = self.tagged_sources(sources, target_lang), list(targets)
        if len(sources) != len(targets):
            raise ValueError(
                "`sources` and `targets` must hold one target per source. Received: "
                f"{len(sources)} sources and {len(targets)} targets"
            )
        columns = {"source": sources, "target": targets}
        return self._requests(columns, batch_size, self._run("score", results.target_scores))

    def _translate_with_constraints(self, sentences, constraints, banned, batch_size):
        """The `translate_with_constraints` signature: per sentence, a
        `Hypothesis` holding its `constraints` and none of its `banned`
        phrases (lists of phrases per sentence), with `constraints_met`."""
        columns = {
            "text": list(sentences),
            "constraints": [glossary.joined(p) for p in constraints],
            "banned": [glossary.joined(p) for p in banned],
        }
        run = self._run("translate_with_constraints", results.constrained_hypotheses)
        return self._requests(columns, batch_size, run)


def _refused(error, start, end, done):
    """A `RefusedRequestError` for items `start` to `end` (0-based) that
    the export refused with `error`, after the results `done`."""
    # The graph's assertion message names the limit, or the constraints it
    # cannot write; the rest is a trace.
    found = re.search(r"A request may hold at most [^.]*\.", error.message)
    unwritable = re.search(
        re.escape(glossary.UNWRITABLE_CONSTRAINT) + r"\] \[(.*?)\]\n", error.message
    )
    if found:
        reason = found.group(0)
    elif unwritable:
        phrases = unwritable.group(1).replace('\\"', '"')  # joined by |||, as printed
        reason = f"{glossary.UNWRITABLE_CONSTRAINT} {phrases}"
    else:
        reason = error.message.strip().splitlines()[0]
    return results.RefusedRequestError(reason, start, end, done)
