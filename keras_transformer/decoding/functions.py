"""The searches as functions of a next-token function and a cache: one
`SearchRequest` each, run by its strategy."""

from keras_transformer import _backend
from keras_transformer.decoding.beam_search import BeamSearch
from keras_transformer.decoding.constrained_beam_search import ConstrainedBeamSearch
from keras_transformer.decoding.greedy import GreedySearch
from keras_transformer.decoding.sampling import Sampling
from keras_transformer.decoding.search import SearchRequest


@_backend.tensorflow_only("decoding.greedy_search", "a tf.while_loop")
def greedy_search(tokens_to_logits, cache, batch_size, max_length, **options):
    """`GreedySearch` of one `SearchRequest`.

    Args:
        tokens_to_logits, cache, batch_size, max_length: the request's.
        **options: its optional fields (`length_limits`, `bos_id`,
            `eos_id`, `pad_id`, `controls`, `prefix`, `resize_cache`,
            `banned`), as `SearchRequest` describes them.

    Returns:
        `(ids, scores)`: int32 `(batch, max_length)` and the float32 sum of
        the log-probabilities of each sentence's tokens `(batch,)`.

    Example:

    >>> ids, scores = greedy_search(step_fn, cache, batch_size=2, max_length=20)
    """
    request = SearchRequest(tokens_to_logits, cache, batch_size, max_length, **options)
    return GreedySearch().search(request)


@_backend.tensorflow_only("decoding.sample", "a tf.while_loop")
def sample(
    tokens_to_logits,
    cache,
    batch_size,
    max_length,
    seed,
    temperature=1.0,
    top_k=0,
    top_p=1.0,
    **options,
):
    """`Sampling` of one `SearchRequest` with `seed`.

    Args:
        tokens_to_logits, cache, batch_size, max_length: the request's.
        seed: an integer or int32/int64 scalar tensor.
        temperature, top_k, top_p: as for `Sampling`.
        **options: the request's optional fields, as for `greedy_search`.

    Returns:
        `(ids, scores)` as for `greedy_search`; the scores are the model's
        log-probabilities of the drawn tokens (before temperature and
        filtering, after `controls`).

    Example:

    >>> ids, scores = sample(step_fn, cache, 2, 20, seed=7, top_p=0.9)
    """
    request = SearchRequest(tokens_to_logits, cache, batch_size, max_length, **options)
    return Sampling(temperature=temperature, top_k=top_k, top_p=top_p).search(request, seed)


@_backend.tensorflow_only("decoding.beam_search", "a tf.while_loop")
def beam_search(
    tokens_to_logits,
    cache,
    batch_size,
    max_length,
    beam_size=4,
    alpha=0.6,
    num_results=1,
    constraints=None,
    word_starts=None,
    **options,
):
    """`BeamSearch` of one `SearchRequest`, or `ConstrainedBeamSearch`
    given `constraints`.

    Args:
        tokens_to_logits, cache, batch_size, max_length: the request's.
        beam_size, alpha, num_results: as for `BeamSearch`.
        constraints: optional phrases every output must contain, and
        word_starts: where they may end, as for `ConstrainedBeamSearch`.
        **options: the request's optional fields, as for `greedy_search`.

    Returns:
        `(ids, scores)`: int32 `(batch, num_results, max_length)` and
        float32 length-penalized scores `(batch, num_results)`.

    Example:

    >>> ids, scores = beam_search(step_fn, cache, batch_size=2, max_length=20)
    >>> best = ids[:, 0]
    """
    strategy = dict(beam_size=beam_size, alpha=alpha, num_results=num_results)
    request = SearchRequest(tokens_to_logits, cache, batch_size, max_length, **options)
    if constraints is None:
        return BeamSearch(**strategy).search(request)
    return ConstrainedBeamSearch(
        **strategy, constraints=constraints, word_starts=word_starts
    ).search(request)
