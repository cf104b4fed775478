"""`Translator`: text in, text out, tokenization and search in the graph."""

import random
import warnings

import numpy as np
import tensorflow as tf

from keras_transformer import _backend
from keras_transformer.decoding import constrained
from keras_transformer.decoding.banned import NO_TOKEN
from keras_transformer.translator.model_search import ModelSearch
from keras_transformer.translator.model_search import resolved_settings
from keras_transformer.translator.outputs import aligned_translations
from keras_transformer.translator.outputs import target_scores
from keras_transformer.translator.signatures import BANNED
from keras_transformer.translator.signatures import CONSTRAINTS
from keras_transformer.translator.signatures import MAX_OUTPUT_LENGTH
from keras_transformer.translator.signatures import PHRASE_SEPARATOR
from keras_transformer.translator.signatures import PREFIX
from keras_transformer.translator.signatures import SEED
from keras_transformer.translator.signatures import SOURCE
from keras_transformer.translator.signatures import TARGET
from keras_transformer.translator.signatures import TEXT
from keras_transformer_runtime import _validation
from keras_transformer_runtime.batching import in_length_order
from keras_transformer_runtime.results import length_penalty


class Translator(tf.Module):
    """Translates batches of raw strings with a `Transformer` and a tokenizer.

    Tokenizes in the graph, appends EOS, encodes once, runs cached beam
    search (greedy when `beam_size=1`) with the length penalty
    `((5 + len) / 6)^alpha` and a limit of source length +
    `max_extra_length` tokens per sentence, and detokenizes. With
    `search="sample"` it draws each token at random instead
    (`decoding.sample`: `temperature`, `top_k`, `top_p`), for
    back-translation or diverse outputs; `sample_with_scores` samples
    whatever `search` is. Sources longer than `max_input_length` tokens
    (EOS included) are truncated to it; outputs never exceed the model's
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
        settings: the `DecodingSettings` (default: the paper's beam search,
            `DecodingSettings()`). Their `max_input_length` and
            `max_output_length` default to the model's `max_length`, which
            `max_output_length` may not exceed; a request may ask for fewer
            output tokens (`translate_with_options`).
        jit_compile: compile the search with XLA.
        alignment_layer: the decoder layer whose cross-attention (the mean
            over its heads) aligns output tokens to source tokens in
            `translate_with_alignments` (default -1, the last).
        name: the module's name.
        **changes: settings that replace those of `settings`, by name
            (`beam_size=1`, `alpha=0.8`, ...).

    Attributes:
        settings: the `DecodingSettings` in use, with the lengths resolved.

    Example:

    >>> translator = Translator(model, tokenizer, beam_size=1)
    >>> translator.translate(["A dog runs."])
    ['Ein Hund läuft.']
    """

    def __init__(
        self,
        model,
        tokenizer,
        settings=None,
        jit_compile=False,
        alignment_layer=-1,
        name=None,
        **changes,
    ):
        _backend.require_tensorflow("Translator", "tf.function searches and the TF Text tokenizer")
        super().__init__(name=name)
        self.settings = resolved_settings(settings, changes, model)
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
        self.model = model
        self.tokenizer = tokenizer
        self.search = ModelSearch(model, tokenizer, self.settings, alignment_layer)
        self.pad_id, self.bos_id, self.eos_id = model.pad_id, self.search.bos_id, self.search.eos_id
        self.jit_compile = jit_compile
        self._search = tf.function(self.search.search_ids, jit_compile=jit_compile)
        self._sample = tf.function(self.search.sample_ids, jit_compile=jit_compile)
        self._score = tf.function(self.search.token_log_probs, jit_compile=jit_compile)

    def without_xla(self):
        """This translator with its search as a plain graph (`jit_compile`
        off), as exports and stock TF Serving need it."""
        return Translator(
            self.model, self.tokenizer, self.settings, alignment_layer=self.alignment_layer
        )

    def encode_text(self, text):
        """Strings `(batch,)` to padded source ids `(batch, length)`, each
        truncated to `max_input_length` tokens and ending with EOS."""
        return self._ids_ending_with_eos(
            self.tokenizer.tokenize(text), self.settings.max_input_length
        )

    def encode_target(self, text):
        """Target strings `(batch,)` to padded ids `(batch, length)`, each
        truncated to the model's `max_length` tokens and ending with EOS,
        as a search would output them."""
        return self._ids_ending_with_eos(
            self.tokenizer.tokenize_target(text), self.model.max_length
        )

    def _ids_ending_with_eos(self, ids, max_tokens):
        ids = ids[:, : max_tokens - 1]
        eos = tf.fill([ids.nrows(), 1], tf.constant(self.eos_id, ids.dtype))
        return tf.concat([ids, eos], axis=1).to_tensor(self.pad_id)

    def encode_prefix(self, text):
        """Target prefixes `(batch,)` to padded ids `(batch, length)`, no
        EOS, at most `max_output_length - 1` tokens (room for EOS)."""
        ids = self.tokenizer.tokenize_target(text)[:, : self.settings.max_output_length - 1]
        return ids.to_tensor(self.pad_id)

    def _best_ids(self, source, seed, options=None):
        """One output per sentence from the translator's `search`: `(ids
        (batch, 1, length), scores (batch, 1))`; `seed` is used by sampling
        only."""
        if self.settings.search == "sample":
            return self._sample(source, seed, options)
        return self._search(source, 1, options)

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

    @tf.function(input_signature=[TEXT, CONSTRAINTS, BANNED])
    def translate_with_constraints(self, text, constraints, banned):
        """Like `translate_with_scores`, with terminology: each sentence's
        `constraints` (a string of phrases joined by `|||`, `""` for
        none) must appear in its translation, and its `banned` phrases
        must not. Phrases are matched as target pieces, each segmented as
        the tokenizer segments it alone, contiguous; a constraint is met
        only where a word's start, punctuation or the end follows it
        (`"Hund"` is met by "Hund." but not by "Hunde"). Constraints use
        beam search with dynamic beam allocation (`decoding.constrained`);
        banned phrases apply as the output controls do.

        Returns:
            `{"translation", "score"` (the model's length-penalized
            log-probability)`, "constraints_met": (batch,)` bool (false
            where the length limit came first: the translation is then the
            best of those that meet the most)`}`.
        """
        phrases = {"constraints": self.encode_phrases(constraints)}
        phrases["banned"] = self.encode_phrases(banned)
        ids, scores = self._search(self.encode_text(text), 1, phrases)
        starts = self.search.word_starts
        closing = None if starts is None else constrained.closing_tokens(starts, self.eos_id)
        missing = constrained.missing(phrases["constraints"], ids, closing)[:, 0]
        return {
            "translation": self.tokenizer.detokenize(ids[:, 0]),
            "score": scores[:, 0],
            "constraints_met": tf.equal(missing, 0),
        }

    def encode_phrases(self, phrases):
        """Strings `(batch,)` of phrases joined by `|||` to the int32
        `(batch, phrases, length)` the searches take (`decoding.banned`:
        target ids right-aligned, padded on the left with -1)."""
        split = tf.strings.strip(tf.strings.split(phrases, PHRASE_SEPARATOR))  # (batch, None)
        pieces = self.tokenizer.tokenize_target(split.flat_values)  # (phrases, None)
        ids = tf.RaggedTensor.from_row_splits(pieces, split.row_splits, validate=False)
        left = ids.to_tensor(NO_TOKEN)  # (batch, phrases, length), left-aligned
        lengths = tf.cast(ids.row_lengths(axis=2).to_tensor(0), tf.int32)
        width = tf.shape(left)[2]
        index = tf.range(width) - (width - lengths[:, :, None])
        right = tf.where(index >= 0, tf.gather(left, tf.maximum(index, 0), batch_dims=2), NO_TOKEN)
        # At least one column, for a batch without phrases.
        return tf.concat([tf.fill(tf.concat([tf.shape(right)[:2], [1]], 0), NO_TOKEN), right], 2)

    @tf.function(input_signature=[TEXT])
    def translate_with_alignments(self, text):
        """`translate_with_scores`'s outputs, and for each output token the
        source token it attends to most (the mean over heads of decoder
        layer `alignment_layer`'s cross-attention, as Marian and
        CTranslate2 align) and its log-probability: `{"translation",
        "score", "alignments": (batch, target_len)` int32 source positions
        (-1 after EOS)`, "token_scores": (batch, target_len)` float32 (as
        `score_targets` gives them for the translation; 0 after EOS)`,
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
            "alignments": self.search.alignments(source, target)[:, :-1],
            "token_scores": self.search.token_log_probs(source, ids),
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
        num_results = self.settings.beam_size
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
            "score": log_prob / length_penalty(tf.cast(lengths, tf.float32), self.settings.alpha),
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
        constraints=None,
        banned=None,
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
        a list of `AlignedTranslation` (see `translate_with_alignments`):
        each translation with its pieces, their alignments and their
        log-probabilities (`token_scores`, and `word_scores` per word, for
        spotting the words to check). `constraints` and `banned` (per
        sentence, a list of phrases) put phrases into its translation and
        keep others out (see `translate_with_constraints`; beam or greedy
        search, no other option); a `RuntimeWarning` names the sentences
        whose constraints the length limit left unmet.

        Example:

        >>> translator.translate(["A dog runs."], prefixes=["Ein Hund"])
        ['Ein Hund rennt.']
        >>> translator.translate(["A dog runs."], constraints=[["Hund", "rennt"]])
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
        if return_alignments and (with_options or self.settings.search == "sample"):
            raise ValueError(
                "`return_alignments` works with beam search (or greedy) and no prefixes or "
                f"max_output_length. Received: search={self.settings.search!r}, "
                f"prefixes={'given' if prefixes is not None else None}, "
                f"max_output_length={max_output_length}"
            )
        terms = {"constraints": constraints, "banned": banned}
        terms = {name: _phrase_lists(name, value, len(sentences)) for name, value in terms.items()}
        self._check_constraints(terms["constraints"])
        with_terms = constraints is not None or banned is not None
        if with_terms and (with_options or return_alignments or self.settings.search == "sample"):
            raise ValueError(
                "`constraints` and `banned` work with beam search (or greedy) and no prefixes, "
                "max_output_length or return_alignments. Received: "
                f"search={self.settings.search!r}, prefixes="
                f"{'given' if prefixes is not None else None}, max_output_length="
                f"{max_output_length}, return_alignments={return_alignments}"
            )
        unmet = []
        if seed is not None and self.settings.search != "sample":
            raise ValueError(
                f"`seed` is for search='sample'; this translator's search is "
                f"{self.settings.search!r}. Received: seed={seed!r}"
            )
        if seed is not None:
            _validation.check_non_negative_int(seed=seed)
        if self.settings.search == "sample" and seed is None:
            seed = random.SystemRandom().randrange(2**62)
        batch_seeds = np.random.SeedSequence(seed or 0)

        def run(chunk):
            text = tf.constant([sentences[i] for i in chunk], tf.string)
            batch_seed = 0
            if self.settings.search == "sample":
                batch_seed = int(batch_seeds.spawn(1)[0].generate_state(1, np.uint64)[0]) >> 2
            if return_alignments:
                return aligned_translations(self.translate_with_alignments(text))
            if with_terms:
                joined = {
                    name: tf.constant(
                        [f" {PHRASE_SEPARATOR} ".join(phrases[i]) for i in chunk], tf.string
                    )
                    for name, phrases in terms.items()
                }
                result = self.translate_with_constraints(text, **joined)
                met = result["constraints_met"].numpy()
                unmet.extend(i for i, ok in zip(chunk, met, strict=True) if not ok)
                outputs = result["translation"]
                return [text.decode("utf-8", errors="replace") for text in outputs.numpy()]
            if with_options:
                prefix = [prefixes[i] for i in chunk] if prefixes is not None else [""] * len(chunk)
                outputs = self._options_with_seed(
                    text,
                    tf.constant(prefix, tf.string),
                    tf.constant(max_output_length or 0, tf.int32),
                    tf.constant(batch_seed, tf.int64),
                )["translation"]
            elif self.settings.search == "sample":
                outputs = self.sample_with_scores(text, batch_seed)["translation"]
            else:
                outputs = self(text)
            return [text.decode("utf-8", errors="replace") for text in outputs.numpy()]

        translations = in_length_order(
            len(sentences), lambda i: len(sentences[i]), run, batch_size, progress
        )
        if unmet:
            warnings.warn(
                f"The length limit came before every constraint of {len(unmet)} sentence(s) "
                f"(sentences {sorted(unmet)[:10]}): their translations meet as many as they "
                "could.",
                RuntimeWarning,
                stacklevel=2,
            )
        return translations

    def _check_constraints(self, constraints):
        """Refuses a constraint (per sentence, a list of phrases) that
        would be met by something else: one with no piece (empty or
        spaces: met by anything), and one with characters the target
        vocabulary cannot write (they would come out as unknown pieces,
        which translations drop)."""
        phrases = sorted({phrase for sentence in constraints for phrase in sentence})
        for phrase in phrases:
            if not phrase.strip():
                raise ValueError(
                    "Each of `constraints` must hold at least one character other than "
                    f"spaces. Received: {phrase!r}"
                )
        unk_id = getattr(self.tokenizer, "unk_id", None)
        if not phrases or unk_id is None:
            return
        pieces = self.tokenizer.tokenize_target(tf.constant(phrases)).to_list()
        for phrase, ids in zip(phrases, pieces, strict=True):
            if unk_id in ids:
                raise ValueError(
                    "Each of `constraints` must be written with the target vocabulary: "
                    f"{phrase!r} holds characters it lacks, which would come out as unknown "
                    f"pieces. Received: {phrase!r}"
                )

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
            return target_scores(outputs)

        def size(i):
            return len(sources[i]) + len(targets[i])

        return in_length_order(len(sources), size, run, batch_size, progress)


def _phrase_lists(name, phrases, count):
    """`phrases` (per sentence, a list of phrase strings, or `None`) as
    `count` lists, checked; `None` gives empty ones."""
    if phrases is None:
        return [[] for _ in range(count)]
    phrases = [list(p) for p in phrases]
    if len(phrases) != count:
        raise ValueError(
            f"`{name}` must hold one list of phrases per sentence. Received: "
            f"{len(phrases)} lists for {count} sentences"
        )
    for sentence in phrases:
        for phrase in sentence:
            if not isinstance(phrase, str) or PHRASE_SEPARATOR in phrase:
                raise ValueError(
                    f"Each of `{name}` must be a string without {PHRASE_SEPARATOR!r}. "
                    f"Received: {phrase!r}"
                )
    return phrases
