"""`wmt_ende.py`'s synthetic data (`wmt_synthetic`): back-translation of
monolingual text and distillation from a teacher, each translated by the
corpus pipeline with an export (the trained letter reverser's CTranslate2
export stands for the reverse model and the teacher), tiny runs on local
files the test writes."""

import gzip
import json

import pytest

from keras_transformer.tokenization import SentencePieceTokenizer
from keras_transformer_runtime import CTranslate2Translator
from tests.examples.helpers import TINY_RUN_FLAGS
from tests.examples.helpers import load_example
from tests.training.helpers import letter_reversal_corpus

pytestmark = pytest.mark.tensorflow_only  # the example is TensorFlow's

SOURCES, TARGETS = letter_reversal_corpus(120, seed=8)
MONOLINGUAL = letter_reversal_corpus(30, seed=9)[1]


def write_files(directory):
    """Local parallel files and a monolingual target file (one empty line)."""
    files = {}
    for name, lines in (
        ("train.en", SOURCES[:100]),
        ("train.de", TARGETS[:100]),
        ("test.en", SOURCES[100:]),
        ("test.de", TARGETS[100:]),
        ("mono.de", MONOLINGUAL[:10] + [""] + MONOLINGUAL[10:]),
    ):
        files[name] = directory / f"{name}.gz"
        files[name].write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    return {name: str(path) for name, path in files.items()}


def run_flags(files, model_dir):
    return [
        "--train_src", files["train.en"], "--train_tgt", files["train.de"],
        "--test_src", files["test.en"], "--test_ref", files["test.de"],
        "--model_dir", str(model_dir), "--synthetic_workers", "1", *TINY_RUN_FLAGS,
    ]  # fmt: skip


def read_gzip_lines(path):
    return gzip.decompress(path.read_bytes()).decode().splitlines()


@pytest.mark.parametrize(
    "flags, message",
    [
        ("--monolingual_tgt m.de", "--monolingual_tgt and --backtranslate_with go together"),
        ("--bt_tag", "--bt_tag and --bt_ratio go with --monolingual_tgt"),
        ("--monolingual_tgt m --backtranslate_with r --bt_ratio 0", "--bt_ratio must be positive"),
        ("--distill_from t --synthetic_workers 0", "--synthetic_workers must be positive"),
        ("--distill_from t", "synthetic data needs local files or --data"),
        ("--data multi30k --target_langs de,fr --distill_from t", "one target language"),
    ],
)
def test_synthetic_data_flags_are_checked(flags, message, capsys):
    with pytest.raises(SystemExit):
        load_example("wmt_config").parse_config(flags.split())
    assert message in capsys.readouterr().err


def test_a_model_is_a_runs_export_an_export_or_neither(tmp_path, capsys):
    synthetic = load_example("wmt_synthetic")
    config = load_example("wmt_config").parse_config(["--model_dir", str(tmp_path / "run")])
    run = tmp_path / "deen"
    run.mkdir()
    (run / "training_done.json").write_text("{}")
    with pytest.raises(SystemExit, match="is a run without an export"):
        synthetic.export_of(config, str(run), "backtranslate_with")
    (run / "export.json").write_text(json.dumps({"export_dir": "/exports/deen"}))
    assert synthetic.export_of(config, str(run), "backtranslate_with") == "/exports/deen"
    # Recorded relative to the run, so that a project moved whole still finds it.
    (run / "export.json").write_text(json.dumps({"export_dir": "../exports/deen"}))
    found = synthetic.export_of(config, str(run), "backtranslate_with")
    assert found == str(tmp_path / "exports" / "deen")
    assert synthetic.export_of(config, "de.tflite", "distill_from") == "de.tflite"
    with pytest.raises(SystemExit, match="--distill_from: .*nothing is neither a run"):
        synthetic.export_of(config, str(tmp_path / "nothing"), "distill_from")


@pytest.mark.large  # translates on Beam, trains and evaluates: two runs
def test_back_translation_and_distillation(reverser_export, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    files = write_files(tmp_path)
    export = reverser_export("CTranslate2Translator")
    runner = CTranslate2Translator(export)
    script = load_example("wmt_ende")

    bt_run = tmp_path / "bt"
    flags = ["--monolingual_tgt", files["mono.de"], "--backtranslate_with", export, "--bt_tag"]
    script.main([*run_flags(files, bt_run), *flags])
    sources = read_gzip_lines(bt_run / "backtranslation" / "pairs.src.gz")
    targets = read_gzip_lines(bt_run / "backtranslation" / "pairs.tgt.gz")
    assert targets == MONOLINGUAL  # the empty line is an error record, not a pair
    assert sources == runner.translate(MONOLINGUAL)
    errors = (bt_run / "backtranslation" / "errors-00000-00000.jsonl").read_text()
    assert json.loads(errors) == {"file": 0, "line": 11, "source": "", "error": "empty line"}
    tokenizer = SentencePieceTokenizer.from_file(bt_run / "spm.model")
    pieces = [tokenizer.id_to_piece(i) for i in tokenizer.tokenize("<BT> a b").numpy()]
    assert "<BT>" in pieces and not any("BT" in p and p != "<BT>" for p in pieces)
    config = json.loads((bt_run / "config.json").read_text())
    assert config["bt_tag"] and config["backtranslate_with"] == export
    summary = json.loads((bt_run / "summary.json").read_text())
    described = "100 real and 30 back-translated pairs (starting with <BT>), drawn 0.769 / 0.231"
    assert summary["training_pairs"] == described  # 30 / 130 of the draws are synthetic
    assert f"| training pairs | {described} |" in (bt_run / "summary.md").read_text()

    kd_run = tmp_path / "kd"
    script.main([*run_flags(files, kd_run), "--distill_from", export])
    sources = read_gzip_lines(kd_run / "distillation" / "pairs.src.gz")
    targets = read_gzip_lines(kd_run / "distillation" / "pairs.tgt.gz")
    assert sources == SOURCES[:100]
    assert targets == runner.translate(SOURCES[:100])
    summary = json.loads((kd_run / "summary.json").read_text())
    assert "synthetic data" in summary["stage_seconds"]
    assert summary["training_pairs"] == (
        f"100 pairs: {export}'s translations of the training sources"
    )
