"""What every search decodes (`SearchRequest`) and what every strategy
does with it (`SearchStrategy`): the searches are objects around the one
loop of `decoding.loop`, chosen once (`decoding.strategies`)."""

import abc
import dataclasses
from typing import Any
from typing import Callable
from typing import NamedTuple

import tensorflow as tf

from keras_transformer.decoding.loop import searched_sentences
from keras_transformer.decoding.loop import sentence_limits
from keras_transformer.decoding.output_rules import with_prefix
from keras_transformer.special_ids import BOS_ID
from keras_transformer.special_ids import EOS_ID
from keras_transformer.special_ids import PAD_ID
from keras_transformer_runtime.runners.results import length_penalty


@dataclasses.dataclass(frozen=True, eq=False)
class SearchRequest:
    """One search's inputs, the same whichever strategy runs it.

    Attributes:
        tokens_to_logits: the next-token function (`decoding`'s module
            docstring).
        cache: the initial cache, batch `batch_size` (two parts for beam
            search and for `resize_cache`).
        batch_size: number of sentences (int or scalar tensor).
        max_length: size of the output buffer, the most tokens any sentence
            may get (EOS included).
        length_limits: optional per-sentence limits `(batch,)`, each at
            most `max_length`.
        bos_id: the first decoder input.
        eos_id: the token that ends a sentence.
        pad_id: what follows EOS in the output.
        controls: optional `OutputControls` (a minimum length, no repeated
            n-grams, a repetition penalty); the scores are then
            log-probabilities under the controlled distribution.
        prefix: optional int32 `(batch, prefix_len)`, padded with `pad_id`:
            each sentence's output starts with its prefix (forced, scored,
            not subject to `controls`), and the search goes on from there;
            a sentence's limit is raised to leave room for EOS after it.
        resize_cache: optional `resize_cache(per_hypothesis, length)`: the
            cache's `"per_hypothesis"` part holding `length` positions
            (the first ones kept, new ones empty), e.g.
            `Transformer.resize_cache`. With it the search grows the cache
            in `CACHE_SEGMENTS` steps up to `max_length`, so that early
            steps attend to, write and move a shorter cache; `cache` must
            then have the two parts, and may hold any number of positions.
        banned: optional `decoding.BannedPhrases`: texts (or id
            sequences) no output spells, whichever ids spell them. They
            apply as the `controls` do (a prefix is exempt).
        alignment: optional `alignment(per_hypothesis)`: from the cache's
            per-hypothesis part (which `tokens_to_logits` writes it into at
            each position it decodes), float32 `(rows, positions,
            source_len)`: what each position's token attends to in the
            source, e.g. the `"alignment"` of `Transformer.init_cache(
            aligned=True)`. The strategies' `aligned_outputs` return it for
            each output token, from the search itself (no second pass).

    Example:

    >>> request = SearchRequest(step_fn, cache, batch_size=2, max_length=20)
    >>> ids, scores = BeamSearch(beam_size=4).search(request)
    """

    tokens_to_logits: Callable
    cache: Any
    batch_size: Any
    max_length: Any
    length_limits: Any = None
    bos_id: int = BOS_ID
    eos_id: int = EOS_ID
    pad_id: int = PAD_ID
    controls: Any = None
    prefix: Any = None
    resize_cache: Callable = None
    banned: Any = None
    alignment: Callable = None

    def prefix_and_limits(self):
        """`(prefix, limits)`: the prefix as the searches force it (or
        None) and each sentence's limit `(batch,)`, capped by the buffer
        and raised to leave room for EOS after its prefix."""
        limits = sentence_limits(self.batch_size, self.max_length, self.length_limits)
        return with_prefix(self.prefix, limits, self.batch_size, self.max_length, self.pad_id)

    def sentences(self, limits, prefix):
        """The per-sentence inputs, which leave the loop with their rows."""
        return searched_sentences(self.batch_size, limits, prefix, self.banned)

    def banned_rows(self, sentences):
        """The banned phrases of the rows whose per-sentence inputs are
        `sentences` (`sentences()`'s, of these rows), or None."""
        return None if self.banned is None else self.banned.with_rows(sentences["banned"])

    def controlled(self):
        """Whether any output control or banned phrase applies."""
        return (self.controls is not None and self.controls.active) or self.banned is not None


