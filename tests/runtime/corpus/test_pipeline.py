"""Corpus translation on Apache Beam (`keras_transformer_runtime.corpus.pipeline`)
with a runner that reverses texts, on Beam's local runner in this
process: every input line comes back once, in order, as a translation or
an error record; a rerun keeps what a killed run wrote and gives the same
files (processes, real kills and real exports: tests/export/
test_translate_corpus.py)."""

import gzip
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from keras_transformer_runtime.corpus import pipeline as corpus
from keras_transformer_runtime.corpus.shards import CorpusJob
from tests.runtime.serving.reversing import ReversingRunner

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FIRST = [b"A dog runs.", b"", b"Two cats sleep.", b"bad \xff", b"CRASH", b"The end."]
SECOND = [f"line {n}".encode() for n in range(1, 8)]


@pytest.fixture
def inputs(tmp_path):
    """Two inputs, one gzip, in a directory of their own."""
    directory = tmp_path / "mono"
    directory.mkdir()
    (directory / "a.txt").write_bytes(b"\n".join(FIRST) + b"\n")
    with gzip.open(directory / "b.txt.gz", "wb") as f:
        f.write(b"\r\n".join(SECOND))  # Windows line ends, no final one
    return os.fspath(directory / "*")


def run(inputs, output, **settings):
    job = CorpusJob(**{"shard_lines": 3, **settings})
    return corpus.translate_corpus(
        [inputs], os.fspath(output), "unused", job, load_runner=ReversingRunner
    )


def output_files(output):
    return {name: (output / name).read_bytes() for name in sorted(os.listdir(output))}


def test_every_line_comes_back_once_in_the_inputs_order(inputs, tmp_path):
    output = tmp_path / "out"
    summary = run(inputs, output)
    records = list(corpus.read_records(os.fspath(output)))
    expected = [(0, n, line) for n, line in enumerate(FIRST, 1)]
    expected += [(1, n, line) for n, line in enumerate(SECOND, 1)]
    assert [(r["file"], r["line"]) for r in records] == [(f, n) for f, n, _ in expected]
    for record, (_, _, line) in zip(records, expected, strict=True):
        text = line.decode("utf-8", "replace")
        assert record["source"] == text
        if "error" not in record:
            assert record["translation"] == text[::-1]
    errors = {(r["file"], r["line"]): r["error"] for r in records if "error" in r}
    assert errors == {
        (0, 2): "empty line",
        (0, 4): "not valid UTF-8 (invalid start byte at byte 4)",
        (0, 5): "RuntimeError: the runner crashed",
    }
    assert summary["lines"] == 13 and summary["errors"] == 3 and summary["translated"] == 10
    assert summary["kept_from_earlier_runs"] == 0 and summary["sentences_per_second"] > 0
    assert json.loads((output / "summary.json").read_text()) == summary
    manifest = json.loads((output / "corpus.json").read_text())
    assert [os.path.basename(i["path"]) for i in manifest["inputs"]] == ["a.txt", "b.txt.gz"]
    # Shards of 3 lines: 2 + 3 translation files, an error file for each shard with errors.
    names = sorted(os.listdir(output))
    assert names.count("translations-00000-00001.jsonl") == 1
    assert len([n for n in names if n.startswith("translations-")]) == 5
    assert [n for n in names if n.startswith("errors-")] == [
        "errors-00000-00000.jsonl",
        "errors-00000-00001.jsonl",
    ]


def test_a_rerun_keeps_whole_shards_and_writes_the_same_files(inputs, tmp_path):
    output = tmp_path / "out"
    run(inputs, output)
    whole = output_files(output)
    # As a killed run leaves it: a shard missing, another half written.
    os.remove(output / "translations-00001-00001.jsonl")
    killed = f"translations-00001-00002.jsonl.{'7' * 32}.tmp"  # as write_whole names one
    (output / killed).write_bytes(b'{"file": 1')
    os.remove(output / "summary.json")
    summary = run(inputs, output)
    again = output_files(output)
    assert again.keys() == whole.keys()
    assert {k: v for k, v in again.items() if k != "summary.json"} == {
        k: v for k, v in whole.items() if k != "summary.json"
    }
    assert summary["translated"] == 3 and summary["kept_from_earlier_runs"] == 10


def test_a_rerun_with_other_settings_is_refused(inputs, tmp_path):
    output = tmp_path / "out"
    run(inputs, output)
    with pytest.raises(ValueError, match=r"holds a corpus translation of other inputs or settings"):
        run(inputs, output, with_scores=True)
    message = r"job.batch_size: None \(now: 5\); job.with_scores: False \(now: True\)\)"
    with pytest.raises(ValueError, match=message):
        run(inputs, output, with_scores=True, batch_size=5)
    with pytest.raises(ValueError, match=r"settings \(corpus.json: inputs: removed \S*b.txt.gz\)"):
        run(inputs.replace("*", "a.txt"), output)  # one of the two files


