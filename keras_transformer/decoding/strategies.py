"""The search a translator's `DecodingSettings` ask for, chosen once."""

from keras_transformer.decoding.beam_search import BeamSearch
from keras_transformer.decoding.constrained_beam_search import ConstrainedBeamSearch
from keras_transformer.decoding.greedy import GreedySearch
from keras_transformer.decoding.sampling import Sampling


def from_settings(settings):
    """The strategy of `settings` (`DecodingSettings`): `Sampling` for
    `search="sample"`, else `beam_from_settings`'s.

    Example:

    >>> from_settings(DecodingSettings(search="sample", top_p=0.9))
    Sampling(alpha=0.6, temperature=1.0, top_k=0, top_p=0.9)
    """
    if settings.search == "sample":
        return sampling_from_settings(settings)
    return beam_from_settings(settings)


def beam_from_settings(settings, num_results=1):
    """`BeamSearch` with the settings' beam and alpha, keeping
    `num_results`; `GreedySearch` for a beam of 1 (exactly the same
    outputs, without the beam's bookkeeping)."""
    if settings.beam_size == 1 and num_results == 1:
        return GreedySearch(alpha=settings.alpha)
    return BeamSearch(beam_size=settings.beam_size, alpha=settings.alpha, num_results=num_results)


def constrained_from_settings(settings, constraints, word_starts, num_results=1):
    """`ConstrainedBeamSearch` with the settings' beam and alpha (a beam
    search even for a beam of 1)."""
    return ConstrainedBeamSearch(
        beam_size=settings.beam_size,
        alpha=settings.alpha,
        num_results=num_results,
        constraints=constraints,
        word_starts=word_starts,
    )


def sampling_from_settings(settings):
    """`Sampling` with the settings' temperature, top-k and top-p."""
    return Sampling(
        temperature=settings.temperature,
        top_k=settings.top_k,
        top_p=settings.top_p,
        alpha=settings.alpha,
    )
