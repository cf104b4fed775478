"""benchmarks/corpus_translation.py: its four rows over the letter
reverser's CTranslate2 export, a few sentences, each row's translations
the loop's."""

import os
import subprocess
import sys

import pytest

from tests.benchmarks.tables import overlap
from tests.benchmarks.tables import printed
from tests.benchmarks.tables import quotient
from tests.training.helpers import letter_reversal_corpus

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "benchmarks")

pytestmark = [pytest.mark.tensorflow_only, pytest.mark.large]  # starts Beam's processes


def test_the_table_has_the_loop_the_pipeline_and_its_ceiling(reverser_export, tmp_path):
    source = tmp_path / "sentences.txt"
    source.write_text("\n".join(letter_reversal_corpus(30, seed=2)[0]) + "\n")
    command = [sys.executable, os.path.join(BENCHMARKS, "corpus_translation.py")]
    command += ["--export", reverser_export("CTranslate2Translator"), "--sentences", str(source)]
    command += ["--count", "24", "--shard_lines", "5", "--batch_size", "4"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")][2:]
    cores = os.cpu_count()
    names = ["loop", "beam 1 worker", f"beam {cores} workers", f"{cores} loops side by side"]
    assert [r.split("|")[1].strip() for r in rows] == names
    loop = [printed(c) for c in rows[0].split("|")[3:8:2]]  # after and with loading, loading
    for row in rows:
        batch, after, ratio, with_loading, with_ratio, loading, same = (
            c.strip() for c in row.split("|")[2:9]
        )
        assert batch == "4"  # --batch_size, in every row
        # On 24 sentences the pipeline's start dwarfs its work: its ratios
        # may print as 0.00, but they are always its speed over the loop's.
        assert overlap(printed(ratio), quotient(printed(after), loop[0]))
        if row is rows[-1]:  # the ceiling leaves the loading out
            assert (with_loading, with_ratio, loading) == ("-", "-", "-")
        else:
            assert overlap(printed(with_ratio), quotient(printed(with_loading), loop[1]))
            # The seconds with loading are those after it plus the loading.
            seconds_with = quotient((24, 24), printed(with_loading))
            seconds_after = quotient((24, 24), printed(after))
            low, high = printed(loading)
            assert overlap(seconds_with, (seconds_after[0] + low, seconds_after[1] + high))
        assert same == "24 / 24"
