"""`Translator`: text in, text out, tokenization and search in the graph."""

import dataclasses
import random
import sys
import time

import numpy as np
import tensorflow as tf

from keras_transformer import _backend
from keras_transformer import _validation
from keras_transformer import special_ids
from keras_transformer.decoding import OutputControls
from keras_transformer.decoding import beam_search
from keras_transformer.decoding import greedy_search
from keras_transformer.decoding import length_penalty
from keras_transformer.decoding import sample
from keras_transformer.decoding.search import NEG_INF
from keras_transformer.decoding.search import check_sampling

TEXT = tf.TensorSpec([None], tf.string, name="text")
SOURCE = tf.TensorSpec([None], tf.string, name="source")
TARGET = tf.TensorSpec([None], tf.string, name="target")
SEED = tf.TensorSpec([], tf.int64, name="seed")
PREFIX = tf.TensorSpec([None], tf.string, name="prefix")
MAX_OUTPUT_LENGTH = tf.TensorSpec([], tf.int32, name="max_output_length")
SEARCHES = ("beam", "sample")


@dataclasses.dataclass(frozen=True)
class TargetScore:
    """How likely the model finds one given target for its source
    (`Translator.score`).

    Attributes:
        log_prob: the sum of the log-probabilities of the target's tokens,
            EOS included.
        score: `log_prob / ((5 + len(tokens)) / 6) ** alpha`, the
            length-penalized score the searches rank by and
            `translate_with_scores` reports.
        tokens: the target's SentencePiece pieces, ending with EOS's.
        token_scores: the log-probability of each piece given the source
            and the pieces before it.
    """

    log_prob: float
    score: float
    tokens: list
    token_scores: list


@dataclasses.dataclass(frozen=True)
class AlignedTranslation:
    """A translation with, for each of its tokens, the source token it
    attends to most (`Translator.translate(..., return_alignments=True)`).

    Attributes:
        translation: the translated text.
        target_tokens: its SentencePiece pieces, EOS's last.
        source_tokens: the source's pieces, EOS's last.
        alignments: for each target token, the index in `source_tokens` of
            its most attended source token.
    """

    translation: str
    target_tokens: list
    source_tokens: list
    alignments: list


