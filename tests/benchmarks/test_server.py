"""benchmarks/server.py: its clients against a served export, and its
table (the letter reverser's LiteRT export, a few sentences)."""

import os
import subprocess
import sys

import pytest

from keras_transformer_runtime import LiteRTTranslator
from tests.benchmarks.tables import overlap
from tests.benchmarks.tables import printed
from tests.benchmarks.tables import quotient
from tests.export.test_server import served
from tests.training.helpers import letter_reversal_corpus

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "benchmarks")

pytestmark = [pytest.mark.tensorflow_only, pytest.mark.large]  # starts server processes


@pytest.mark.parametrize("runner", ["LiteRTTranslator", "CTranslate2Translator"])
def test_the_table_has_a_row_per_server_setting(reverser_export, tmp_path, runner):
    path = str(reverser_export(runner))
    sentences = letter_reversal_corpus(16, seed=5)[0]
    source = tmp_path / "sentences.txt"
    source.write_text("\n".join(sentences) + "\n")
    command = [sys.executable, os.path.join(BENCHMARKS, "server.py"), "--model", path]
    command += ["--sentences", str(source), "--clients", "4", "--count", "16", "--rounds", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    tables = done.stdout.split("\n\n")
    rows = [line for line in tables[1].splitlines() if line.startswith("| ")][2:]
    assert [r.split("|")[1].strip() for r in rows] == ["1 x all", "2 x 1"]
    for row in rows:
        batch, speed, direct, ratio = (c.strip(" x") for c in row.split("|")[2:6])
        assert 0 < float(batch) <= 4 and float(speed) > 0 and float(direct) > 0
        # The workers ran batches for part of the clients' pass, never more.
        assert 0 < float(row.split("|")[8].strip(" %")) <= 100
        assert overlap(printed(ratio), quotient(printed(speed), printed(direct)))
    if runner != "CTranslate2Translator":
        assert len(tables) == 2  # no CTranslate2 alone to compare with
        return
    # CTranslate2 alone at its best on the same batches, with its setting.
    alone = [line for line in tables[2].splitlines() if line.startswith("| ")][2:]
    assert [r.split("|")[1].strip() for r in alone] == ["1 x all", "2 x 1"]
    for row in alone:
        cells = [c.strip() for c in row.split("|")[2:9]]
        speed, best, setting, ratio, shared, separate = cells[:6]
        assert setting.startswith("inter ") and " examples" in setting
        assert overlap(printed(ratio.rstrip("x")), quotient(printed(speed), printed(best)))
        assert float(shared) > 0 and (separate == "" or float(separate) > 0)


def test_the_clients_get_the_runners_translations(reverser_export):
    sys.path.insert(0, BENCHMARKS)
    import server as benchmark

    path = reverser_export("LiteRTTranslator")
    sentences = letter_reversal_corpus(12, seed=6)[0]
    with served(path, name="bench") as url:
        port = int(url.rsplit(":", 1)[1])
        expected = LiteRTTranslator(path).translate(sentences)
        client = benchmark.Client(port)
        assert client.translate(sentences) == expected
        client.close()
        speed, latencies = benchmark.clients_pass(port, sentences, 3)
        assert speed > 0 and len(latencies) == len(sentences)
