"""`ModelSearch`: the searches of `keras_transformer.decoding` over a
`Transformer`, in token ids."""

import functools

import tensorflow as tf

from keras_transformer.decoding import OutputControls
from keras_transformer.decoding import SearchRequest
from keras_transformer.decoding import strategies
from keras_transformer.decoding.controls import NEG_INF
from keras_transformer.tokenizer import Tokenizer
from keras_transformer_runtime import validation
from keras_transformer_runtime.runners.settings import DecodingSettings


class ModelSearch:
    """Searches, scores and aligns token ids with a `Transformer`: what a
    `Translator` runs between tokenizing and detokenizing.

    The searches take source ids `(batch, source_len)` (padded with the
    model's `pad_id`, each ending with EOS) and decode with `settings`:
    each sentence may have up to its source length + `max_extra_length`
    tokens (at most `max_output_length`), only the tokenizer's ids come
    out, and outputs are framed with the tokenizer's BOS and EOS.

    Args:
        model: a `Transformer`.
        tokenizer: its tokenizer (for its special ids and vocabulary size;
            a tokenizer whose `pad_id` differs from the model's, or whose
            vocabulary the model does not cover, is refused).
        settings: the `DecodingSettings`, lengths resolved.
        alignment_layer: the decoder layer whose cross-attention aligns
            (`None`: the model's `alignment_layer`).

    `strategy` is the search the settings choose (`decoding.strategies`):
    what `best_ids` runs.

    Example:

    >>> search = ModelSearch(model, tokenizer, DecodingSettings(max_input_length=256,
    ...                      max_output_length=256), alignment_layer=None)
    >>> ids, scores = search.search_ids(source_ids, num_results=1)
    """

    def __init__(self, model, tokenizer, settings, alignment_layer):
        self.model = model
        self.tokenizer = tokenizer
        self.settings = settings
        if alignment_layer is None:
            alignment_layer = model.alignment_layer
        layers = len(model.decoder.stack)
        validation.check_index(layers, "decoder layers", alignment_layer=alignment_layer)
        self.alignment_layer = alignment_layer
        self.pad_id = model.pad_id
        self.bos_id, self.eos_id = _framing_ids(tokenizer, model.pad_id)
        self.output_vocab_size = _output_vocab_size(model, tokenizer)
        self.strategy = strategies.from_settings(settings)
        self.controls = OutputControls(
            min_length=settings.min_length,
            no_repeat_ngram_size=settings.no_repeat_ngram_size,
            repetition_penalty=settings.repetition_penalty,
        )

    def _request(self, source, options, aligned=False):
        """The `SearchRequest` of `source` ids; `options` holds the
        optional `"prefix"` ids, a request's `"max_output_length"` (<= 0:
        the translator's), and `"banned"` phrases (a `decoding.BannedPhrases`);
        with `aligned`, its cache keeps `alignment_layer`'s attention for
        the request's `alignment`."""
        model = self.model
        source_mask = tf.not_equal(source, self.pad_id)
        source_lengths = tf.reduce_sum(tf.cast(source_mask, tf.int32), axis=1)
        most = self.settings.max_output_length
        if "max_output_length" in options:
            asked = tf.cast(options["max_output_length"], tf.int32)
            most = tf.where(asked > 0, tf.minimum(asked, most), most)
        limits = tf.minimum(source_lengths + self.settings.max_extra_length, most)
        if "prefix" in options:
            prefix_lengths = tf.reduce_sum(
                tf.cast(tf.not_equal(options["prefix"], self.pad_id), tf.int32), axis=1
            )
            limits = tf.minimum(
                tf.maximum(limits, prefix_lengths + 1), self.settings.max_output_length
            )
        max_length = tf.maximum(tf.reduce_max(tf.concat([limits, [1]], 0)), 1)
        encoder_output = model.encode(source, training=False)
        layer = self.alignment_layer if aligned else None

        def tokens_to_logits(token_ids, cache, index):
            logits, cache = model.decode_step(token_ids, cache, index, alignment_layer=layer)
            return self._tokenizer_ids_only(logits[:, -1]), cache

        return SearchRequest(
            tokens_to_logits,
            # Empty: the searches grow it (`resize_cache`).
            model.init_cache(encoder_output, source_mask, max_length=0, aligned=aligned),
            tf.shape(source)[0],
            max_length,
            length_limits=limits,
            bos_id=self.bos_id,
            eos_id=self.eos_id,
            pad_id=self.pad_id,
            controls=self.controls,
            prefix=options.get("prefix"),
            resize_cache=model.resize_cache,
            banned=options.get("banned"),
            alignment=_alignment_rows if aligned else None,
        )

    @functools.cached_property
    def word_starts(self):
        """NumPy bool `(model's target vocabulary,)`: the tokenizer's
        `word_starts`, after which a constraint phrase counts as met
        (`ConstrainedBeamSearch.word_starts`); None where the tokenizer
        knows no word starts, and a phrase counts wherever it occurs."""
        return self.tokenizer.word_starts(self.model.target_vocab_size)

    def best_ids(self, source, seed, options=None):
        """One output per sentence from the settings' strategy (`seed` is
        read by sampling only), as `search_ids` returns it for
        `num_results=1`; `options` as for `search_ids`, but constraints."""
        return self.strategy.outputs(self._request(source, dict(options or {})), seed)

    def aligned_best_ids(self, source, seed, options=None):
        """`best_ids`' output with, from the same search, each token's
        log-probability and its attention over the source (the mean over
        heads of decoder layer `alignment_layer`'s cross-attention): a
        `decoding.AlignedOutputs` of one output per sentence.

        Example:

        >>> found = search.aligned_best_ids(source_ids, seed=0)
        >>> found.attention[:, 0].shape  # (batch, length, source_len)
        """
        request = self._request(source, dict(options or {}), aligned=True)
        return self.strategy.aligned_outputs(request, seed)

    def search_ids(self, source, num_results, options=None):
        """Beam search (greedy for `beam_size=1`) of `source` ids: the
        `num_results` best outputs per sentence, best first, `(ids (batch,
        num_results, length), scores (batch, num_results))`, the scores
        length-penalized log-probabilities. `options` holds the optional
        `"prefix"` ids, a request's `"max_output_length"` (<= 0: the
        translator's), `"constraints"` (`decoding.phrases`' layout) and
        `"banned"` phrases (a `decoding.BannedPhrases`); with constraints, beam search runs
        even for `beam_size=1`."""
        options = dict(options or {})
        request = self._request(source, options)
        if options.get("constraints") is None:
            return strategies.beam_from_settings(self.settings, num_results).outputs(request)
        search = strategies.constrained_from_settings(
            self.settings, options["constraints"], self.word_starts, num_results
        )
        return search.outputs(request)

    def aligned_search_ids(self, source, options=None):
        """`search_ids`' best output (`num_results=1`, no constraints) with
        each token's log-probability and attention from the same search,
        as `aligned_best_ids` gives them: what the exported searches
        return."""
        request = self._request(source, dict(options or {}), aligned=True)
        return strategies.beam_from_settings(self.settings).aligned_outputs(request)

    def sample_ids(self, source, seed, options=None):
        """One output per sentence drawn at random with `seed` (the
        settings' temperature, top-k and top-p), as `search_ids` returns it
        for `num_results=1`."""
        request = self._request(source, dict(options or {}))
        return strategies.sampling_from_settings(self.settings).outputs(request, seed)

    def token_log_probs(self, source, target):
        """The log-probability `(batch, target_len)` of each token of
        `target` (ids ending with EOS, padded) given `source` and the
        tokens before it: one teacher-forced forward pass; 0 at padding."""
        logits = self.model((source, self._decoder_input(target)), training=False)
        return self._chosen(logits, target)

    def _decoder_input(self, target):
        """BOS, then `target` but its last position (teacher forcing)."""
        bos = tf.fill([tf.shape(target)[0], 1], tf.constant(self.bos_id, target.dtype))
        return tf.concat([bos, target[:, :-1]], 1)

    def _chosen(self, logits, target):
        """The log-probability of each token of `target` under `logits`;
        0 at padding."""
        log_probs = tf.nn.log_softmax(self._tokenizer_ids_only(logits))
        chosen = tf.gather(log_probs, target, batch_dims=2)
        return tf.where(tf.not_equal(target, self.pad_id), chosen, 0.0)

    @staticmethod
    def alignments(attention, target_mask):
        """For each target token of `attention`, the source position
        `(batch, target_len)` it attends to most, -1 where `target_mask` is
        false (padding)."""
        best = tf.argmax(attention, axis=-1, output_type=tf.int32)
        return tf.where(target_mask, best, -1)

    def _tokenizer_ids_only(self, logits):
        """`logits` `(..., model vocabulary)` with the ids the tokenizer lacks
        forbidden, so that no output fails to detokenize."""
        vocab = tf.shape(logits)[-1]
        if self.output_vocab_size == self.model.target_vocab_size:
            return logits
        known = tf.range(vocab) < self.output_vocab_size
        return tf.where(known[None, :], logits, tf.constant(NEG_INF, logits.dtype))


