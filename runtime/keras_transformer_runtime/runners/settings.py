"""`DecodingSettings`: how a translator decodes, written once.

`keras_transformer.Translator` decodes with them, the SavedModel and
CTranslate2 exports record them (`to_dict`), and `CTranslate2Translator`
reads them back (`from_dict`) and may change some (`replace`).
"""

import dataclasses

from keras_transformer_runtime import validation

SEARCHES = ("beam", "sample")


def check_sampling(temperature, top_k, top_p):
    """Raises a `ValueError` naming the first sampling setting out of its
    range: `temperature > 0`, `top_k >= 0` (0: no limit), `0 < top_p <= 1`."""
    if not _is_number(temperature) or not temperature > 0:
        raise ValueError(
            f"`temperature` must be a positive number. Received: temperature={temperature!r}"
        )
    if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 0:
        raise ValueError(
            f"`top_k` must be a non-negative integer (0: no limit). Received: top_k={top_k!r}"
        )
    if not _is_number(top_p) or not 0 < top_p <= 1:
        raise ValueError(f"`top_p` must be in (0, 1] (1: no limit). Received: top_p={top_p!r}")


def check_controls(min_length, no_repeat_ngram_size, repetition_penalty):
    """Raises a `ValueError` naming the first output control out of its
    range: `min_length >= 0`, `no_repeat_ngram_size >= 0` (0: off),
    `repetition_penalty >= 1` (1.0: off)."""
    for name, value in (("min_length", min_length), ("no_repeat_ngram_size", no_repeat_ngram_size)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(
                f"`{name}` must be a non-negative integer (0: off). Received: {name}={value!r}"
            )
    if not _is_number(repetition_penalty) or repetition_penalty < 1:
        raise ValueError(
            "`repetition_penalty` must be a number >= 1 (1.0: off). "
            f"Received: repetition_penalty={repetition_penalty!r}"
        )


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True)
class DecodingSettings:
    """How a translator decodes. Checked when made: a bad value raises a
    `ValueError` that names it and ends with `Received: name=value`.

    Attributes:
        search: what `translate` runs: `"beam"` (beam search; greedy for
            `beam_size=1`) or `"sample"` (a random draw per token).
        beam_size: hypotheses kept per sentence (4 in the paper).
        alpha: the length penalty's exponent, `((5 + length) / 6) ** alpha`
            (0.6 in the paper; 0: none).
        max_extra_length: output tokens allowed beyond the source's length
            (50 in the paper).
        max_input_length: source tokens kept, EOS included (`None`: the
            model's `max_length`).
        max_output_length: the most output tokens, EOS included (`None`:
            the model's `max_length`, which is also the most it may be).
        temperature: sampling divides the logits by it.
        top_k: sampling draws among the `top_k` likeliest tokens (0: all).
        top_p: then among the fewest likeliest tokens whose probabilities
            sum to `top_p` (1.0: all).
        min_length: EOS is forbidden before this many output tokens.
        no_repeat_ngram_size: `n > 0` forbids repeating an n-gram of the
            output (0: off).
        repetition_penalty: `>= 1` makes tokens already in the output less
            likely (1.0: off).
        split_sentences: translate each input sentence by sentence and
            join the translations with its own separators
            (`keras_transformer_runtime.text.documents`; `False`: each input as
            one sentence). Either way a sentence longer than
            `max_input_length` is translated in pieces of whole words.

    Example:

    >>> settings = DecodingSettings(beam_size=1, max_extra_length=10)
    >>> settings.replace(beam_size=4).to_dict()["beam_size"]
    4
    """

    search: str = "beam"
    beam_size: int = 4
    alpha: float = 0.6
    max_extra_length: int = 50
    max_input_length: int | None = None
    max_output_length: int | None = None
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_length: int = 0
    no_repeat_ngram_size: int = 0
    repetition_penalty: float = 1.0
    split_sentences: bool = True

    def __post_init__(self):
        validation.check_choice(SEARCHES, search=self.search)
        validation.check_positive_int(beam_size=self.beam_size)
        validation.check_non_negative(alpha=self.alpha)
        validation.check_non_negative_int(max_extra_length=self.max_extra_length)
        validation.check_positive_int(
            allow_none=True,
            max_input_length=self.max_input_length,
            max_output_length=self.max_output_length,
        )
        check_sampling(self.temperature, self.top_k, self.top_p)
        check_controls(self.min_length, self.no_repeat_ngram_size, self.repetition_penalty)
        if not isinstance(self.split_sentences, bool):
            raise ValueError(
                "`split_sentences` must be True or False. "
                f"Received: split_sentences={self.split_sentences!r}"
            )
        # Numbers as floats, so that exports record `4.0`, never `4`.
        for name in ("alpha", "temperature", "top_p", "repetition_penalty"):
            object.__setattr__(self, name, float(getattr(self, name)))

    @classmethod
    def names(cls):
        """The settings' names, in order."""
        return tuple(field.name for field in dataclasses.fields(cls))

    @classmethod
    def from_dict(cls, values):
        """The settings in `values` (what `to_dict` wrote, or an export's
        settings file: keys that are not settings are left out); the
        others keep their defaults."""
        return cls(**{name: values[name] for name in cls.names() if name in values})

    def to_dict(self):
        """The settings as a dict of plain values, in order."""
        return dataclasses.asdict(self)

    def replace(self, **changes):
        """These settings with `changes` (checked likewise).

        Raises:
            ValueError: a name that is not a setting; the message lists them.
        """
        validation.check_known("decoding", self.names(), **changes)
        return dataclasses.replace(self, **changes)
