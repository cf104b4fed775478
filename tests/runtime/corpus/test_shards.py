"""One shard of a corpus translation (`keras_transformer_runtime.
corpus_shards`), with runners that translate by rule: every line is a
record or an error record, in line order, and only the bad lines are
errors."""

import json

import pytest

from keras_transformer_runtime.corpus import shards as corpus_shards
from keras_transformer_runtime.corpus.shards import CorpusJob
from keras_transformer_runtime.runners import runner
from keras_transformer_runtime.runners.results import Hypothesis
from tests.runtime.serving.reversing import ReversingRunner
from tests.runtime.text.test_documents import RuleRunner


class SamplingRunner(ReversingRunner):
    """Reverses texts; a draw is the reversed text and the seed."""

    methods = ReversingRunner.methods | {runner.SAMPLE}

    def _sample(self, sentences, num_samples, seed, batch_size):
        self.calls.append(("sample", list(sentences), seed))
        return [[Hypothesis(f"{s[::-1]}#{seed}", -1.0)] for s in sentences]


class BatchingRunner(ReversingRunner):
    """Reverses texts in calls of at most `batch_size` (`calls`: each
    call's texts); 2 sentences a call in bulk."""

    bulk_batch_size = 2

    def _translate_with_scores(self, sentences, n_best, token_scores, batch_size):
        sentences, found = list(sentences), []
        for start in range(0, len(sentences), batch_size):
            chunk = sentences[start : start + batch_size]
            found += super()._translate_with_scores(chunk, n_best, token_scores, batch_size)
        return found


def numbered(*lines):
    return [(number, line) for number, line in enumerate(lines, 1)]


def test_each_line_becomes_a_record_in_line_order_whatever_the_order_given():
    lines = numbered(b"A dog.", b"The cat sleeps.", "Grüße".encode())
    records, errors = corpus_shards.translate_shard(ReversingRunner(), CorpusJob(), 3, lines[::-1])
    assert errors == []
    assert records == [
        {"file": 3, "line": n, "source": text.decode(), "translation": text.decode()[::-1]}
        for n, text in lines
    ]


def test_scores_are_recorded_on_request():
    records, _ = corpus_shards.translate_shard(
        ReversingRunner(), CorpusJob(with_scores=True), 0, numbered(b"abc", b"de")
    )
    assert [r["score"] for r in records] == [-3.0, -2.0]  # the rule's: minus the length


@pytest.mark.parametrize("batch_size, sizes", [(None, [2, 2, 1]), (4, [4, 1])])
def test_batches_are_the_jobs_or_the_runners_bulk_batches(batch_size, sizes):
    runner = BatchingRunner()
    lines = numbered(b"e", b"dddd", b"a", b"ccc", b"bb")
    records, _ = corpus_shards.translate_shard(runner, CorpusJob(batch_size=batch_size), 0, lines)
    assert [len(call) for call in runner.calls] == sizes
    assert runner.calls[0][0] in ("a", "e")  # sorted by length
    assert [r["translation"] for r in records] == ["e", "dddd", "a", "ccc", "bb"]


def test_bad_lines_become_error_records_and_the_others_are_translated():
    lines = numbered(b"fine", b"", b"  \t", b"bad \xff byte", b"also fine")
    records, errors = corpus_shards.translate_shard(ReversingRunner(), CorpusJob(), 0, lines)
    assert [r["line"] for r in records] == [1, 5]
    assert [(e["line"], e["error"]) for e in errors] == [
        (2, "empty line"),
        (3, "empty line"),
        (4, "not valid UTF-8 (invalid start byte at byte 4)"),
    ]
    assert errors[2]["source"] == "bad \ufffd byte"


def test_a_line_the_export_refuses_is_an_error_and_the_rest_is_translated():
    rule = RuleRunner(split_sentences=False)
    lines = numbered(b"one", b"REFUSE me", b"two", b"three")
    records, errors = corpus_shards.translate_shard(rule, CorpusJob(), 0, lines)
    assert [(r["line"], r["translation"]) for r in records] == [
        (1, "ONE"),
        (3, "TWO"),
        (4, "THREE"),
    ]
    assert errors == [
        {"file": 0, "line": 2, "source": "REFUSE me", "error": "refused by the export: too long"}
    ]


def test_a_page_the_export_refuses_a_paragraph_of_is_an_error_and_the_rest_is_translated():
    # The refusal is of a segment; it must fall on the page that holds it.
    rule = RuleRunner(split_sentences=False)
    lines = numbered(b"<p>one</p>", b"<p>two</p><p>REFUSE me</p>", b"<p>three</p>", b"<p>four</p>")
    records, errors = corpus_shards.translate_shard(rule, CorpusJob(format="html"), 0, lines)
    assert [(r["line"], r["translation"]) for r in records] == [
        (1, "<p>ONE</p>"),
        (3, "<p>THREE</p>"),
        (4, "<p>FOUR</p>"),
    ]
    assert [(e["line"], e["error"]) for e in errors] == [(2, "refused by the export: too long")]