def _alignment_rows(per_hypothesis):
    """The `alignment` of `Transformer.init_cache(aligned=True)`'s
    per-hypothesis part: `(rows, positions, source_len)`."""
    return per_hypothesis["alignment"][:, 0]


def _framing_ids(tokenizer, pad_id):
    """The tokenizer's `(bos_id, eos_id)`, checked against the model's pad."""
    if not isinstance(tokenizer, Tokenizer):
        raise ValueError(
            "`tokenizer` must be a keras_transformer.tokenization.Tokenizer (a "
            "SentencePieceTokenizer, a MarianTokenizer or a subclass of your own). "
            f"Received: tokenizer={tokenizer!r}"
        )
    if tokenizer.pad_id not in (pad_id, -1):
        raise ValueError(
            "The tokenizer and the model must pad with the same id: the tokenizer's "
            f"pad_id is {tokenizer.pad_id}. Received: model.pad_id={pad_id}"
        )
    for name, value in (("bos_id", tokenizer.bos_id), ("eos_id", tokenizer.eos_id)):
        if value < 0 or value == pad_id:
            raise ValueError(
                f"The tokenizer must define `{name}` (a piece other than padding). "
                f"Received: tokenizer.{name}={value}"
            )
    return tokenizer.bos_id, tokenizer.eos_id