def test_a_manifest_that_is_not_json_is_refused_and_kept(inputs, tmp_path):
    """A `corpus.json` that is not this package's (or was cut short) is
    neither read as an error of its own nor overwritten."""
    output = tmp_path / "out"
    output.mkdir()
    (output / "corpus.json").write_text('{"inputs": [')
    with pytest.raises(ValueError, match=r"corpus.json: not a manifest this package wrote\)"):
        run(inputs, output)
    assert output_files(output) == {"corpus.json": b'{"inputs": ['}


def test_an_output_that_is_a_file_is_refused(inputs, tmp_path):
    output = tmp_path / "out.jsonl"
    output.write_text("kept\n")
    with pytest.raises(ValueError, match=r"`output` must be a directory .* output='.*out.jsonl'"):
        run(inputs, output)
    assert output.read_text() == "kept\n"


def test_scores_are_recorded_on_request(inputs, tmp_path):
    run(inputs, tmp_path / "out", with_scores=True)
    records = list(corpus.read_records(os.fspath(tmp_path / "out"), kinds=("translations",)))
    assert [r["score"] for r in records[:2]] == [-11.0, -15.0]  # the rule's: minus the length


def slowly_loaded_runner():
    time.sleep(0.4)
    return ReversingRunner()


def test_the_summary_counts_the_slowest_loading_apart(inputs, tmp_path):
    job = CorpusJob(shard_lines=3)
    summary = corpus.translate_corpus(
        [inputs], os.fspath(tmp_path / "out"), "unused", job, load_runner=slowly_loaded_runner
    )
    assert 0.4 <= summary["loading_seconds"] < summary["seconds"]
    assert run(inputs, tmp_path / "again")["loading_seconds"] < 0.4


def test_the_summary_gives_the_batch_size_used(inputs, tmp_path):
    assert run(inputs, tmp_path / "bulk")["batch_size"] == ReversingRunner.bulk_batch_size
    assert run(inputs, tmp_path / "set", batch_size=3)["batch_size"] == 3


def test_a_pattern_that_matches_nothing_is_an_error(tmp_path):
    with pytest.raises(ValueError, match=r"`inputs` pattern '.*nothing\*' matches no file"):
        corpus.match_inputs([os.fspath(tmp_path / "nothing*")])


def translate_in_a_process(inputs, output, workers, delay=0.0):
    """`tests.runtime.corpus.worker` started in a process (not waited for)."""
    command = [sys.executable, "-m", "tests.runtime.corpus.worker", inputs, os.fspath(output)]
    return subprocess.Popen([*command, str(workers), str(delay)], cwd=ROOT, start_new_session=True)


@pytest.mark.large  # starts processes
def test_a_killed_run_rerun_gives_byte_identical_files_on_two_worker_processes(tmp_path):
    directory = tmp_path / "mono"
    directory.mkdir()
    lines = [f"sentence {n} of the corpus".encode() for n in range(60)]
    (directory / "big.txt").write_bytes(b"\n".join(lines) + b"\n")
    inputs = os.fspath(directory / "*")
    whole = tmp_path / "whole"
    assert translate_in_a_process(inputs, whole, workers=2).wait(timeout=300) == 0
    killed = tmp_path / "killed"
    process = translate_in_a_process(inputs, killed, workers=2, delay=0.5)
    deadline = time.time() + 240
    while not list(killed.glob("translations-*.jsonl")):  # the first shard is whole
        assert process.poll() is None and time.time() < deadline
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)  # the launcher and its worker processes
    process.wait()
    written = len(list(killed.glob("translations-*.jsonl")))  # not a shard's temporary
    assert 1 <= written < 12, "the run was killed after it wrote every shard"
    assert translate_in_a_process(inputs, killed, workers=2).wait(timeout=300) == 0
    finished = {k: v for k, v in output_files(killed).items() if k != "summary.json"}
    assert finished == {k: v for k, v in output_files(whole).items() if k != "summary.json"}
    summary = json.loads((killed / "summary.json").read_text())
    assert summary["kept_from_earlier_runs"] == 5 * written
    assert summary["translated"] == 60 - 5 * written


