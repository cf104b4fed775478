"""eflomal's word links (`align_words`) on a corpus whose links are known."""

import importlib.util

import numpy as np
import pytest

from keras_transformer_runtime.text.word_links import align_words
from keras_transformer_runtime.text.word_links import link_pairs


@pytest.mark.skipif(importlib.util.find_spec("eflomal") is None, reason="needs eflomal")
def test_eflomal_finds_the_links_of_a_corpus_whose_links_are_known():
    """Sentences of a 40-word dictionary translated word for word into
    shuffled order: the intersected links are the true ones, and most of
    the true ones are found.

    eflomal seeds its samplers from /dev/urandom: over 24 runs of this
    corpus the recall was 0.928-0.995 (a run loses all links of a word or
    a few, about 2.5% each), the precision 1.0 in every run."""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]
    sources, targets, truth = [], [], []
    for _ in range(3000):
        chosen = rng.choice(40, size=rng.integers(3, 8), replace=False)
        order = rng.permutation(len(chosen))
        sources.append(" ".join(words[i] for i in chosen))
        targets.append(" ".join(f"T{words[chosen[k]]}" for k in order))
        truth.append({(int(k), j) for j, k in enumerate(order)})
    links = align_words(sources, targets)
    found = [link_pairs(line) for line in links]
    right = sum(len(f & t) for f, t in zip(found, truth, strict=True))
    assert right / sum(len(f) for f in found) > 0.99
    assert right / sum(len(t) for t in truth) > 0.85
    with pytest.raises(ValueError, match="1 sources and 2 targets"):
        align_words(["a"], ["b", "c"])


def test_link_pairs_read_a_pharaoh_line():
    assert link_pairs("0-0 2-1  3-3") == {(0, 0), (2, 1), (3, 3)}
    assert link_pairs("") == set()
