"""`TranslatorGraph`: a `Translator`'s TensorFlow graph functions, each
named after the SavedModel signature that serves it.

Each function takes string tensors and returns a dict of tensors, as TF
Serving calls it; `keras_transformer.export.export_saved_model` serves
them under the same names (with the request limits checked first), and
`keras_transformer_runtime.runners.results` parses their outputs. `Translator`
calls them from Python.
"""

import functools

import tensorflow as tf

from keras_transformer.decoding import terminology
from keras_transformer.decoding.phrases import NO_TOKEN
from keras_transformer.translator import documents
from keras_transformer.translator.search_rows import DEFAULT_MAX_ROWS
from keras_transformer.translator.search_rows import searched_in_chunks
from keras_transformer.translator.signatures import BANNED
from keras_transformer.translator.signatures import CONSTRAINTS
from keras_transformer.translator.signatures import IDS
from keras_transformer.translator.signatures import MAX_OUTPUT_LENGTH
from keras_transformer.translator.signatures import PHRASE_SEPARATOR
from keras_transformer.translator.signatures import PREFIX
from keras_transformer.translator.signatures import SEED
from keras_transformer.translator.signatures import SOURCE
from keras_transformer.translator.signatures import TARGET
from keras_transformer.translator.signatures import TEXT
from keras_transformer.translator.signatures import UNWRITABLE_CONSTRAINT
from keras_transformer.translator.spellings import PhraseSpellings
from keras_transformer_runtime.runners.results import length_penalty


