"""`python -m keras_transformer_runtime.translate_corpus` as users run it, over the
trained letter reverser's exports on Beam's local runner with worker
processes: each record is the runner's own translation of its line, in
the inputs' order, and sampling gives the same files on one worker or
two."""

import gzip
import json
import os
import subprocess
import sys

import pytest

from keras_transformer_runtime import CTranslate2Translator
from keras_transformer_runtime import SavedModelTranslator
from keras_transformer_runtime.corpus import pipeline as corpus
from tests.training.helpers import letter_reversal_corpus

pytestmark = [pytest.mark.tensorflow_only, pytest.mark.large]  # starts Beam's worker processes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SENTENCES = letter_reversal_corpus(40, seed=5)[0]


@pytest.fixture
def inputs(tmp_path):
    """The sentences in two inputs, the second gzip, with an empty line."""
    directory = tmp_path / "mono"
    directory.mkdir()
    (directory / "part1.txt").write_text("\n".join(SENTENCES[:25]) + "\n\n")
    with gzip.open(directory / "part2.txt.gz", "wt") as f:
        f.write("\n".join(SENTENCES[25:]) + "\n")
    return os.fspath(directory / "part*")


def translate_corpus(export, inputs, output, *flags):
    """Runs the command; its summary (the last line on stderr)."""
    command = [
        sys.executable,
        "-m",
        "keras_transformer_runtime.translate_corpus",
        "--export_dir",
        export,
    ]
    done = subprocess.run(
        [*command, "--input", inputs, "--output", os.fspath(output), "--shard_lines", "7", *flags],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stderr.strip().splitlines()[-1])


def test_a_saved_model_on_two_workers_gives_the_runners_translations(
    reverser_export, inputs, tmp_path
):
    export = reverser_export("SavedModelTranslator")
    summary = translate_corpus(export, inputs, tmp_path / "out", "--workers", "2", "--threads", "1")
    records = list(corpus.read_records(os.fspath(tmp_path / "out")))
    expected = SavedModelTranslator(export).translate(SENTENCES)
    translated = [r for r in records if "error" not in r]
    assert [r["source"] for r in translated] == SENTENCES
    assert [r["translation"] for r in translated] == expected
    assert [(r["file"], r["line"], r["error"]) for r in records if "error" in r] == [
        (0, 26, "empty line")
    ]
    assert (summary["lines"], summary["translated"], summary["errors"]) == (41, 40, 1)


def test_ctranslate2_scores_are_the_runners(reverser_export, inputs, tmp_path):
    export = reverser_export("CTranslate2Translator")
    translate_corpus(export, inputs, tmp_path / "out", "--workers", "1", "--with_scores")
    records = list(corpus.read_records(os.fspath(tmp_path / "out"), kinds=("translations",)))
    expected = CTranslate2Translator(export).translate_with_scores(SENTENCES)
    assert [r["translation"] for r in records] == [h[0].translation for h in expected]
    assert [r["score"] for r in records] == pytest.approx([h[0].score for h in expected], abs=1e-4)


def test_samples_are_the_same_on_one_worker_or_two(reverser_export, inputs, tmp_path):
    export = reverser_export("SavedModelTranslator")
    flags = ["--mode", "sample", "--seed", "3"]
    translate_corpus(export, inputs, tmp_path / "one", *flags, "--workers", "1")
    translate_corpus(export, inputs, tmp_path / "two", *flags, "--workers", "2", "--threads", "1")
    for name in sorted(os.listdir(tmp_path / "one")):
        if name.endswith(".jsonl"):
            assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
