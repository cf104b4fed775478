"""The server's request and response bodies, checked: TF Serving's REST
API (`:predict`, model status, metadata), and what `/translate`'s
(`serving.translate_request`) shares with it.

Every problem with a request is a `BadRequest` whose message says what
is wrong; the server answers it with HTTP 400 and `{"error": message}`,
as TF Serving does.

TF Serving's predict request names a signature (`signature_name`,
default `serving_default`) and gives the input `text` in the row format,
`{"instances": ["A dog runs.", ...]}` (or `[{"text": "..."}, ...]`), or in
the columnar format, `{"inputs": [...]}` (or `{"inputs": {"text": [...]}}`);
the answer is `{"predictions": [{"translation", "score", "truncated"},
...]}` or `{"outputs": {"translation": [...], "score": [...], "truncated":
[...]}}` (`n_best`: `translations` and `scores`, best first, the beam size
of each), the SavedModel's outputs: `truncated` says of each text whether
a sentence of it was over `max_input_length` (translated in pieces).
"""

import dataclasses
import json

from keras_transformer_runtime.serving.batcher import Translation

# An export's default request limits (keras_transformer.export).
DEFAULT_MAX_SENTENCES = 256
DEFAULT_MAX_TOKENS = 16_384
SERVING_DEFAULT = "serving_default"
N_BEST = "n_best"
TEXT = "text"
TARGET_LANG = "target_lang"  # a multilingual model's input: each text's language


class BadRequest(ValueError):
    """A request the server refuses (HTTP 400); the message says why."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one request may hold: `max_sentences` texts and, counted by
    the model's tokenizer (EOS included), `max_tokens` tokens; each named
    in the refusal by `names` (the export's name of the limit, or the
    server's flag)."""

    max_sentences: int = DEFAULT_MAX_SENTENCES
    max_tokens: int = DEFAULT_MAX_TOKENS
    names: tuple = ("max_request_sentences", "max_request_tokens")

    @classmethod
    def of(cls, runner, max_sentences=None, max_tokens=None):
        """The limits of a server of `runner`: `max_sentences` and
        `max_tokens` where given, else the limits its export records (a
        SavedModel's `max_batch_size` and `max_input_tokens`), else the
        defaults (256 sentences, 16,384 tokens, as an export's)."""
        recorded = runner.limits
        sentences = _limit(
            max_sentences, "max_request_sentences", recorded["max_batch_size"], "max_batch_size"
        )
        tokens = _limit(
            max_tokens, "max_request_tokens", recorded["max_input_tokens"], "max_input_tokens"
        )
        return cls(
            sentences[0] or DEFAULT_MAX_SENTENCES,
            tokens[0] or DEFAULT_MAX_TOKENS,
            (sentences[1], tokens[1]),
        )

    def check(self, texts, source_lengths):
        """Raises `BadRequest` naming the limit `texts` exceed;
        `source_lengths(texts)` counts each text's tokens without EOS."""
        if len(texts) > self.max_sentences:
            raise BadRequest(
                f"A request may hold at most {self.names[0]}={self.max_sentences} sentences; "
                f"this one holds {len(texts)}."
            )
        tokens = sum(source_lengths(texts)) + len(texts)
        if tokens > self.max_tokens:
            raise BadRequest(
                f"A request may hold at most {self.names[1]}={self.max_tokens} source tokens; "
                f"this one holds {tokens}."
            )


def _limit(given, flag, recorded, recorded_name):
    """`(value, name)` of one limit: the given one named by its flag, else
    the recorded one by the export's name, else `None` (the default)."""
    if given is None and recorded is not None:
        return recorded, recorded_name
    return given, flag


def json_body(body):
    """The JSON object of a request's `body` (bytes)."""
    try:
        value = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise BadRequest(f"The request body is not valid UTF-8: {error}.") from None
    except json.JSONDecodeError as error:
        raise BadRequest(f"The request body is not valid JSON: {error}.") from None
    if not isinstance(value, dict):
        raise BadRequest(f"The request body must be a JSON object; it is {_kind(value)}.")
    return value


def texts_of(value, name):
    """`value` as a list of texts: a list of strings, each valid Unicode."""
    if not isinstance(value, list):
        raise BadRequest(f"`{name}` must be a list of strings; it is {_kind(value)}.")
    for index, text in enumerate(value):
        if not isinstance(text, str):
            raise BadRequest(f"`{name}[{index}]` must be a string; it is {_kind(text)}.")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise BadRequest(
                f"`{name}[{index}]` is not valid Unicode (it holds a lone surrogate)."
            ) from None
    return value


def tagged_texts(texts, target_lang, languages):
    """`texts` each starting with the tag of its `target_lang` (one for
    all, a list of one per text, or `None`: tags typed in the texts), as a
    runner reads them without `target_lang`: requests for different
    languages are batched together, each sentence translated into its own.

    Raises:
        BadRequest: a language the model (`languages`, its
            `TargetLanguages`) does not know, naming those it knows.
    """
    try:
        return languages.tagged_texts(texts, target_lang)
    except ValueError as error:
        raise BadRequest(str(error)) from None


