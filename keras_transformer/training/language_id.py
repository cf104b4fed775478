"""Which language a translation is in: a character n-gram identifier for
counting a multilingual model's off-target outputs (translations into
another language than the one asked for, or the source copied).

A naive Bayes classifier over character 1- to 3-grams, trained on a few
thousand sentences of each language (the training corpora's own sides):
for sentences of a few words in languages as different as English,
German, French and Czech, that is all it takes.
"""

import collections
import math

from keras_transformer_runtime import validation


def _ngrams(text, orders):
    padded = f" {' '.join(text.lower().split())} "
    for n in orders:
        for start in range(len(padded) - n + 1):
            yield padded[start : start + n]


class LanguageIdentifier:
    """Character n-gram naive Bayes over a fixed set of languages.

    Args:
        counts: `{language: {ngram: count}}`.
        orders: the n-gram lengths counted.

    Example:

    >>> identifier = LanguageIdentifier.train(
    ...     {"de": german_sentences, "fr": french_sentences, "en": english_sentences})
    >>> identifier.identify(["Ein Hund rennt.", "Un chien court."])
    ['de', 'fr']
    >>> identifier.off_target_rate(["Ein Hund rennt.", "A dog runs."], "de")
    0.5
    """

    def __init__(self, counts, orders=(1, 2, 3)):
        if len(counts) < 2:
            raise ValueError(
                "`counts` must hold at least two languages to tell apart. "
                f"Received: languages {sorted(counts)}"
            )
        self.languages = tuple(sorted(counts))
        self.orders = tuple(orders)
        vocabulary = set().union(*(set(c) for c in counts.values()))
        size = len(vocabulary) + 1
        self._log_probs = {}
        self._unseen = {}
        for code in self.languages:
            total = sum(counts[code].values())
            denominator = math.log(total + size)
            self._log_probs[code] = {
                ngram: math.log(count + 1) - denominator for ngram, count in counts[code].items()
            }
            self._unseen[code] = -denominator

    @classmethod
    def train(cls, sentences, orders=(1, 2, 3), max_sentences=5000):
        """An identifier from `{language: sentences}` (lists or iterables
        of strings; at most `max_sentences` of each are read)."""
        validation.check_positive_int(max_sentences=max_sentences)
        counts = {}
        for code, texts in sentences.items():
            counter = collections.Counter()
            for number, text in enumerate(texts):
                if number == max_sentences:
                    break
                counter.update(_ngrams(text, orders))
            if not counter:
                raise ValueError(
                    f"`sentences` must hold text for each language. Received: none for {code!r}"
                )
            counts[code] = counter
        return cls(counts, orders)

    def scores(self, text):
        """`{language: log-likelihood}` of `text`."""
        grams = collections.Counter(_ngrams(text, self.orders))
        return {
            code: sum(
                count * self._log_probs[code].get(gram, self._unseen[code])
                for gram, count in grams.items()
            )
            for code in self.languages
        }

    def identify(self, texts):
        """The most likely language of each text (`None` for a text
        without characters)."""
        found = []
        for text in texts:
            if not text.strip():
                found.append(None)
                continue
            scores = self.scores(text)
            found.append(max(self.languages, key=lambda code: scores[code]))
        return found

    def off_target_rate(self, texts, target_lang):
        """The share of non-empty `texts` identified as another language
        than `target_lang` (0.0 without any)."""
        validation.check_choice(self.languages, target_lang=target_lang)
        found = [code for code in self.identify(texts) if code is not None]
        return sum(code != target_lang for code in found) / len(found) if found else 0.0