def test_files_it_did_not_write_are_never_touched(inputs, tmp_path):
    """Pointing `output` at an existing directory deleted every `*.tmp`
    file in it."""
    foreign = tmp_path / "theirs"
    foreign.mkdir()
    (foreign / "draft.tmp").write_bytes(b"keep me")
    with pytest.raises(ValueError, match="holds files this package did not write"):
        run(inputs, foreign)
    assert output_files(foreign) == {"draft.tmp": b"keep me"}
    output = tmp_path / "out"
    run(inputs, output)
    (output / "notes.tmp").write_bytes(b"mine")  # beside a run of ours: a rerun keeps it
    (output / f"summary.json.{'a' * 32}.tmp").write_bytes(b"{")  # a killed run's: removed
    run(inputs, output)
    assert (output / "notes.tmp").read_bytes() == b"mine"
    assert not [n for n in os.listdir(output) if n.startswith("summary.json.")]


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_a_damaged_gzip_input_fails_naming_it_and_writes_nothing(inputs, tmp_path, damage):
    """A `.gz` cut to 60% of its bytes 'succeeded' with the lines before
    the cut, the last one cut mid-line."""
    lines = [f"sentence {n} of a longer corpus".encode() for n in range(400)]
    data = gzip.compress(b"\n".join(lines), mtime=0)
    if damage == "truncated":
        data = data[: int(0.6 * len(data))]
    else:
        middle = len(data) // 2
        data = (
            data[:middle]
            + bytes(b ^ 0xFF for b in data[middle : middle + 64])
            + data[middle + 64 :]
        )
    (tmp_path / "mono" / "c.txt.gz").write_bytes(data)
    output = tmp_path / "out"
    with pytest.raises(ValueError, match=r"c\.txt\.gz is not a whole gzip file"):
        run(inputs, output)
    assert not output.exists()


def test_an_input_edited_at_the_same_size_is_refused_on_rerun(inputs, tmp_path):
    """The manifest recorded inputs by path and size: an edit of the same
    size was accepted, and stale shards kept."""
    output = tmp_path / "out"
    run(inputs, output)
    edited = tmp_path / "mono" / "a.txt"
    edited.write_bytes(edited.read_bytes().replace(b"dog", b"cat"))
    with pytest.raises(ValueError, match="its content: the same size, another SHA-256"):
        run(inputs, output)


class NoSampling(ReversingRunner):
    """A runner whose search cannot draw (as a LiteRT or ONNX export's)."""


def test_a_job_the_runner_cannot_run_fails_before_writing(inputs, tmp_path, monkeypatch):
    """`mode="sample"` on an export that cannot sample exited 0 with every
    line an error record; a mistyped `target_lang` left a `corpus.json`
    that refused the corrected rerun."""
    output = tmp_path / "out"
    job = CorpusJob(mode="sample")
    with pytest.raises(ValueError, match="does not support mode='sample'"):
        corpus.translate_corpus([inputs], os.fspath(output), "unused", job, load_runner=NoSampling)
    assert not output.exists()

    def failing(*args):
        raise RuntimeError("the pipeline failed before any shard")

    monkeypatch.setattr(corpus, "_run_pipeline", failing)
    with pytest.raises(RuntimeError):
        run(inputs, output)
    assert os.listdir(output) == []  # the manifest of a run that wrote nothing is gone
    monkeypatch.undo()
    run(inputs, output, batch_size=4)  # the corrected rerun (other settings) is not refused


def test_shards_are_sized_by_the_input_and_the_workers(tmp_path):
    """With 2,000-line shards, a 2,000-line file ran on one worker, slower
    than a plain loop. Unset, `shard_lines` gives each worker about four
    shards (50 to 2,000 lines), and a rerun keeps its run's."""
    assert CorpusJob().sized(2000, 2).shard_lines == 250
    assert CorpusJob().sized(10, 2).shard_lines == 50
    assert CorpusJob().sized(10**7, 8).shard_lines == 2000
    assert CorpusJob(shard_lines=7).sized(2000, 2).shard_lines == 7
    assert CorpusJob().sized(2000, 2, earlier=300).shard_lines == 300
    directory = tmp_path / "mono"
    directory.mkdir()
    (directory / "big.txt").write_bytes(b"".join(f"line {n}\n".encode() for n in range(2000)))
    output = tmp_path / "out"
    job = CorpusJob()
    corpus.translate_corpus(
        [os.fspath(directory / "*")], os.fspath(output), "unused", job,
        load_runner=ReversingRunner, workers=1,
    )  # fmt: skip
    shards = sorted(n for n in os.listdir(output) if n.startswith("translations-"))
    assert len(shards) == 4  # 500 lines each: four for the one worker
    assert json.loads((output / "corpus.json").read_text())["job"]["shard_lines"] == 500
    # A rerun on two workers continues the run (its shards of 500), not refused.
    summary = corpus.translate_corpus(
        [os.fspath(directory / "*")], os.fspath(output), "unused", job,
        load_runner=ReversingRunner, workers=2,
    )  # fmt: skip
    assert summary["kept_from_earlier_runs"] == 2000
