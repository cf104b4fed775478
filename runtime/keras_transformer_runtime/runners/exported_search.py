"""What the translators of a search exported as one model file (LiteRT,
ONNX) share: the files beside the model, tokenization on the host, and
batches of ids in, ids out.

`keras_transformer.export.export_litert` and `export_onnx` write, for a
model file `PATH` (e.g. `ende.tflite`):

    PATH              the search: int32 source ids [batch, length] in,
                      output ids and scores out
    PATH.json         the decoding settings, special ids and signature
    PATH.spm.model    the SentencePiece model (`SentencePieceTokenizer`;
                      `PATH.spm` in earlier exports)
      or PATH.source.spm, PATH.target.spm, PATH.vocab.json
                      (a Marian model's tokenizer)

The model takes `source_ids`, int32 `[batch, length]`: each source's ids,
truncated to `max_input_length - 1`, then EOS, padded with `pad_id`; it
returns `ids`, int32 `[batch, output_length]` (the best output, EOS, then
`pad_id`), and `scores`, float32 `[batch]` (its length-penalized
log-probability), for any batch size and length; exports since
`token_scores` and `attention` were added (as `PATH.json`'s signature
lists them) also return each output token's log-probability, float32
`[batch, output_length]`, and its attention over the source, float32
`[batch, output_length, length]` (the mean over heads of the alignment
layer's cross-attention, kept by the search), both 0 after EOS: the
runner then translates with alignments (and markup is placed on them). The search is the one
the exported `Translator` runs (beam search, greedy for `beam_size=1`),
inside the model.
"""

import json
import os

from keras_transformer_runtime.batching import in_length_order
from keras_transformer_runtime.runners import runner
from keras_transformer_runtime.runners.results import AlignedTranslation
from keras_transformer_runtime.runners.results import Hypothesis
from keras_transformer_runtime.runners.results import length_penalty
from keras_transformer_runtime.runners.settings import DecodingSettings
from keras_transformer_runtime.text.tokenizers import SentencePieces
from keras_transformer_runtime.text.tokenizers import asset_files
from keras_transformer_runtime.text.tokenizers import host_tokenizer

SIGNATURE = "translate"
SOURCE_IDS, OUTPUT_IDS, SCORES = "source_ids", "ids", "scores"
TOKEN_SCORES, ATTENTION = "token_scores", "attention"
SETTINGS_SUFFIX = ".json"
# Exports written before the tokenizers named their files alike held the
# SentencePiece model as `PATH.spm` (now `PATH.spm.model`).
EARLIER_SENTENCEPIECE_SUFFIX = ".spm"


def companion(path, suffix):
    """The file beside model file `path` with `suffix` (e.g. `.json`)."""
    return os.fspath(path) + suffix


def read_export(path, runtime):
    """The settings recorded beside model file `path` (`PATH.json`), checked
    to be an export for `runtime` (`"litert"` or `"onnx"`)."""
    path = os.fspath(path)
    settings_path = companion(path, SETTINGS_SUFFIX)
    if not os.path.isfile(path) or not os.path.isfile(settings_path):
        missing = path if not os.path.isfile(path) else settings_path
        raise ValueError(
            f"`path` {path!r} is not a {runtime} export of keras_transformer: {missing} "
            "does not exist (export_litert and export_onnx write the model and, beside it, "
            f"{os.path.basename(settings_path)})."
        )
    with open(settings_path, encoding="utf-8") as f:
        recorded = json.load(f)
    if recorded.get("runtime") != runtime:
        raise ValueError(
            f"`path` {path!r} was exported for the runtime {recorded.get('runtime')!r}, "
            f"not for {runtime!r}."
        )
    return recorded


def tokenizer_prefix(path):
    """The prefix of the tokenizer's files beside model file `path`."""
    return os.path.basename(path) + "."


def tokenizer_files(path, kind):
    """The paths of a `kind` tokenizer's files beside model file `path`."""
    directory = os.path.dirname(path)
    return [os.path.join(directory, f) for f in asset_files(kind, tokenizer_prefix(path))]


def load_tokenizer(path, recorded):
    """The host tokenizer of the files beside model file `path`, of the
    kind `recorded` names."""
    earlier = companion(path, EARLIER_SENTENCEPIECE_SUFFIX)
    if recorded["tokenizer"] == "sentencepiece" and os.path.isfile(earlier):
        return SentencePieces(earlier)
    return host_tokenizer(recorded["tokenizer"], os.path.dirname(path), tokenizer_prefix(path))