class Translator(tf.Module):
    """Translates batches of raw strings with a `Transformer` and a tokenizer.

    Tokenizes in the graph, appends EOS, encodes once, runs cached beam
    search (greedy when `beam_size=1`) with the length penalty
    `((5 + len) / 6)^alpha` and a limit of source length +
    `max_extra_length` tokens per sentence, and detokenizes. With
    `search="sample"` it draws each token at random instead
    (`decoding.sample`: `temperature`, `top_k`, `top_p`), for
    back-translation or diverse outputs; `sample_with_scores` samples
    whatever `search` is. Sources longer
    than `max_input_length` tokens (EOS included; default the model's
    `max_length`) are truncated to it; outputs never exceed the model's
    `max_length`. Empty strings and empty batches are fine, and the output
    has one string per input, in order.

    Special ids: sequences are padded with the model's `pad_id`; BOS and
    EOS are the tokenizer's (`tokenizer.bos_id`, `tokenizer.eos_id`, or
    `keras_transformer.special_ids` for a tokenizer without them). A
    tokenizer whose `pad_id` differs from the model's is refused.

    This is the object `keras_transformer.export` saves for TF Serving: its
    `tf.function`s take a string vector and trace once.

    Args:
        model: a `Transformer`.
        tokenizer: a `SentencePieceTokenizer` (anything with in-graph
            `tokenize` and `detokenize`).
        beam_size: hypotheses kept per sentence (4 in the paper).
        alpha: length-penalty exponent (0.6 in the paper).
        max_extra_length: output tokens allowed beyond the source length
            (50 in the paper).
        max_input_length: source tokens kept (default `model.max_length`).
        jit_compile: compile the search with XLA.
        search: what `translate`, `__call__` and `translate_with_scores`
            run: `"beam"` (beam search, greedy for `beam_size=1`) or
            `"sample"`.
        temperature: sampling temperature (the logits are divided by it).
        top_k: sample among the `top_k` most likely tokens (0: all).
        top_p: then among the fewest most likely tokens whose
            probabilities sum to `top_p` (1.0: all).
        min_length: EOS is forbidden before this many output tokens.
        no_repeat_ngram_size: `n > 0` forbids repeating any n-gram of the
            output (0: off).
        repetition_penalty: `>= 1`, makes tokens already in the output less
            likely (1.0: off); see `decoding.OutputControls`.
        max_output_length: the most output tokens, EOS included (default
            and at most the model's `max_length`); a request may ask for
            fewer (`translate_with_options`).
        alignment_layer: the decoder layer whose cross-attention (the mean
            over its heads) aligns output tokens to source tokens in
            `translate_with_alignments` (default -1, the last).

    Example:

    >>> translator = Translator(model, tokenizer)
    >>> translator.translate(["A dog runs."])
    ['Ein Hund läuft.']
    """

    def __init__(
        self,
        model,
        tokenizer,
        beam_size=4,
        alpha=0.6,
        max_extra_length=50,
        max_input_length=None,
        jit_compile=False,
        search="beam",
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        min_length=0,
        no_repeat_ngram_size=0,
        repetition_penalty=1.0,
        max_output_length=None,
        alignment_layer=-1,
        name=None,
    ):
        _backend.require_tensorflow("Translator", "tf.function searches and the TF Text tokenizer")
        super().__init__(name=name)
        _validation.check_choice(SEARCHES, search=search)
        check_sampling(temperature=temperature, top_k=top_k, top_p=top_p)
        _validation.check_positive_int(beam_size=beam_size)
        _validation.check_positive_int(
            allow_none=True, max_input_length=max_input_length, max_output_length=max_output_length
        )
        if max_output_length is not None and max_output_length > model.max_length:
            raise ValueError(
                f"`max_output_length` must be at most the model's max_length "
                f"({model.max_length}). Received: max_output_length={max_output_length}"
            )
        layers = len(model.decoder.stack)
        if (
            not isinstance(alignment_layer, int)
            or isinstance(alignment_layer, bool)
            or not -layers <= alignment_layer < layers
        ):
            raise ValueError(
                f"`alignment_layer` must index one of the model's {layers} decoder layers "
                f"({-layers} to {layers - 1}). Received: alignment_layer={alignment_layer!r}"
            )
        self.alignment_layer = alignment_layer
        self.controls = OutputControls(
            min_length=min_length,
            no_repeat_ngram_size=no_repeat_ngram_size,
            repetition_penalty=repetition_penalty,
        )
        _validation.check_non_negative_int(max_extra_length=max_extra_length)
        _validation.check_non_negative(alpha=alpha)
        self.model = model
        self.tokenizer = tokenizer
        self.pad_id = model.pad_id
        self.bos_id, self.eos_id = _framing_ids(tokenizer, model.pad_id)
        self.output_vocab_size = _output_vocab_size(model, tokenizer)
        self.beam_size = beam_size
        self.alpha = float(alpha)
        self.max_extra_length = max_extra_length
        self.max_input_length = max_input_length or model.max_length
        self.max_output_length = max_output_length or model.max_length
        self.jit_compile = jit_compile
        self.search = search
        self.temperature = float(temperature)
        self.top_k = top_k
        self.top_p = float(top_p)
        self._search = tf.function(self._search_ids, jit_compile=jit_compile)
        self._sample = tf.function(self._sample_ids, jit_compile=jit_compile)
        self._score = tf.function(self._token_log_probs, jit_compile=jit_compile)

    def without_xla(self):
        """This translator with its search as a plain graph (`jit_compile`
        off), as exports and stock TF Serving need it."""
        return Translator(
            self.model,
            self.tokenizer,
            beam_size=self.beam_size,
            alpha=self.alpha,
            max_extra_length=self.max_extra_length,
            max_input_length=self.max_input_length,
            jit_compile=False,
            search=self.search,
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            max_output_length=self.max_output_length,
            alignment_layer=self.alignment_layer,
            **self._control_settings(),
        )

    def _control_settings(self):
        return {
            "min_length": self.controls.min_length,
            "no_repeat_ngram_size": self.controls.no_repeat_ngram_size,
            "repetition_penalty": float(self.controls.repetition_penalty),
        }

    def settings(self):
        """The decoding settings, as plain values."""
        return {
            "beam_size": self.beam_size,
            "alpha": self.alpha,
            "max_extra_length": self.max_extra_length,
            "max_input_length": self.max_input_length,
            "max_output_length": self.max_output_length,
            "search": self.search,
            "temperature": self.temperature,
            "top_k": self.top_k,
            "top_p": self.top_p,
            **self._control_settings(),
        }

    def encode_text(self, text):
        """Strings `(batch,)` to padded source ids `(batch, length)`, each
        truncated to `max_input_length` tokens and ending with EOS."""
        return self._ids_ending_with_eos(text, self.max_input_length)

    def encode_target(self, text):
        """Target strings `(batch,)` to padded ids `(batch, length)`, each
        truncated to the model's `max_length` tokens and ending with EOS,
        as a search would output them."""
        return self._ids_ending_with_eos(text, self.model.max_length)

    def _ids_ending_with_eos(self, text, max_tokens):
        ids = self.tokenizer.tokenize(text)[:, : max_tokens - 1]
        eos = tf.fill([ids.nrows(), 1], tf.constant(self.eos_id, ids.dtype))
        return tf.concat([ids, eos], axis=1).to_tensor(self.pad_id)

    def encode_prefix(self, text):
        """Target prefixes `(batch,)` to padded ids `(batch, length)`, no
        EOS, at most `max_output_length - 1` tokens (room for EOS)."""
        ids = self.tokenizer.tokenize(text)[:, : self.max_output_length - 1]
        return ids.to_tensor(self.pad_id)

    def _start(self, source, options):
        """What every search needs for `source` ids: `{"batch_size",
        "limits"` (per sentence)`, "max_length"` (the buffer)`, "cache",
        "tokens_to_logits", "options"}`; `options` holds the optional
        `"prefix"` ids and a request's `"max_output_length"` (<= 0: the
        translator's)."""
        model = self.model
        options = dict(options or {})
        source_mask = tf.not_equal(source, self.pad_id)
        source_lengths = tf.reduce_sum(tf.cast(source_mask, tf.int32), axis=1)
        most = self.max_output_length
        if "max_output_length" in options:
            asked = tf.cast(options["max_output_length"], tf.int32)
            most = tf.where(asked > 0, tf.minimum(asked, most), most)
        limits = tf.minimum(source_lengths + self.max_extra_length, most)
        if "prefix" in options:
            prefix_lengths = tf.reduce_sum(
                tf.cast(tf.not_equal(options["prefix"], self.pad_id), tf.int32), axis=1
            )
            limits = tf.minimum(tf.maximum(limits, prefix_lengths + 1), self.max_output_length)
        max_length = tf.maximum(tf.reduce_max(tf.concat([limits, [1]], 0)), 1)
        encoder_output = model.encode(source, training=False)

        def tokens_to_logits(token_ids, cache, index):
            logits, cache = model.decode_step(token_ids, cache, index)
            return self._tokenizer_ids_only(logits[:, -1]), cache

        return {
            "batch_size": tf.shape(source)[0],
            "limits": limits,
            "max_length": max_length,
            # Empty: the searches grow it (`resize_cache`).
            "cache": model.init_cache(encoder_output, source_mask, max_length=0),
            "tokens_to_logits": tokens_to_logits,
            "search_options": dict(
                controls=self.controls,
                prefix=options.get("prefix"),
                resize_cache=model.resize_cache,
            ),
        }

    def _special_ids(self):
        return dict(bos_id=self.bos_id, eos_id=self.eos_id, pad_id=self.pad_id)

    def _penalized(self, ids, log_probs):
        """Single-hypothesis outputs as `(ids (batch, 1, length), scores
        (batch, 1))`, the scores length-penalized like beam search's."""
        lengths = tf.reduce_sum(tf.cast(tf.not_equal(ids, self.pad_id), tf.int32), axis=1)
        return ids[:, None], (log_probs / length_penalty(lengths, self.alpha))[:, None]

    def _search_ids(self, source, num_results, options=None):
        start = self._start(source, options)
        common = (start["tokens_to_logits"], start["cache"], start["batch_size"])
        if self.beam_size == 1:
            ids, log_probs = greedy_search(
                *common,
                start["max_length"],
                length_limits=start["limits"],
                **self._special_ids(),
                **start["search_options"],
            )
            return self._penalized(ids, log_probs)
        return beam_search(
            *common,
            start["max_length"],
            beam_size=self.beam_size,
            alpha=self.alpha,
            length_limits=start["limits"],
            num_results=num_results,
            **self._special_ids(),
            **start["search_options"],
        )

    def _sample_ids(self, source, seed, options=None):
        start = self._start(source, options)
        ids, log_probs = sample(
            start["tokens_to_logits"],
            start["cache"],
            start["batch_size"],
            start["max_length"],
            seed,
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            length_limits=start["limits"],
            **self._special_ids(),
            **start["search_options"],
        )
        return self._penalized(ids, log_probs)

    def _token_log_probs(self, source, target):
        """The log-probability `(batch, target_len)` of each token of
        `target` (ids ending with EOS, padded) given `source` and the
        tokens before it: one teacher-forced forward pass; 0 at padding."""
        bos = tf.fill([tf.shape(target)[0], 1], self.bos_id)
        logits = self.model((source, tf.concat([bos, target[:, :-1]], 1)), training=False)
        log_probs = tf.nn.log_softmax(self._tokenizer_ids_only(logits))
        chosen = tf.gather(log_probs, target, batch_dims=2)
        return tf.where(tf.not_equal(target, self.pad_id), chosen, 0.0)

    def _alignments(self, source, target):
        """For each token of `target` (ids ending with EOS, padded), the
        source position `(batch, target_len)` it attends to most in the
        teacher-forced pass (the decoding pass's attention, as cached and
        full passes agree), -1 at padding."""
        bos = tf.fill([tf.shape(target)[0], 1], self.bos_id)
        decoder_input = tf.concat([bos, target[:, :-1]], 1)
        cross = self.model.attention_scores(source, decoder_input)["cross"]
        mean = tf.reduce_mean(cross[self.alignment_layer], axis=1)  # (batch, target, source)
        best = tf.argmax(mean, axis=-1, output_type=tf.int32)
        return tf.where(tf.not_equal(target, self.pad_id), best, -1)

    def _best_ids(self, source, seed, options=None):
        """One output per sentence from the translator's `search`: `(ids
        (batch, 1, length), scores (batch, 1))`; `seed` is used by sampling
        only."""
        if self.search == "sample":
            return self._sample(source, seed, options)
        return self._search(source, 1, options)

    def _tokenizer_ids_only(self, logits):
        """`logits` `(..., model vocabulary)` with the ids the tokenizer lacks
        forbidden, so that no output fails to detokenize."""
        vocab = tf.shape(logits)[-1]
        if self.output_vocab_size == self.model.target_vocab_size:
            return logits
        known = tf.range(vocab) < self.output_vocab_size
        return tf.where(known[None, :], logits, tf.constant(NEG_INF, logits.dtype))

    @tf.function(input_signature=[TEXT])
    def __call__(self, text):
        """Translations `(batch,)` of strings `(batch,)`."""
        return self.translate_with_scores(text)["translation"]

    @tf.function(input_signature=[TEXT])
    def translate_with_scores(self, text):
        """`{"translation": (batch,) strings, "score": (batch,) float32}`,
        the score being the length-penalized log-probability. With
        `search="sample"`, a sample drawn with seed 0 (see
        `sample_with_scores`)."""
        ids, scores = self._best_ids(self.encode_text(text), tf.constant(0, tf.int64))
        return {"translation": self.tokenizer.detokenize(ids[:, 0]), "score": scores[:, 0]}

    @tf.function(input_signature=[TEXT, PREFIX, MAX_OUTPUT_LENGTH])
    def translate_with_options(self, text, prefix, max_output_length):
        """Like `translate_with_scores`, with per-request options: each
        translation starts with its `prefix` (strings `(batch,)`, `""` for
        none; forced, then the search goes on; its log-probability counts
        in the score), and has at most `max_output_length` tokens, EOS
        included (<= 0, or more than the translator's: the translator's)."""
        return self._with_options(text, prefix, max_output_length, tf.constant(0, tf.int64))

    def _with_options(self, text, prefix, max_output_length, seed):
        options = {"prefix": self.encode_prefix(prefix), "max_output_length": max_output_length}
        ids, scores = self._best_ids(self.encode_text(text), seed, options)
        return {"translation": self.tokenizer.detokenize(ids[:, 0]), "score": scores[:, 0]}

    @tf.function(input_signature=[TEXT, PREFIX, MAX_OUTPUT_LENGTH, SEED])
    def _options_with_seed(self, text, prefix, max_output_length, seed):
        return self._with_options(text, prefix, max_output_length, seed)

    @tf.function(input_signature=[TEXT])
    def translate_with_alignments(self, text):
        """`translate_with_scores`'s outputs, and for each output token the
        source token it attends to most (the mean over heads of decoder
        layer `alignment_layer`'s cross-attention, as Marian and
        CTranslate2 align): `{"translation", "score", "alignments": (batch,
        target_len)` int32 source positions (-1 after EOS)`,
        "target_tokens": (batch, target_len), "source_tokens": (batch,
        source_len)}` (pieces, `""` at padding)."""
        source = self.encode_text(text)
        ids, scores = self._best_ids(source, tf.constant(0, tf.int64))
        ids = ids[:, 0]
        width = tf.reduce_max(tf.reduce_sum(tf.cast(tf.not_equal(ids, self.pad_id), tf.int32), 1))
        ids = ids[:, :width]
        # The search's buffer may end without padding: one column for EOS.
        target = tf.concat([ids, tf.fill([tf.shape(ids)[0], 1], self.pad_id)], 1)
        return {
            "translation": self.tokenizer.detokenize(ids),
            "score": scores[:, 0],
            "alignments": self._alignments(source, target)[:, :-1],
            "target_tokens": self._pieces(ids),
            "source_tokens": self._pieces(source),
        }

    def _pieces(self, ids):
        """Padded ids to their pieces, `""` at padding."""
        return tf.where(tf.not_equal(ids, self.pad_id), self.tokenizer.id_to_string(ids), "")

    @tf.function(input_signature=[TEXT, SEED])
    def sample_with_scores(self, text, seed):
        """One translation per sentence drawn at random (`temperature`,
        `top_k`, `top_p`), the same for the same `seed` and batch:
        `{"translation": (batch,) strings, "score": (batch,) float32}`, the
        score being the model's length-penalized log-probability of it."""
        ids, scores = self._sample(self.encode_text(text), seed)
        return {"translation": self.tokenizer.detokenize(ids[:, 0]), "score": scores[:, 0]}

    @tf.function(input_signature=[TEXT])
    def translate_n_best(self, text):
        """All `beam_size` finished hypotheses, best first:
        `{"translations": (batch, beam) strings, "scores": (batch, beam)}`."""
        num_results = self.beam_size
        ids, scores = self._search(self.encode_text(text), num_results)
        flat = tf.reshape(ids, [-1, tf.shape(ids)[-1]])
        texts = tf.reshape(self.tokenizer.detokenize(flat), tf.shape(scores))
        return {"translations": texts, "scores": scores}

    @tf.function(input_signature=[SOURCE, TARGET])
    def score_targets(self, source, target):
        """How likely the model finds each given `target` for its `source`
        (forced decoding), one teacher-forced pass, no search.

        Targets are tokenized as `encode_target` does (EOS appended,
        truncated to the model's `max_length` tokens). The probabilities
        are the model's over the tokenizer's vocabulary, without the
        searches' length limits.

        Returns:
            `{"log_prob": (batch,), "score": (batch,)` (length-penalized,
            as `translate_with_scores` reports it)`, "token_scores":
            (batch, target_len)` (0 after EOS)`, "target_tokens": (batch,
            target_len)` strings (the pieces, EOS's last, `""` after it)`}`.
        """
        tf.debugging.assert_equal(
            tf.size(source), tf.size(target), message="`source` and `target` differ in length."
        )
        target_ids = self.encode_target(target)
        token_scores = self._score(self.encode_text(source), target_ids)
        is_token = tf.not_equal(target_ids, self.pad_id)
        lengths = tf.reduce_sum(tf.cast(is_token, tf.int32), axis=1)
        log_prob = tf.reduce_sum(token_scores, axis=1)
        return {
            "log_prob": log_prob,
            "score": log_prob / length_penalty(lengths, self.alpha),
            "token_scores": token_scores,
            "target_tokens": self._pieces(target_ids),
        }

    def translate(
        self,
        sentences,
        batch_size=64,
        progress=None,
        seed=None,
        prefixes=None,
        max_output_length=None,
        return_alignments=False,
    ):
        """Translates a list of strings, `batch_size` at a time (sorted by
        length for little padding), and returns a list in the same order.

        With `progress` (a label), a line on stderr counts the sentences
        done and the seconds spent. With `search="sample"`, `seed` (an
        int; default a fresh random one) makes the draws repeatable: the
        same seed, sentences and `batch_size` give the same outputs.
        `prefixes` (one string per sentence, `""` for none) start the
        translations; `max_output_length` caps them (see
        `translate_with_options`). With `return_alignments`, the result is
        a list of `AlignedTranslation` (see `translate_with_alignments`).

        Example:

        >>> translator.translate(["A dog runs."], prefixes=["Ein Hund"])
        ['Ein Hund rennt.']
        """
        sentences = list(sentences)
        if prefixes is not None:
            prefixes = list(prefixes)
            if len(prefixes) != len(sentences):
                raise ValueError(
                    "`prefixes` must hold one prefix per sentence. Received: "
                    f"{len(prefixes)} prefixes for {len(sentences)} sentences"
                )
        if max_output_length is not None:
            _validation.check_positive_int(max_output_length=max_output_length)
        with_options = prefixes is not None or max_output_length is not None
        if return_alignments and (with_options or self.search == "sample"):
            raise ValueError(
                "`return_alignments` works with beam search (or greedy) and no prefixes or "
                f"max_output_length. Received: search={self.search!r}, "
                f"prefixes={'given' if prefixes is not None else None}, "
                f"max_output_length={max_output_length}"
            )
        if seed is not None and self.search != "sample":
            raise ValueError(
                f"`seed` is for search='sample'; this translator's search is "
                f"{self.search!r}. Received: seed={seed!r}"
            )
        if self.search == "sample" and seed is None:
            seed = random.SystemRandom().randrange(2**62)
        batch_seeds = np.random.SeedSequence(seed or 0)

        def run(chunk):
            text = tf.constant([sentences[i] for i in chunk], tf.string)
            batch_seed = 0
            if self.search == "sample":
                batch_seed = int(batch_seeds.spawn(1)[0].generate_state(1, np.uint64)[0]) >> 2
            if return_alignments:
                return _aligned(self.translate_with_alignments(text))
            if with_options:
                prefix = [prefixes[i] for i in chunk] if prefixes is not None else [""] * len(chunk)
                outputs = self._options_with_seed(
                    text,
                    tf.constant(prefix, tf.string),
                    tf.constant(max_output_length or 0, tf.int32),
                    tf.constant(batch_seed, tf.int64),
                )["translation"]
            elif self.search == "sample":
                outputs = self.sample_with_scores(text, batch_seed)["translation"]
            else:
                outputs = self(text)
            return [text.decode("utf-8", errors="replace") for text in outputs.numpy()]

        return _in_batches(len(sentences), lambda i: len(sentences[i]), run, batch_size, progress)

    def score(self, sources, targets, batch_size=64, progress=None):
        """Scores each target as a translation of its source (forced
        decoding), `batch_size` pairs at a time; see `score_targets`.

        Returns:
            A list of `TargetScore`, one per pair, in order.

        Example:

        >>> [s.log_prob for s in translator.score(["A dog."], ["Ein Hund."])]
        [-1.93]
        """
        sources, targets = list(sources), list(targets)
        if len(sources) != len(targets):
            raise ValueError(
                "`sources` and `targets` must hold one target per source. Received: "
                f"{len(sources)} sources and {len(targets)} targets"
            )

        def run(chunk):
            outputs = self.score_targets(
                tf.constant([sources[i] for i in chunk], tf.string),
                tf.constant([targets[i] for i in chunk], tf.string),
            )
            outputs = {key: value.numpy() for key, value in outputs.items()}
            results = []
            for row in range(len(chunk)):
                length = int((outputs["target_tokens"][row] != b"").sum())
                results.append(
                    TargetScore(
                        log_prob=float(outputs["log_prob"][row]),
                        score=float(outputs["score"][row]),
                        tokens=[
                            piece.decode("utf-8", errors="replace")
                            for piece in outputs["target_tokens"][row, :length]
                        ],
                        token_scores=outputs["token_scores"][row, :length].tolist(),
                    )
                )
            return results

        def size(i):
            return len(sources[i]) + len(targets[i])

        return _in_batches(len(sources), size, run, batch_size, progress)


