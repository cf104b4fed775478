"""What translation's markup and alignments count as a word (`WORD`):
letters and digits with their combining marks, with inner apostrophes and
hyphens, or one other visible character (punctuation, a symbol).

Example:

>>> [m.group() for m in WORD.finditer("Ein Mädchen, हिन्दी!")]
['Ein', 'Mädchen', ',', 'हिन्दी', '!']
"""

import functools
import re
import unicodedata


def _marks():
    """A regular expression's class body of every combining mark (Unicode
    categories Mn, Mc, Me: a vowel sign, a virama, a diaeresis written
    apart), which Python's `\\w` leaves out."""
    # Marks lie in the first two planes and in plane 14 (variation selectors).
    codes = [*range(0x20000), *range(0xE0000, 0xE1000)]
    marks = [c for c in codes if unicodedata.category(chr(c)).startswith("M")]
    runs = []  # [first, last] of each run of consecutive marks
    for code in marks:
        if runs and runs[-1][1] == code - 1:
            runs[-1][1] = code
        else:
            runs.append([code, code])
    return "".join(f"\\U{first:08x}-\\U{last:08x}" for first, last in runs)


class _OnFirstUse:
    """A regular expression compiled from `source()` when first used (as
    its compiled pattern: `finditer`, `search`, ...)."""

    def __init__(self, source):
        self._source = source

    @functools.cached_property
    def _compiled(self):
        return re.compile(self._source())

    def __getattr__(self, name):
        return getattr(self._compiled, name)


def _word():
    letters = rf"[\w{_marks()}]"
    return rf"{letters}+(?:['’-]{letters}+)*|[^\w\s]"


# A word (letters and digits with their combining marks, with inner
# apostrophes and hyphens) or one other visible character (punctuation, a
# symbol). Compiled on first use: its class of marks takes about 30 ms to
# build, which importing the runtime need not pay.
WORD = _OnFirstUse(_word)