class ExportedSearchTranslator(runner.Runner):
    """Translates raw strings with a search exported as one model file:
    SentencePiece on the host (`sentencepiece`), the search in the model.
    A subclass runs the model (`_search`).

    Args:
        path: the model file.
        runtime: the runtime it was exported for (`"litert"`, `"onnx"`).

    Attributes:
        settings: the exported `DecodingSettings` (fixed in the model).
        quantization: the weights' type in the model file.
    """

    methods = frozenset({runner.TRANSLATE, runner.TRANSLATE_WITH_SCORES})
    max_n_best = 1  # the search inside the model returns the best only

    def __init__(self, path, runtime):
        self.path = os.fspath(path)
        self.runtime = runtime
        recorded = read_export(self.path, runtime)
        self.settings = DecodingSettings.from_dict(recorded)
        self.quantization = recorded.get("quantization") or "float32"
        self.pad_id, self.eos_id = recorded["pad_id"], recorded["eos_id"]
        self.pieces = load_tokenizer(self.path, recorded)
        self.languages = self.pieces.languages
        # The model's outputs, by name: the alignments' where it has them.
        self.outputs = list(recorded.get("signature", {}).get("outputs", [OUTPUT_IDS, SCORES]))
        self.has_token_scores = TOKEN_SCORES in self.outputs
        if ATTENTION in self.outputs:
            self.methods = self.methods | {runner.TRANSLATE_WITH_ALIGNMENTS}

    def _search(self, source_ids):
        """The model's `outputs` (NumPy arrays by name) for int32 NumPy
        `source_ids` `[batch, length]`."""
        raise NotImplementedError

    def source_ids(self, sentences):
        """The model's input for `sentences`: int32 `[batch, length]`, each
        source's ids truncated to `max_input_length - 1`, then EOS, padded
        with `pad_id`, as `Translator` encodes them."""
        import numpy as np

        keep = self.settings.max_input_length - 1
        rows = [
            self.pieces.source_ids(runner.as_text(text))[:keep] + [self.eos_id]
            for text in sentences
        ]
        ids = np.full((len(rows), max((len(r) for r in rows), default=0)), self.pad_id, np.int32)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = row
        return ids

    def describe(self):
        """The model file, its quantization and decoding settings."""
        return runner.export_description(
            f"{self.runtime} model: {self.path}", self.quantization, self.settings
        )

    def _source_lengths(self, texts):
        return [len(self.pieces.source_ids(runner.as_text(text))) for text in texts]

    def _translate_with_scores(self, sentences, n_best, token_scores, batch_size):
        """The best translation of each sentence as a `Hypothesis` (in a
        list: the search inside the model returns the best only), in
        order, in batches of at most `batch_size` sources of similar
        length.

        Raises:
            ValueError: `n_best` is not 1, or `token_scores` is asked for
                from an export without them.
        """
        if n_best != 1 or (token_scores and not self.has_token_scores):
            raise ValueError(
                f"{self.name} returns the best translation and its score only: n_best=1, "
                f"token_scores={self.has_token_scores}. "
                f"Received: n_best={n_best!r}, token_scores={token_scores!r}"
            )
        sentences = list(sentences)
        alpha = self.settings.alpha

        def run(chunk):
            found = self._search(self.source_ids([sentences[i] for i in chunk]))
            hypotheses = []
            for row, (ids, score) in enumerate(zip(found[OUTPUT_IDS], found[SCORES], strict=True)):
                tokens = self.pieces.pieces_of_ids(ids)
                scores = found[TOKEN_SCORES][row, : len(tokens)].tolist() if token_scores else []
                hypotheses.append(
                    [
                        Hypothesis(
                            translation=self.pieces.text_of_ids(ids),
                            score=float(score),
                            log_prob=float(score) * length_penalty(len(tokens), alpha),
                            tokens=tokens,
                            token_scores=scores,
                        )
                    ]
                )
            return hypotheses

        return in_length_order(len(sentences), lambda i: len(sentences[i]), run, batch_size)

    def _translate_with_alignments(self, sentences, batch_size):
        """An `AlignedTranslation` of each sentence (each taken as one
        sentence), from the model's `attention` and `token_scores`
        outputs, in batches of at most `batch_size` sources of similar
        length."""
        sentences = list(sentences)

        def run(chunk):
            source_ids = self.source_ids([sentences[i] for i in chunk])
            found = self._search(source_ids)
            aligned = []
            for row, ids in enumerate(found[OUTPUT_IDS]):
                tokens = self.pieces.pieces_of_ids(ids)
                source = self.pieces.pieces_of_ids(source_ids[row])
                attention = found[ATTENTION][row, : len(tokens), : len(source)]
                aligned.append(
                    AlignedTranslation(
                        translation=self.pieces.text_of_ids(ids),
                        target_tokens=tokens,
                        source_tokens=source,
                        alignments=attention.argmax(axis=1).tolist(),
                        token_scores=found[TOKEN_SCORES][row, : len(tokens)].tolist(),
                        attention=attention.tolist(),
                    )
                )
            return aligned

        return in_length_order(len(sentences), lambda i: len(sentences[i]), run, batch_size)