def _aligned(outputs):
    """`translate_with_alignments`' outputs as `AlignedTranslation`s."""
    outputs = {key: value.numpy() for key, value in outputs.items()}

    def strings(row):
        return [piece.decode("utf-8", errors="replace") for piece in row if piece]

    results = []
    for row, translation in enumerate(outputs["translation"]):
        target_tokens = strings(outputs["target_tokens"][row])
        results.append(
            AlignedTranslation(
                translation=translation.decode("utf-8", errors="replace"),
                target_tokens=target_tokens,
                source_tokens=strings(outputs["source_tokens"][row]),
                alignments=outputs["alignments"][row, : len(target_tokens)].tolist(),
            )
        )
    return results


def _in_batches(count, size, run, batch_size, progress):
    """`run(indices)` over `range(count)` in batches of similar `size(i)`,
    its results put back in order; with `progress` (a label), a line on
    stderr counts the items done and the seconds spent."""
    _validation.check_positive_int(batch_size=batch_size)
    order = sorted(range(count), key=size)
    results = [None] * count
    start_time = time.time()
    for start in range(0, count, batch_size):
        chunk = order[start : start + batch_size]
        for i, result in zip(chunk, run(chunk), strict=True):
            results[i] = result
        if progress:
            print(
                f"\r{progress}: {start + len(chunk)}/{count} sentences, "
                f"{time.time() - start_time:.0f}s",
                end="",
                file=sys.stderr,
                flush=True,
            )
    if progress:
        print(file=sys.stderr)
    return results


