"""benchmarks/corpus_translation.py: its four rows over the letter
reverser's CTranslate2 export, a few sentences, each row's translations
the loop's."""

import os
import subprocess
import sys

import pytest

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
    loop = [_printed(c) for c in rows[0].split("|")[2:7:2]]  # after and with loading, loading
    for row in rows:
        after, ratio, with_loading, with_ratio, loading, same = (
            c.strip() for c in row.split("|")[2:8]
        )
        # On 24 sentences the pipeline's start dwarfs its work: its ratios
        # may print as 0.00, but they are always its speed over the loop's.
        assert _overlap(_printed(ratio), _quotient(_printed(after), loop[0]))
        if row is rows[-1]:  # the ceiling leaves the loading out
            assert (with_loading, with_ratio, loading) == ("-", "-", "-")
        else:
            assert _overlap(_printed(with_ratio), _quotient(_printed(with_loading), loop[1]))
            # The seconds with loading are those after it plus the loading.
            seconds_with = _quotient((24, 24), _printed(with_loading))
            seconds_after = _quotient((24, 24), _printed(after))
            low, high = _printed(loading)
            assert _overlap(seconds_with, (seconds_after[0] + low, seconds_after[1] + high))
        assert same == "24 / 24"


def _printed(cell):
    """The interval of values that print as `cell` (speeds print to 0.1,
    ratios and seconds to 0.01): 15.7 is anything from 15.65 to 15.75."""
    half = 0.5 * 10 ** -len(cell.partition(".")[2])
    return float(cell) - half, float(cell) + half


def _quotient(numerator, denominator):
    return numerator[0] / denominator[1], numerator[1] / denominator[0]


def _overlap(a, b, slack=1e-9):
    return a[0] <= b[1] + slack and b[0] <= a[1] + slack
