"""One shard of a corpus translation, without Beam: what a line becomes,
and the files a shard is written to (`keras_transformer_runtime.corpus.pipeline`
runs this on Apache Beam).

A corpus is a list of text files; line `n` (1-based) of file `i` (its
place in the sorted list of inputs) belongs to shard `(n - 1) //
shard_lines` of that file. A shard is translated as a whole, its lines
sorted by length (characters) into batches, and written to two
JSON-lines files named by its place, so that the outputs, read in the
order of their names, follow the inputs' order:

* `translations-IIIII-SSSSS.jsonl`: a record per translated line,
  `{"file": i, "line": n, "source": ..., "translation": ...}` (and
  `"score"`, the length-penalized log-probability, with `with_scores`);
* `errors-IIIII-SSSSS.jsonl` (only where there are some): a record per
  line that was not translated, `{"file", "line", "source", "error"}`:
  an empty line, invalid UTF-8 (the source with the bytes replaced), a
  line over `max_line_tokens` or one the export refuses, or one whose
  translation raised.

Example:

>>> job = CorpusJob(shard_lines=2)
>>> records, errors = translate_shard(runner, job, 0, [(1, b"A dog runs."), (2, b"")])
>>> records
[{'file': 0, 'line': 1, 'source': 'A dog runs.', 'translation': 'Ein Hund läuft.'}]
>>> errors
[{'file': 0, 'line': 2, 'source': '', 'error': 'empty line'}]
"""

import dataclasses
import json
import logging
import warnings
import zlib

from keras_transformer_runtime import validation
from keras_transformer_runtime.runners import runner as runner_method
from keras_transformer_runtime.runners.results import Hypothesis
from keras_transformer_runtime.runners.results import RefusedRequestError
from keras_transformer_runtime.text import formats
from keras_transformer_runtime.text.documents import LongInputWarning

TRANSLATIONS = "translations"
ERRORS = "errors"
MODES = ("translate", "sample")
# The fewest and most lines of a shard sized by `CorpusJob.sized`.
SHARD_LINES = (50, 2000)


def shard_name(kind, file_index, shard):
    """The file name of shard `shard` of input `file_index`: `kind` is
    `TRANSLATIONS` or `ERRORS`."""
    return f"{kind}-{file_index:05d}-{shard:05d}.jsonl"


def jsonl(records):
    """`records` as JSON lines (bytes), as the shards hold them."""
    return b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in records)


def from_jsonl(data):
    """The records of JSON lines (bytes)."""
    return [json.loads(line) for line in data.splitlines() if line]


