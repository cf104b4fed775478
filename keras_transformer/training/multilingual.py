"""Several parallel corpora, one training run: each corpus translates into
its own target language, whose tag (`>>fr<<`, `keras_transformer_runtime.
languages`) is written before every source, and the corpora are mixed by
temperature sampling before `make_batches` tokenizes and batches them.

Temperature sampling (Arivazhagan et al., 2019): a pair is drawn from
corpus `i` with probability `p_i ∝ size_i^(1/T)`. `T = 1` samples in
proportion to the sizes (each pair equally often); a larger `T` flattens
the mixture towards uniform, so that a small corpus is seen more often
than its share and a large one less.
"""

import dataclasses

import numpy as np

from keras_transformer import _backend
from keras_transformer.training import mixing
from keras_transformer_runtime import validation
from keras_transformer_runtime.text import languages

DEFAULT_TEMPERATURE = 5.0


@dataclasses.dataclass(frozen=True)
class MixedCorpora:
    """What `mix_corpora` returns: the mixed pairs and their weights.
    `make_batches` takes it as its `pairs`, and keeps the weights in its
    `TokenBatches`.

    Attributes:
        pairs: the dataset of `(">>lang<< source", target)` strings.
        weights: the `{target_lang: probability}` each pair is drawn with.
    """

    pairs: object
    weights: dict


def mixing_weights(sizes, temperature=DEFAULT_TEMPERATURE):
    """`{language: probability}` of drawing a pair from each corpus:
    `size^(1/temperature)`, normalized.

    Args:
        sizes: `{language: number of pairs}`.
        temperature: `T > 0`: 1 is proportional to the sizes, larger
            flattens towards uniform, below 1 sharpens towards the largest
            corpus.

    Example:

    >>> mixing_weights({"de": 4_500_000, "cs": 150_000}, temperature=5)
    {'de': 0.6640..., 'cs': 0.3359...}
    """
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise ValueError(
            f"`temperature` must be a positive number. Received: temperature={temperature!r}"
        )
    if not temperature > 0:
        raise ValueError(
            f"`temperature` must be a positive number. Received: temperature={temperature!r}"
        )
    if not sizes:
        raise ValueError("`sizes` must name at least one corpus. Received: sizes={}")
    for code, size in sizes.items():
        validation.check_positive_int(**{f"sizes[{code!r}]": size})
    scaled = np.array([float(size) for size in sizes.values()]) ** (1.0 / temperature)
    return dict(zip(sizes, (scaled / scaled.sum()).tolist(), strict=True))


def tagged_pairs(pairs, target_lang):
    """`pairs` (a dataset of `(source, target)` strings) with each source
    asking for `target_lang`: `">>fr<< " + source`, as every runner tags
    a request (`TargetLanguages.tagged`)."""
    languages.check_codes([target_lang])
    return mixing.prefixed_sources(pairs, languages.tag(target_lang))


@_backend.tensorflow_only("training.mix_corpora", "tf.data")
def mix_corpora(corpora, sizes, temperature=DEFAULT_TEMPERATURE, seed=None, shuffle_buffer=100_000):
    """One dataset of tagged pairs from several corpora, mixed by
    temperature sampling, for `make_batches`.

    Each corpus is shuffled and repeated on its own; each pair of the
    mixture is drawn from corpus `i` with probability
    `mixing_weights(sizes, temperature)[i]`, and one pass of the mixture
    is `sum(sizes)` draws (so `make_batches`' passes, `repeat` and
    `pair_counts` mean what they mean for one corpus).

    Args:
        corpora: `{target_lang: pairs}`, each a dataset of `(source,
            target)` strings (`text_pairs_from_files`).
        sizes: `{target_lang: number of pairs}` for the same languages.
        temperature: the sampling temperature `T` (see the module).
        seed: the seed of the draws and of each corpus's shuffle; `None`
            draws afresh in every process (what a resumed run wants).
        shuffle_buffer: pairs held by each corpus's shuffle buffer (0: no
            shuffle).

    Returns:
        A `MixedCorpora`: `pairs`, a dataset of `(">>lang<< source",
        target)` strings, and the `weights` used.

    Example:

    >>> pairs = mix_corpora(
    ...     {"de": text_pairs_from_files("train.en", "train.de"),
    ...      "fr": text_pairs_from_files("train.en", "train.fr")},
    ...     sizes={"de": 29000, "fr": 29000}, temperature=5)
    >>> batches = make_batches(pairs, tokenizer, batch_tokens=4096, repeat=True)
    >>> batches.mixing_weights
    {'de': 0.5, 'fr': 0.5}
    """
    if not isinstance(corpora, dict) or not corpora:
        raise ValueError(
            "`corpora` must be a dict of at least one {target_lang: pairs}. "
            f"Received: corpora={corpora!r}"
        )
    if not isinstance(sizes, dict) or set(sizes) != set(corpora):
        raise ValueError(
            "`sizes` must give the number of pairs of each corpus, by the same languages. "
            f"Received: corpora for {sorted(corpora)}, sizes={sizes!r}"
        )
    codes = list(corpora)
    weights = mixing_weights({code: sizes[code] for code in codes}, temperature)
    mixed = mixing.mix_pairs(
        {code: tagged_pairs(corpora[code], code) for code in codes},
        weights,
        sum(sizes.values()),
        seed=seed,
        shuffle_buffer=shuffle_buffer,
    )
    return MixedCorpora(mixed, weights)