class TranslatorGraph(tf.Module):
    """Tokenization, search and detokenization of raw strings in one
    graph per signature (see `Translator` for the decoding).

    Args:
        model_search: the `ModelSearch` (model, tokenizer, settings).
        jit_compile: compile the searches with XLA.
        name: the module's name.
        max_rows: the most sentences one search takes: the functions
            that split texts (`serving_default`, `n_best`,
            `translate_with_options`, `sample`) search theirs in chunks of
            it, so that a text of thousands of sentences costs the memory
            of `max_rows` (default 256); None: all at once. The SavedModel
            export sets it to its `max_batch_size`. Sampling draws each
            chunk with its own seed: the same seed, texts and `max_rows`
            give the same samples.

    Example:

    >>> graph = TranslatorGraph(ModelSearch(model, tokenizer, settings, -1))
    >>> graph.serving_default(tf.constant(["A dog runs."]))["translation"]
    <tf.Tensor: shape=(1,), dtype=string, numpy=array([b'Ein Hund l\\xc3\\xa4uft.'])>
    """

    def __init__(self, model_search, jit_compile=False, name=None, max_rows=DEFAULT_MAX_ROWS):
        super().__init__(name=name)
        self.max_rows = max_rows
        search = self.model_search = model_search
        self.model, self.tokenizer, self.settings = search.model, search.tokenizer, search.settings
        self.pad_id, self.bos_id, self.eos_id = search.pad_id, search.bos_id, search.eos_id
        self.jit_compile = jit_compile
        self.spellings = PhraseSpellings(self.tokenizer, self.model.target_vocab_size)
        # Every graph function here is plain TensorFlow (its loops are
        # tf.while_loop): without autograph's rewrite of each Python function
        # it calls, Keras's included, tracing an export took 38.5 s, not 92 s.
        graph = functools.partial(tf.function, jit_compile=jit_compile, autograph=False)
        self.best_ids = graph(search.best_ids)
        self.aligned_best_ids = graph(search.aligned_best_ids)
        self.search_ids = graph(search.search_ids)
        self.sample_ids = graph(search.sample_ids)
        self.token_log_probs = graph(search.token_log_probs)

    def signature_functions(self):
        """The graph functions by the name of the signature each serves."""
        return {
            "serving_default": self.serving_default,
            "n_best": self.n_best,
            "translate_with_options": self.translate_with_options,
            "translate_with_alignments": self.translate_with_alignments,
            "translate_with_constraints": self.translate_with_constraints,
            "sample": self.sample,
            "score": self.score,
            "tokenize": self.tokenize,
            "detokenize": self.detokenize,
        }

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

    def encode_phrases(self, phrases):
        """Strings `(batch,)` of phrases joined by `|||` to the int32
        `(batch, phrases, length)` the constrained search takes
        (`decoding.phrases`: target ids right-aligned, padded on the left
        with -1)."""
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

    def _pieces(self, ids):
        """Padded ids to their pieces, `""` at padding."""
        return tf.where(tf.not_equal(ids, self.pad_id), self.tokenizer.id_to_string(ids), "")

    def _searched(self, parts, search, seed, per_row=()):
        """`search(source, seed, *per_row)` over the source ids of
        `parts.pieces`, `max_rows` at a time (`searched_in_chunks`)."""
        return searched_in_chunks(
            search,
            self.encode_text(parts.pieces),
            seed,
            per_row,
            max_rows=self.max_rows,
            width=self.settings.max_output_length,
            pad_id=self.pad_id,
        )

    def _best(self, ids, scores):
        return {"translation": self.tokenizer.detokenize(ids[:, 0]), "score": scores[:, 0]}

    def split(self, text):
        """Texts `(batch,)` as the pieces to translate (`documents.split`:
        sentences with `split_sentences`, pieces of whole words of those
        over `max_input_length`)."""
        limit = self.settings.max_input_length - 1
        return documents.split(text, self.tokenizer, self.settings.split_sentences, limit)

    def _encode_whole(self, text):
        """Each text taken as one sentence, tokenized once: its source ids
        (as `encode_text` gives them) and bool `(batch,)`, true where it
        was over `max_input_length` tokens (EOS included) and cut."""
        tokens = self.tokenizer.tokenize(text)
        limit = self.settings.max_input_length
        return self._ids_ending_with_eos(tokens, limit), tokens.row_lengths() > limit - 1

    def _joined_best(self, parts, ids, scores):
        """The best of each piece's hypotheses joined into its text's:
        `{"translation", "score"` (the sum of its pieces')`, "truncated"}`."""
        return {
            "translation": parts.joined(self.tokenizer.detokenize(ids[:, 0])),
            "score": parts.summed(scores[:, 0]),
            "truncated": parts.over_limit,
        }

    @tf.function(autograph=False, input_signature=[TEXT])
    def serving_default(self, text):
        """`{"translation": (batch,) strings, "score": (batch,) float32,
        "truncated": (batch,) bool}`: each text translated sentence by
        sentence (`split`; a text of one sentence as itself) and joined
        with its own separators, the score being the sum of its
        sentences' length-penalized log-probabilities; `truncated` marks
        the texts with a sentence over `max_input_length`, translated in
        pieces of whole words (a word alone over it cut). With
        `search="sample"`, a sample drawn with seed 0 (see `sample`)."""
        parts = self.split(text)
        return self._joined_best(parts, *self._searched(parts, self.best_ids, seed=0))

    @tf.function(autograph=False, input_signature=[TEXT])
    def n_best(self, text):
        """All `beam_size` finished hypotheses, best first:
        `{"translations": (batch, beam) strings, "scores": (batch, beam),
        "truncated": (batch,) bool}`; a text of several sentences (see
        `serving_default`) joins its sentences' k-th best into its k-th."""
        parts = self.split(text)
        ids, scores = self._searched(
            parts, lambda source, seed: self.search_ids(source, self.settings.beam_size), seed=0
        )
        flat = tf.reshape(ids, [-1, tf.shape(ids)[-1]])
        texts = tf.reshape(self.tokenizer.detokenize(flat), tf.shape(scores))
        beams = range(self.settings.beam_size)
        return {
            "translations": tf.stack([parts.joined(texts[:, k]) for k in beams], axis=1),
            "scores": tf.stack([parts.summed(scores[:, k]) for k in beams], axis=1),
            "truncated": parts.over_limit,
        }

    @tf.function(autograph=False, input_signature=[TEXT, PREFIX, MAX_OUTPUT_LENGTH])
    def translate_with_options(self, text, prefix, max_output_length):
        """Like `serving_default`, with per-request options: each
        translation starts with its `prefix` (strings `(batch,)`, `""` for
        none; forced, then the search goes on; its log-probability counts
        in the score; a text of several sentences: its first sentence's),
        and has at most `max_output_length` tokens, EOS included, per
        sentence (<= 0, or more than the translator's: the
        translator's)."""
        return self.options_with_seed(text, prefix, max_output_length, tf.constant(0, tf.int64))

    @tf.function(autograph=False, input_signature=[TEXT, PREFIX, MAX_OUTPUT_LENGTH, SEED])
    def options_with_seed(self, text, prefix, max_output_length, seed):
        """`translate_with_options` with sampling's `seed`."""
        parts = self.split(text)

        def best(source, seed, prefix):
            options = {"prefix": prefix, "max_output_length": max_output_length}
            return self.best_ids(source, seed, options)

        prefix = self.encode_prefix(parts.firsts(prefix, ""))
        return self._joined_best(parts, *self._searched(parts, best, seed, [prefix]))

    @tf.function(autograph=False, input_signature=[TEXT, CONSTRAINTS, BANNED])
    def translate_with_constraints(self, text, constraints, banned):
        """Like `serving_default`, with terminology: each sentence's
        `constraints` (a string of phrases joined by `|||`, `""` for
        none) must appear in its translation, and its `banned` phrases
        must not; a constraint with characters the target vocabulary
        cannot write (which would come out as unknown pieces that
        translations drop, and count as met) fails the request with
        `InvalidArgument` naming it. Phrases are matched as target pieces, each segmented as
        the tokenizer segments it alone, contiguous; a constraint is met
        only where a word's start, punctuation or the end follows it
        (`"Hund"` is met by "Hund." but not by "Hunde"). Constraints use
        beam search with dynamic beam allocation (`ConstrainedBeamSearch`).
        A banned phrase is banned as its text: no run of output pieces
        spells it, whichever pieces (`PhraseSpellings`); it applies as the
        output controls do.

        Returns:
            `{"translation", "score"` (the model's length-penalized
            log-probability)`, "constraints_met": (batch,)` bool (false
            where the length limit came first: the translation is then the
            best of those that meet the most)`, "truncated": (batch,)` bool
            (the text is taken as one sentence and cut at
            `max_input_length`: true where it was longer)`}`.
        """
        phrases = {"constraints": self.encode_phrases(self._writable(constraints))}
        # A banned phrase longer than any output can never occur: dropped.
        phrases["banned"] = self.spellings.banned(banned, self.settings.max_output_length - 1)
        source, truncated = self._encode_whole(text)
        ids, scores = self.search_ids(source, 1, phrases)
        starts = self.model_search.word_starts
        closing = None if starts is None else terminology.closing_tokens(starts, self.eos_id)
        missing = terminology.missing(phrases["constraints"], ids, closing)[:, 0]
        return {
            **self._best(ids, scores),
            "constraints_met": tf.equal(missing, 0),
            "truncated": truncated,
        }

    def _writable(self, constraints):
        """`constraints` (strings of phrases joined by `|||`), after an
        assertion that the target vocabulary writes every phrase: none
        holds the unknown piece (a tokenizer without one writes all)."""
        unk_id = self.tokenizer.unk_id
        if unk_id < 0:
            return constraints
        split = tf.strings.strip(tf.strings.split(constraints, PHRASE_SEPARATOR))
        pieces = self.tokenizer.tokenize_target(split.flat_values)
        unknown = tf.reduce_any(tf.equal(pieces, unk_id), axis=1)
        check = tf.debugging.Assert(
            tf.logical_not(tf.reduce_any(unknown)),
            [
                UNWRITABLE_CONSTRAINT,
                tf.strings.reduce_join(
                    tf.boolean_mask(split.flat_values, unknown), separator=f" {PHRASE_SEPARATOR} "
                ),
            ],
        )
        with tf.control_dependencies([check]):
            return tf.identity(constraints)

    @tf.function(autograph=False, input_signature=[TEXT])
    def translate_with_alignments(self, text):
        """`serving_default`'s outputs, and for each output token the
        source token it attends to most (the mean over heads of decoder
        layer `alignment_layer`'s cross-attention, as Marian and
        CTranslate2 align) and its log-probability: `{"translation",
        "score", "alignments": (batch, target_len)` int32 source positions
        (-1 after EOS)`, "attention": (batch, target_len, source_len)`
        float32 (that mean, whose argmax `alignments` is; 0 after EOS)`,
        "token_scores": (batch, target_len)` float32 (each
        piece the search wrote, given the source and the pieces before it,
        as the search scored it, under the output controls if any: they
        sum to the hypothesis's log-probability; `score` of the
        translation's text scores the tokenizer's segmentation of it, the
        same numbers only where the pieces are the same; 0 after EOS)`,
        "target_tokens": (batch, target_len), "source_tokens": (batch,
        source_len)` (pieces, `""` at padding)`, "truncated": (batch,)}`
        (each text is one sentence, cut at `max_input_length`: true where
        it was longer). The search keeps the attention and the scores as it
        goes (`ModelSearch.aligned_best_ids`): no second pass."""
        source, truncated = self._encode_whole(text)
        found = self.aligned_best_ids(source, tf.constant(0, tf.int64))
        ids = found.ids[:, 0]
        width = tf.reduce_max(tf.reduce_sum(tf.cast(tf.not_equal(ids, self.pad_id), tf.int32), 1))
        ids, attention = ids[:, :width], found.attention[:, 0, :width]
        return {
            "translation": self.tokenizer.detokenize(ids),
            "score": found.scores[:, 0],
            "alignments": self.model_search.alignments(attention, tf.not_equal(ids, self.pad_id)),
            "attention": attention,
            "token_scores": found.token_scores[:, 0, :width],
            "target_tokens": self._pieces(ids),
            "source_tokens": self._pieces(source),
            "truncated": truncated,
        }

    @tf.function(autograph=False, input_signature=[TEXT, SEED])
    def sample(self, text, seed):
        """One translation per sentence drawn at random (`temperature`,
        `top_k`, `top_p`), the same for the same `seed` and batch:
        `{"translation": (batch,) strings, "score": (batch,) float32}`, the
        score being the model's length-penalized log-probability of it; a
        text of several sentences as `serving_default` joins them, and
        `truncated` likewise."""
        parts = self.split(text)
        return self._joined_best(parts, *self._searched(parts, self.sample_ids, seed))

    @tf.function(autograph=False, input_signature=[SOURCE, TARGET])
    def score(self, source, target):
        """How likely the model finds each given `target` for its `source`
        (forced decoding), one teacher-forced pass, no search.

        Targets are tokenized as `encode_target` does (EOS appended,
        truncated to the model's `max_length` tokens). The probabilities
        are the model's over the tokenizer's vocabulary, without the
        searches' length limits.

        Returns:
            `{"log_prob": (batch,), "score": (batch,)` (length-penalized,
            as `serving_default` reports it)`, "token_scores": (batch,
            target_len)` (0 after EOS)`, "target_tokens": (batch,
            target_len)` strings (the pieces, EOS's last, `""` after it)`}`.
        """
        tf.debugging.assert_equal(
            tf.size(source), tf.size(target), message="`source` and `target` differ in length."
        )
        target_ids = self.encode_target(target)
        token_scores = self.token_log_probs(self.encode_text(source), target_ids)
        is_token = tf.not_equal(target_ids, self.pad_id)
        lengths = tf.reduce_sum(tf.cast(is_token, tf.int32), axis=1)
        log_prob = tf.reduce_sum(token_scores, axis=1)
        return {
            "log_prob": log_prob,
            "score": log_prob / length_penalty(tf.cast(lengths, tf.float32), self.settings.alpha),
            "token_scores": token_scores,
            "target_tokens": self._pieces(target_ids),
        }

    @tf.function(autograph=False, input_signature=[TEXT])
    def tokenize(self, text):
        """`{"ids": (batch, length)` source ids, padded`, "lengths":
        (batch,)}`, without EOS or truncation (a client counts tokens
        against a request limit with it)."""
        ids = self.tokenizer.tokenize(text)
        return {"ids": ids.to_tensor(self.pad_id), "lengths": tf.cast(ids.row_lengths(), tf.int32)}

    @tf.function(autograph=False, input_signature=[IDS])
    def detokenize(self, ids):
        """`{"text": (batch,)}` of target ids `(batch, length)`."""
        return {"text": self.tokenizer.detokenize(ids)}