@dataclasses.dataclass(frozen=True)
class CorpusJob:
    """What a corpus translation does with each line.

    Args:
        mode: `"translate"` (the export's search: beam search, greedy
            where it was exported with `beam_size=1`) or `"sample"` (one
            random draw per line, repeatable: each shard draws with a seed
            made of `seed` and its place).
        batch_size: sentences per call of the runner (`None`: the
            runner's `bulk_batch_size`).
        shard_lines: lines per shard (the unit of work, of sorting by
            length, and of output files); `None`: sized by the inputs and
            the workers (`sized`), or as the output's earlier run had it.
        with_scores: whether each record holds its translation's score.
        seed: the seed of `mode="sample"`.
        target_lang: a multilingual model's target language (`None`: each
            line starts with its tag, or the model has one language).
        max_line_tokens: lines with more source tokens become error rows
            (`None`: every line is translated, a long sentence in pieces,
            unless the export refuses it).
        format: what each line is: `"text"`, or an HTML fragment or a line
            of Markdown (`"html"`, `"markdown"`: its markup put back around
            the aligned words, `keras_transformer_runtime.text.formats`; a
            record says `"repaired": true` where its HTML was malformed).
            Markup goes with `mode="translate"` and no scores.
    """

    mode: str = "translate"
    batch_size: int | None = None
    shard_lines: int | None = None
    with_scores: bool = False
    seed: int = 0
    target_lang: str | None = None
    max_line_tokens: int | None = None
    format: str = "text"

    def __post_init__(self):
        validation.check_choice(MODES, mode=self.mode)
        if formats.of(self.format).marked_up and (self.mode != "translate" or self.with_scores):
            raise ValueError(
                f"`format={self.format!r}` goes with mode='translate' and no scores. "
                f"Received: mode={self.mode!r}, with_scores={self.with_scores!r}"
            )
        validation.check_positive_int(allow_none=True, shard_lines=self.shard_lines)
        validation.check_positive_int(
            allow_none=True, batch_size=self.batch_size, max_line_tokens=self.max_line_tokens
        )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"`seed` must be an integer, 0 or more. Received: seed={self.seed!r}")

    def to_dict(self):
        """The job's settings by name (`format` only where it is not text,
        so that outputs written before it was a setting still resume)."""
        settings = dataclasses.asdict(self)
        if not formats.of(self.format).marked_up:
            del settings["format"]
        return settings

    def check(self, runner):
        """Raises `ValueError` where `runner` cannot run this job: a mode
        it does not support, or a `target_lang` it does not know (checked
        before anything is written, so that the job fails at once)."""
        method = (
            runner_method.SAMPLE if self.mode == "sample" else runner_method.TRANSLATE_WITH_SCORES
        )
        if not runner.supports(method):
            raise ValueError(
                f"{runner.name} does not support mode={self.mode!r} (its search is in the "
                f"export); use mode='translate'. Received: mode={self.mode!r}"
            )
        if self.target_lang is not None:
            runner.languages.check(self.target_lang)

    def shard_of(self, number):
        """The shard of line `number` (1-based)."""
        if self.shard_lines is None:  # not sized yet (`sized`): one shard
            return 0
        return (number - 1) // self.shard_lines

    def sized(self, lines, workers, earlier=None):
        """This job with its `shard_lines` set, where it is `None`: an
        `earlier` run's (a rerun continues it, on any number of workers),
        else about four shards per worker of the inputs' `lines`, within
        `SHARD_LINES` (a 2,000-line file on 2 workers: shards of 250, so
        that both translate; a large corpus: shards of 2,000)."""
        if self.shard_lines is not None:
            return self
        fitted = min(max(-(-lines // (4 * workers)), SHARD_LINES[0]), SHARD_LINES[1])
        return dataclasses.replace(self, shard_lines=earlier or fitted)

    def seed_of(self, file_index, shard):
        """The sampling seed of a shard: the same on every run."""
        return zlib.crc32(f"{self.seed}/{file_index}/{shard}".encode())


def checked_line(raw):
    """`(text, error)` of a line read as bytes: its text, and why it is not
    translated (`None`: it is)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        return raw.decode(
            "utf-8", "replace"
        ), f"not valid UTF-8 ({error.reason} at byte {error.start})"
    return text, ("empty line" if not text.strip() else None)


def translate_shard(runner, job, file_index, lines, path=None):
    """The translation records and the error records of a shard's `lines`,
    `(number, bytes)` pairs in any order, each list in line order (see the
    module's docstring). A line with a sentence over the export's
    `max_input_length` is translated in pieces of whole words, its record
    marked `"in_pieces": true` (and `"cut": true` where a word alone was
    longer, its rest not translated), and a warning names the lines of
    the input (`path`, or its index)."""
    lines = sorted(lines)
    shard = job.shard_of(lines[0][0]) if lines else 0
    errors, todo = {}, []
    for number, raw in lines:
        text, error = checked_line(raw)
        if error:
            errors[number] = (text, error)
        else:
            todo.append((number, text))
    if job.max_line_tokens and todo:
        lengths = runner.source_lengths([text for _, text in todo])
        for (number, text), length in zip(list(todo), lengths, strict=True):
            if length > job.max_line_tokens:
                errors[number] = (
                    text,
                    f"{length} tokens, over max_line_tokens={job.max_line_tokens}",
                )
        todo = [(number, text) for number, text in todo if number not in errors]
    texts = [text for _, text in todo]
    repaired = set()  # the texts whose markup was repaired
    run = _method(runner, job, job.seed_of(file_index, shard), repaired)
    with warnings.catch_warnings():  # the runner's, naming positions in the sorted batches
        warnings.simplefilter("ignore", LongInputWarning)
        marks = _long_inputs(runner, job, texts)
        found = _in_length_order(run, texts)
    records = []
    for index, ((number, text), result) in enumerate(zip(todo, found, strict=True)):
        if isinstance(result, str):
            errors[number] = (text, result)
            continue
        best = result[0]
        record = {
            "file": file_index,
            "line": number,
            "source": text,
            "translation": best.translation,
        }
        if job.with_scores:
            record["score"] = best.score
        if text in repaired:
            record["repaired"] = True
        record.update(marks.get(index, {}))
        records.append(record)
    error_records = [
        {"file": file_index, "line": number, "source": text, "error": error}
        for number, (text, error) in sorted(errors.items())
    ]
    _warn_long_lines(records, path or f"input {file_index}", runner.settings.max_input_length)
    return records, error_records


def _long_inputs(runner, job, texts):
    """`{index in texts: its marks}` for the texts with a sentence over
    the runner's `max_input_length` (`{"in_pieces": True}`, and `"cut"`
    where a word alone is longer), as the runner splits them."""
    try:
        split = runner.split(texts, job.target_lang)
    except ValueError:  # refused: each such line becomes an error record
        return {}
    marks = {i: {"in_pieces": True} for i in split.in_pieces}
    for i in split.cut:
        marks[i]["cut"] = True
    return marks


def _warn_long_lines(records, name, limit):
    """A `LongInputWarning`-like line on the log naming the lines of input
    `name` translated in pieces (and those with a word cut)."""
    pieces = [r["line"] for r in records if r.get("in_pieces")]
    if not pieces:
        return
    cut = [r["line"] for r in records if r.get("cut")]
    message = (
        f"{name}: {len(pieces)} line(s) had a sentence longer than max_input_length ({limit} "
        f"tokens): translated in pieces of whole words (lines {pieces[:10]})"
    )
    if cut:
        message += f"; a word alone was longer and cut in lines {cut[:10]}"
    logging.warning(message + ".")


def _method(runner, job, seed, repaired):
    """The runner's call for `job.mode`: each text's hypotheses, best first
    (a document's translation as one; the texts whose markup was repaired
    added to `repaired`)."""
    options = {"batch_size": job.batch_size, "target_lang": job.target_lang}
    if job.mode == "sample":
        return lambda texts: runner.sample(texts, seed=seed, **options)
    if not formats.of(job.format).marked_up:
        return lambda texts: runner.translate_with_scores(texts, **options)

    def hypotheses(texts, found):
        """The `TranslatedDocument`s `found` of `texts` as hypotheses, the
        repaired ones' texts recorded."""
        repaired.update(t for t, d in zip(texts, found, strict=True) if d.repaired)
        return [[Hypothesis(d.translation, 0.0)] for d in found]

    def documents(texts):
        try:
            found = runner.translate_documents(texts, job.format, **options)
        except RefusedRequestError as error:  # done: the texts before the refused
            raise error.with_done(hypotheses(texts[: error.start], error.done)) from None
        return hypotheses(texts, found)

    return documents


def _in_length_order(run, texts):
    """`_translated` of `texts` sorted by length (so that each of the
    runner's batches pads little), put back in their order."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    found = [None] * len(texts)
    for i, result in zip(order, _translated(run, [texts[i] for i in order]), strict=True):
        found[i] = result
    return found


def _translated(run, texts):
    """`run`'s hypotheses for each text, or why it has none (a string): a
    text the export refuses is an error and the others are translated; if
    the runner raises anything else, each text is translated alone, so
    that only the texts that raise alone are errors."""
    if not texts:
        return []
    try:
        return run(texts)
    except RefusedRequestError as refused:
        reason = f"refused by the export: {refused.reason}"
        rest = _translated(run, texts[refused.end :])
        return [*refused.done, *[reason] * (refused.end - refused.start), *rest]
    except Exception as error:  # noqa: BLE001 - one line's failure becomes its error row
        if len(texts) == 1:
            return [f"{type(error).__name__}: {error}"]
    return [_translated(run, [text])[0] for text in texts]