def _kind(value):
    """How a JSON value is named in messages."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number")


def checked_keys(body, allowed, what):
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise BadRequest(
            f"Unknown field(s) {', '.join(unknown)} in {what}; it takes: {', '.join(allowed)}."
        )


class Signature:
    """A translating signature of the export, as the server answers it:
    its name, what it asks the runner, its outputs."""

    name = None
    outputs = {}  # output name: (dtype, dimensions), for the metadata

    def task(self, max_n_best):
        """The runner's `Translation` for this signature."""
        raise NotImplementedError

    def columns(self, hypotheses):
        """The outputs, by name, of the runner's `Hypothesis` lists."""
        raise NotImplementedError

    def metadata(self, multilingual=False):
        """The signature's `SignatureDef` as TF Serving's metadata shows it
        (with a `target_lang` input for a `multilingual` model)."""

        def tensor(name, dtype, dims):
            shape = {
                "dim": [{"size": "-1", "name": ""} for _ in range(dims)],
                "unknown_rank": False,
            }
            return {"dtype": dtype, "tensor_shape": shape, "name": name}

        names = (TEXT, TARGET_LANG) if multilingual else (TEXT,)
        return {
            "inputs": {n: tensor(f"{self.name}_{n}:0", "DT_STRING", 1) for n in names},
            "outputs": {
                name: tensor(f"StatefulPartitionedCall:{i}", dtype, dims)
                for i, (name, (dtype, dims)) in enumerate(sorted(self.outputs.items()))
            },
            "method_name": "tensorflow/serving/predict",
            "defaults": {},
        }


class Best(Signature):
    """`serving_default`: each text's best translation and its score."""

    name = SERVING_DEFAULT
    outputs = {
        "translation": ("DT_STRING", 1),
        "score": ("DT_FLOAT", 1),
        "truncated": ("DT_BOOL", 1),
    }

    def task(self, max_n_best):
        return Translation(n_best=1)

    def columns(self, hypotheses):
        return {
            "translation": [row[0].translation for row in hypotheses],
            "score": [row[0].score for row in hypotheses],
            "truncated": [row[0].truncated for row in hypotheses],
        }


class NBest(Signature):
    """`n_best`: the beam's translations of each text and their scores,
    best first."""

    name = N_BEST
    outputs = {
        "translations": ("DT_STRING", 2),
        "scores": ("DT_FLOAT", 2),
        "truncated": ("DT_BOOL", 1),
    }

    def task(self, max_n_best):
        return Translation(n_best=max_n_best)

    def columns(self, hypotheses):
        return {
            "translations": [[h.translation for h in row] for row in hypotheses],
            "scores": [[h.score for h in row] for row in hypotheses],
            "truncated": [row[0].truncated for row in hypotheses],
        }


def signatures_of(max_n_best):
    """The signatures a runner with `max_n_best` serves, by name."""
    served = [Best()] + ([NBest()] if max_n_best > 1 else [])
    return {signature.name: signature for signature in served}


@dataclasses.dataclass(frozen=True)
class Predict:
    """A TF Serving predict request: its signature, texts and format."""

    signature: Signature
    texts: list
    columnar: bool
    target_lang: list | None = None

    @classmethod
    def parse(cls, body, signatures):
        """The request in `body` (a JSON object) for one of `signatures`
        (`Signature`s by name)."""
        checked_keys(body, ("signature_name", "instances", "inputs"), "a predict request")
        name = body.get("signature_name", SERVING_DEFAULT)
        if not isinstance(name, str) or name not in signatures:
            raise BadRequest(
                f"Unknown signature_name {name!r}; this model serves: {', '.join(signatures)}."
            )
        if ("instances" in body) == ("inputs" in body):
            raise BadRequest("A predict request gives either `instances` or `inputs`.")
        columnar = "inputs" in body
        value = body["inputs"] if columnar else body["instances"]
        target_lang = None
        if columnar and isinstance(value, dict):
            checked_keys(value, (TEXT, TARGET_LANG), "`inputs`")
            if TEXT not in value:
                raise BadRequest("`inputs` must give the signature's input `text`.")
            value, target_lang = value[TEXT], value.get(TARGET_LANG)
        elif not columnar and isinstance(value, list):
            instances = [cls._instance(item, index) for index, item in enumerate(value)]
            value = [text for text, _ in instances]
            if any(lang is not None for _, lang in instances):
                target_lang = [lang for _, lang in instances]
        texts = texts_of(value, "inputs" if columnar else "instances")
        if target_lang is not None and not isinstance(target_lang, str):
            target_lang = texts_of(target_lang, TARGET_LANG)
        return cls(signatures[name], texts, columnar, target_lang)

    @staticmethod
    def _instance(item, index):
        """An instance's text and target language: the string itself, or
        `{"text": string, "target_lang"?: string}`."""
        if isinstance(item, dict):
            checked_keys(item, (TEXT, TARGET_LANG), f"`instances[{index}]`")
            if TEXT not in item:
                raise BadRequest(f"`instances[{index}]` must give the input `text`.")
            return item[TEXT], item.get(TARGET_LANG)
        return item, None

    def answer(self, hypotheses):
        """The response body for the runner's `Hypothesis` lists."""
        columns = self.signature.columns(hypotheses)
        if self.columnar:
            return {"outputs": columns}
        names = list(columns)
        return {
            "predictions": [
                dict(zip(names, values, strict=True))
                for values in zip(*columns.values(), strict=True)
            ]
        }
