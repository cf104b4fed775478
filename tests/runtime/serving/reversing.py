"""A runner that translates by rule, for the server's tests: a text's
translation is the text reversed, its score minus its length, and its
k-th alternative ends with k `!`; its tokens are its characters."""

import threading
import time

from keras_transformer_runtime.runners import runner
from keras_transformer_runtime.runners.results import Hypothesis
from keras_transformer_runtime.runners.settings import DecodingSettings


class ReversingRunner(runner.Runner):
    """Reverses texts (see the module); refuses a text holding "REFUSE"
    with a `ValueError`, raises `RuntimeError` for one holding "CRASH";
    each call takes `delay` seconds and is recorded in `calls` (its
    texts)."""

    methods = frozenset({runner.TRANSLATE, runner.TRANSLATE_WITH_SCORES})
    has_token_scores = True

    def __init__(self, delay=0.0, beam_size=3):
        self.settings = DecodingSettings(beam_size=beam_size, split_sentences=False)
        self.delay = delay
        self.calls = []
        self._lock = threading.Lock()

    def _source_lengths(self, texts):
        return [len(text) for text in texts]

    def _translate_with_scores(self, sentences, n_best, token_scores, batch_size):
        runner.check_n_best(n_best, self.settings.beam_size)
        with self._lock:
            self.calls.append(list(sentences))
        time.sleep(self.delay)
        for text in sentences:
            if "REFUSE" in text:
                raise ValueError(f"refused: {text}")
            if "CRASH" in text:
                raise RuntimeError("the runner crashed")
        return [
            [self.hypothesis(text, k, token_scores) for k in range(n_best)] for text in sentences
        ]

    @staticmethod
    def hypothesis(text, k=0, token_scores=False):
        """The rule's `k`-th translation of `text`."""
        translation = text[::-1] + "!" * k
        tokens = [
            ("▁" + c if i == 0 or translation[i - 1] == " " else c)
            for i, c in enumerate(translation)
            if c != " "
        ]
        return Hypothesis(
            translation=translation,
            score=-float(len(text) + k),
            tokens=[*tokens, "</s>"] if token_scores else None,
            token_scores=[-0.5] * (len(tokens) + 1) if token_scores else [],
        )

    def describe(self):
        return "reversing runner"