class AlignedOutputs(NamedTuple):
    """A strategy's outputs with what each output token came from
    (`SearchStrategy.aligned_outputs`): `n` outputs per sentence, best
    first, `length` tokens each (padded after EOS)."""

    ids: tf.Tensor  # (batch, n, length) int32
    scores: tf.Tensor  # (batch, n) float32: length-penalized log-probabilities
    # (batch, n, length) float32: each token's log-probability, 0 at padding
    token_scores: tf.Tensor
    # (batch, n, length, source_len) float32: the request's `alignment`, 0 at padding
    attention: tf.Tensor


def aligned(ids, scores, token_scores, attention, pad_id):
    """`AlignedOutputs` of these, zero at the padding of `ids`."""
    written = tf.not_equal(ids, pad_id)
    return AlignedOutputs(
        ids,
        scores,
        tf.where(written, token_scores, 0.0),
        # expand_dims, not `[..., None]`: LiteRT has no strided slice of booleans.
        tf.where(tf.expand_dims(written, -1), attention, 0.0),
    )


def require_alignment(request, user):
    """Raises a `ValueError` naming `user` unless `request` aligns."""
    if request.alignment is None:
        raise ValueError(
            f"`{user}` needs a `SearchRequest` with `alignment` (what each position attends "
            "to, read from the cache). Received: alignment=None"
        )


class SearchStrategy(abc.ABC):
    """How a search chooses tokens. Every strategy turns a `SearchRequest`
    into ranked outputs (`outputs`); `draws_at_random` says whether two
    runs may differ (then `seed` decides)."""

    draws_at_random = False

    @abc.abstractmethod
    def outputs(self, request, seed=None):
        """`(ids (batch, n, length), scores (batch, n))`: each sentence's
        outputs, best first, scored by length-penalized log-probability
        (GNMT's penalty with the strategy's `alpha`), as beam search ranks
        them. `seed` (an integer scalar) is read by strategies that draw at
        random."""

    @abc.abstractmethod
    def aligned_outputs(self, request, seed=None):
        """`outputs` with each output token's log-probability and its
        attention over the source (the request's `alignment`, which it
        must have), kept by the search as it goes: an `AlignedOutputs`.

        Example:

        >>> found = BeamSearch(beam_size=4).aligned_outputs(request)
        >>> found.attention[:, 0].shape  # (batch, length, source_len)
        """


@dataclasses.dataclass(frozen=True, kw_only=True)
class OneOutput(SearchStrategy):
    """A strategy with one output per sentence, chosen token by token;
    `alpha` is only the length penalty its `outputs` report scores with."""

    alpha: float = 0.6

    @abc.abstractmethod
    def decoded(self, request, seed=None):
        """`decoding.loop.one_token_at_a_time`'s dict of the outputs."""

    def search(self, request, seed=None):
        """`(ids (batch, max_length), log_probs (batch,))`."""
        found = self.decoded(request, seed)
        return found["ids"], found["log_probs"]

    def outputs(self, request, seed=None):
        return self._ranked(request, *self.search(request, seed))

    def aligned_outputs(self, request, seed=None):
        require_alignment(request, "aligned_outputs")
        found = self.decoded(request, seed)
        ids, scores = self._ranked(request, found["ids"], found["log_probs"])
        return aligned(
            ids, scores, found["token_scores"][:, None], found["attention"][:, None], request.pad_id
        )

    def _ranked(self, request, ids, log_probs):
        """`outputs`' `(ids (batch, 1, length), scores (batch, 1))`."""
        lengths = tf.reduce_sum(tf.cast(tf.not_equal(ids, request.pad_id), tf.int32), axis=1)
        penalty = length_penalty(tf.cast(lengths, tf.float32), self.alpha)
        return ids[:, None], (log_probs / penalty)[:, None]
