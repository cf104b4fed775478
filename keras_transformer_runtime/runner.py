"""`Runner`: the Python API every translator of the package shares.

`keras_transformer.Translator` (the Keras model and the searches in
TensorFlow graphs), `SavedModelTranslator` (an export for TF Serving),
`CTranslate2Translator`, `LiteRTTranslator` and `ONNXTranslator` take the
same calls and return the same result types (`keras_transformer_runtime.
results`), so that code written against one runs against another:

    translate(sentences, batch_size=64)                      -> [str]
    translate_with_scores(sentences, n_best=1, token_scores=False,
                          batch_size=64)                     -> [[Hypothesis]]
    sample(sentences, num_samples=1, seed=0, batch_size=64)  -> [[Hypothesis]]
    score(sources, targets, batch_size=64)                   -> [TargetScore]
    translate_with_constraints(sentences, constraints=None, banned=None,
                               batch_size=64)                -> [Hypothesis]
    describe()                                               -> str

A runner lists what it supports in `methods`; the others raise
`NotImplementedError` naming the runner. Sentences are strings, or bytes
(decoded as UTF-8, invalid bytes replaced, by the runners that tokenize
on the host; passed as they are to a graph).
"""

import json

from keras_transformer_runtime import validation

TRANSLATE = "translate"
TRANSLATE_WITH_SCORES = "translate_with_scores"
SAMPLE = "sample"
SCORE = "score"
TRANSLATE_WITH_CONSTRAINTS = "translate_with_constraints"
METHODS = (TRANSLATE, TRANSLATE_WITH_SCORES, SAMPLE, SCORE, TRANSLATE_WITH_CONSTRAINTS)


def as_text(sentence):
    """A sentence as text: bytes are decoded as UTF-8, invalid bytes
    replaced (a command line reads lines as bytes)."""
    return sentence.decode("utf-8", errors="replace") if isinstance(sentence, bytes) else sentence


def check_n_best(n_best, beam_size):
    """Raises unless `n_best` is an integer between 1 and `beam_size`."""
    if isinstance(n_best, bool) or not isinstance(n_best, int) or not 1 <= n_best <= beam_size:
        raise ValueError(
            f"`n_best` must be between 1 and the beam size ({beam_size}). "
            f"Received: n_best={n_best!r}"
        )


def export_description(label, quantization, settings):
    """`describe`'s text for an export run on the host: what it is, the
    weights' type, the decoding settings."""
    return "\n".join(
        [
            label,
            f"quantization: {quantization}",
            "decoding settings: " + json.dumps(settings.to_dict(), sort_keys=True),
        ]
    )


class Runner:
    """The translator protocol (see the module's docstring).

    Subclasses set `methods` (the names of the methods they implement,
    from `METHODS`) and override those; `translate` is the best of
    `translate_with_scores`.

    Attributes:
        methods: the names of the supported methods.
        has_token_scores: whether `translate_with_scores` gives token
            scores (`token_scores=True`).
        settings: the `DecodingSettings` the runner decodes with.
        model: the Keras model the runner runs in this process
            (`Translator`'s), or `None` (an export).
    """

    methods = frozenset({TRANSLATE})
    has_token_scores = False
    model = None

    @property
    def name(self):
        """The runner's name in messages: its class's."""
        return type(self).__name__

    def supports(self, method):
        """Whether the runner implements `method` (a name of `METHODS`)."""
        validation.check_choice(METHODS, method=method)
        return method in self.methods

    def _unsupported(self, method):
        supported = ", ".join(m for m in METHODS if m in self.methods)
        raise NotImplementedError(
            f"{self.name} does not support `{method}`; it supports: {supported}."
        )

    def translate(self, sentences, batch_size=64):
        """The best translation of each sentence, in order."""
        results = self.translate_with_scores(sentences, batch_size=batch_size)
        return [options[0].translation for options in results]

    def translate_with_scores(self, sentences, n_best=1, token_scores=False, batch_size=64):
        """For each sentence, its `n_best` best `Hypothesis` (at most the
        beam size), best first; with `token_scores`, each with its tokens
        and their log-probabilities."""
        self._unsupported(TRANSLATE_WITH_SCORES)

    def sample(self, sentences, num_samples=1, seed=0, batch_size=64):
        """For each sentence, `num_samples` translations drawn at random
        (`temperature`, `top_k`, `top_p`) as `Hypothesis`, repeatable with
        the same `seed`."""
        self._unsupported(SAMPLE)

    def score(self, sources, targets, batch_size=64):
        """How likely the model finds each target for its source (forced
        decoding): a `TargetScore` per pair."""
        self._unsupported(SCORE)

    def translate_with_constraints(self, sentences, constraints=None, banned=None, batch_size=64):
        """The best translation of each sentence that holds its
        `constraints` and none of its `banned` phrases (per sentence, a
        list of phrases): a `Hypothesis` per sentence, with
        `constraints_met`."""
        self._unsupported(TRANSLATE_WITH_CONSTRAINTS)

    def describe(self):
        """What the runner runs, as text: the model, its settings."""
        raise NotImplementedError