def _output_vocab_size(model, tokenizer):
    """How many target ids the translator may emit: the tokenizer's
    vocabulary, which the model's must cover."""
    vocab_size = tokenizer.vocab_size
    if vocab_size is None:
        return model.target_vocab_size
    sizes = {"source": model.source_vocab_size, "target": model.target_vocab_size}
    for side, model_size in sizes.items():
        if model_size < vocab_size:
            raise ValueError(
                f"The model's {side} vocabulary ({model_size:,} ids) is smaller than the "
                f"tokenizer's ({vocab_size:,}): the tokenizer's ids would not fit. Received: "
                f"model.{side}_vocab_size={model_size}, tokenizer.vocab_size={vocab_size}"
            )
    return vocab_size


def resolved_settings(settings, changes, model):
    """The translator's `DecodingSettings`: `settings` (default the
    defaults) with `changes`, and the lengths the model decides filled in."""
    if settings is None:
        settings = DecodingSettings()
    if not isinstance(settings, DecodingSettings):
        raise ValueError(
            "`settings` must be a keras_transformer.DecodingSettings (or None for the "
            f"defaults). Received: settings={settings!r}"
        )
    settings = settings.replace(**changes)
    if settings.max_output_length is not None and settings.max_output_length > model.max_length:
        raise ValueError(
            f"`max_output_length` must be at most the model's max_length "
            f"({model.max_length}). Received: max_output_length={settings.max_output_length}"
        )
    return settings.replace(
        max_input_length=settings.max_input_length or model.max_length,
        max_output_length=settings.max_output_length or model.max_length,
    )