def test_a_line_that_crashes_the_runner_is_an_error_found_alone():
    reverser = ReversingRunner()
    lines = numbered(b"one", b"CRASH here", b"REFUSE there", b"four")
    records, errors = corpus_shards.translate_shard(reverser, CorpusJob(), 0, lines)
    assert [r["line"] for r in records] == [1, 4]
    assert [(e["line"], e["error"]) for e in errors] == [
        (2, "RuntimeError: the runner crashed"),
        (3, "ValueError: refused: REFUSE there"),
    ]
    # The whole batch first, then each line alone.
    assert sorted(map(tuple, reverser.calls[1:])) == [
        (t.decode(),) for _, t in sorted(lines, key=lambda p: p[1])
    ]


def test_lines_over_max_line_tokens_are_errors():
    lines = numbered(b"short", b"much too long", b"tiny")
    records, errors = corpus_shards.translate_shard(
        RuleRunner(), CorpusJob(max_line_tokens=5), 0, lines
    )
    assert [r["line"] for r in records] == [1, 3]
    assert errors[0]["error"] == "11 tokens, over max_line_tokens=5"  # the rule: non-spaces


def test_sampling_draws_with_a_seed_of_the_shard():
    job = CorpusJob(mode="sample", seed=7, shard_lines=2)
    sampler = SamplingRunner()
    first, _ = corpus_shards.translate_shard(sampler, job, 1, [(3, b"ab"), (4, b"cd")])
    again, _ = corpus_shards.translate_shard(sampler, job, 1, [(4, b"cd"), (3, b"ab")])
    other, _ = corpus_shards.translate_shard(sampler, job, 1, [(5, b"ab")])
    seed = job.seed_of(1, 1)
    assert [r["translation"] for r in first] == [f"ba#{seed}", f"dc#{seed}"]
    assert again == first
    assert other[0]["translation"] == f"ba#{job.seed_of(1, 2)}" != first[0]["translation"]


def test_lines_and_shards():
    job = CorpusJob(shard_lines=3)
    assert [job.shard_of(n) for n in range(1, 8)] == [0, 0, 0, 1, 1, 1, 2]
    assert corpus_shards.shard_name("errors", 2, 13) == "errors-00002-00013.jsonl"
    assert len({job.seed_of(f, s) for f in range(5) for s in range(5)}) == 25


def test_records_round_trip_as_json_lines():
    records = [{"line": 1, "translation": "tab\there\nnewline ünïcode"}, {"line": 2}]
    data = corpus_shards.jsonl(records)
    assert data.count(b"\n") == 2 and "ünïcode".encode() in data
    assert corpus_shards.from_jsonl(data) == records
    assert json.loads(data.splitlines()[0])["line"] == 1


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"mode": "greedy"}, "`mode` must be one of"),
        ({"batch_size": 0}, "`batch_size` must be a positive integer"),
        ({"shard_lines": -1}, "`shard_lines` must be a positive integer"),
        ({"max_line_tokens": 0}, "`max_line_tokens` must be a positive integer"),
        ({"seed": -1}, "`seed` must be an integer, 0 or more"),
    ],
)
def test_settings_are_checked(settings, message):
    with pytest.raises(ValueError, match=message):
        CorpusJob(**settings)


def test_a_line_over_the_limit_is_marked_and_named_by_its_input_line(caplog):
    """A corpus line whose word was cut got a plain record, and the
    warning named its position in the length-sorted shard, not the line."""
    lines = [(1, b"fits."), (2, b"ab cd ef gh. Ok."), (3, b"fine"), (4, b"abcdefgh ij")]
    runner = RuleRunner(max_input_length=6)  # 5 tokens and EOS
    with caplog.at_level("WARNING"):
        records, errors = corpus_shards.translate_shard(
            runner, CorpusJob(), 3, lines, "mono/part-3.txt"
        )
    assert errors == []
    assert [(r["line"], r.get("in_pieces"), r.get("cut")) for r in records] == [
        (1, None, None),
        (2, True, None),
        (3, None, None),
        (4, True, True),
    ]
    [message] = [r.getMessage() for r in caplog.records if "max_input_length" in r.getMessage()]
    assert message == (
        "mono/part-3.txt: 2 line(s) had a sentence longer than max_input_length (6 tokens): "
        "translated in pieces of whole words (lines [2, 4]); a word alone was longer and cut "
        "in lines [4]."
    )


def test_lines_of_markup_keep_their_tags_and_say_when_they_were_repaired():
    from tests.runtime.text.test_formats import WordReversingRunner

    job = CorpusJob(format="html")
    lines = [(1, b"<p><b>a b</b> c</p>"), (2, b"<b>a"), (3, b"")]
    records, errors = corpus_shards.translate_shard(WordReversingRunner(), job, 0, lines)
    assert [(r["line"], r["translation"], r.get("repaired")) for r in records] == [
        (1, "<p>C <b>B A</b></p>", None),
        (2, "<b>A</b>", True),
    ]
    assert [e["line"] for e in errors] == [3]
    assert job.to_dict()["format"] == "html"
    assert "format" not in CorpusJob().to_dict()  # as outputs before the setting recorded it
    with pytest.raises(ValueError, match="`format='html'` goes with mode='translate' and no"):
        CorpusJob(format="html", with_scores=True)
    with pytest.raises(ValueError, match="`format` must be one of 'text', 'html', 'markdown'"):
        CorpusJob(format="xml")