def _framing_ids(tokenizer, pad_id):
    """The tokenizer's `(bos_id, eos_id)`, checked against the model's pad."""
    tokenizer_pad = getattr(tokenizer, "pad_id", pad_id)
    if tokenizer_pad not in (pad_id, -1):
        raise ValueError(
            "The tokenizer and the model must pad with the same id: the tokenizer's "
            f"pad_id is {tokenizer_pad}. Received: model.pad_id={pad_id}"
        )
    framing = []
    for name, default in (("bos_id", special_ids.BOS_ID), ("eos_id", special_ids.EOS_ID)):
        value = getattr(tokenizer, name, default)
        if value < 0 or value == pad_id:
            raise ValueError(
                f"The tokenizer must define `{name}` (a piece other than padding). "
                f"Received: tokenizer.{name}={value}"
            )
        framing.append(value)
    return tuple(framing)


def _output_vocab_size(model, tokenizer):
    """How many target ids the translator may emit: the tokenizer's
    vocabulary, which the model's must cover."""
    vocab_size = getattr(tokenizer, "vocab_size", None)
    if vocab_size is None:
        return model.target_vocab_size
    for side in ("source", "target"):
        model_size = getattr(model, f"{side}_vocab_size")
        if model_size < vocab_size:
            raise ValueError(
                f"The model's {side} vocabulary ({model_size:,} ids) is smaller than the "
                f"tokenizer's ({vocab_size:,}): the tokenizer's ids would not fit. Received: "
                f"model.{side}_vocab_size={model_size}, tokenizer.vocab_size={vocab_size}"
            )
    return vocab_size
