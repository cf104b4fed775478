"""Word links of sentence pairs by eflomal, the statistical word aligner
(Östling and Tiedemann, 2016) that Mozilla's translations pipeline uses:
what guided alignment training learns (`keras_transformer.training`) and
what `benchmarks/word_alignment_accuracy.py` checks alignments against.

A pair's links are a Pharaoh line, `"0-0 1-2 2-1"`: `i-j` links the
source's `i`-th whitespace-separated word with the target's `j`-th.
"""

import tempfile
from pathlib import Path


def align_words(sources, targets):
    """Word links of each pair of `sources` and `targets` (lists of
    strings) by eflomal (Östling and Tiedemann, 2016; what Mozilla's
    translations pipeline aligns with): forward and reverse, intersected,
    over lowercased whitespace-separated words.

    eflomal is an optional dependency (`pip install eflomal`); its priors
    want thousands of pairs, so align the whole training corpus at once.

    Returns:
        One Pharaoh line per pair (`"0-0 1-2"`, source index first).

    Example:

    >>> links = align_words(["a small dog"] * 2000, ["ein kleiner hund"] * 2000)
    >>> links[0]
    '0-0 1-1 2-2'
    """
    try:
        from eflomal import Aligner
    except ImportError as error:
        raise ImportError(
            "`align_words` needs eflomal: pip install eflomal (or the package's `alignment` extra)"
        ) from error
    if len(sources) != len(targets):
        raise ValueError(
            "`sources` and `targets` must be parallel. Received: "
            f"{len(sources)} sources and {len(targets)} targets"
        )
    with tempfile.TemporaryDirectory() as scratch:
        forward, reverse = Path(scratch, "forward"), Path(scratch, "reverse")
        Aligner().align(
            [s.lower() for s in sources],
            [t.lower() for t in targets],
            links_filename_fwd=str(forward),
            links_filename_rev=str(reverse),
            quiet=True,
        )
        forward, reverse = forward.read_text().splitlines(), reverse.read_text().splitlines()
        kept = (link_pairs(f) & link_pairs(r) for f, r in zip(forward, reverse, strict=True))
        return [" ".join(f"{i}-{j}" for i, j in sorted(pairs)) for pairs in kept]


def link_pairs(line):
    """The `(source index, target index)` pairs of a Pharaoh line, a set.

    Example:

    >>> link_pairs("0-0 2-1")
    {(0, 0), (2, 1)}
    """
    return {tuple(int(i) for i in link.split("-")) for link in line.split()}
