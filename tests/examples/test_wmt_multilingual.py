"""`wmt_ende.py --data multi30k --target_langs de,fr,cs`: one model for
three directions, from a `file://` mirror the test writes: tagged sources
mixed by temperature sampling, tags as single pieces, each direction
scored with its off-target rate, and a per-direction summary table."""

import gzip
import io
import json
import os

import pytest

from keras_transformer.tokenization import SentencePieceTokenizer
from keras_transformer_runtime import translate
from tests.examples.helpers import TINY_RUN_FLAGS
from tests.examples.helpers import load_example
from tests.examples.helpers import mirrored_corpus

pytestmark = pytest.mark.tensorflow_only  # the example is TensorFlow's

corpora = load_example("wmt_corpora")
LINES = {"train": 200, "valid": 12, "test": 9}
LANGUAGES = ("en", "de", "fr", "cs")
WORDS = {
    "en": "a dog runs the man sits on grass",
    "de": "ein hund läuft der mann sitzt im gras",
    "fr": "un chien court l'homme est assis sur herbe",
    "cs": "pes běží muž sedí na trávě a malý",
}


def text(role, language, count):
    words = WORDS[language].split()
    return "".join(
        " ".join(words[(i + k) % len(words)] for k in range(3 + i % 4)) + f" {role}\n"
        for i in range(count)
    ).encode()


CORPUS = mirrored_corpus(LINES, LANGUAGES, text)


def write_mirror(directory):
    directory.mkdir(parents=True)
    for role, count in LINES.items():
        for language in LANGUAGES:
            path = directory / CORPUS.file_name(role, language)
            path.write_bytes(gzip.compress(text(role, language, count)))
    return directory.as_uri()


def test_several_target_languages_need_a_corpus_that_has_them(capsys):
    parse = load_example("wmt_config").parse_config
    for flags, message in (
        ("--target_langs de,fr --train_src a --train_tgt b --test_src c --test_ref d", "--data"),
        ("--data multi30k --target_langs de,ja", "not 'ja'"),
        ("--data multi30k --target_langs de,,fr", "--target_langs"),
        ("--data multi30k --target_langs de,fr --temperature 0", "--temperature"),
    ):
        with pytest.raises(SystemExit):
            parse(flags.split())
        assert message in capsys.readouterr().err
    config = parse(["--data", "multi30k", "--target_langs", "de,fr,cs"])
    assert config.multilingual and config.target_codes == ("de", "fr", "cs")
    assert not config.uses_tfds


def test_the_training_languages_are_target_langs_not_target_lang(capsys):
    """Issue 78, item 3: `--target_lang` is kt-translate's, the one language
    to translate into; the example's training languages are
    `--target_langs`, and its former flag says so (not taken as an
    abbreviation of the new one)."""
    parse = load_example("wmt_config").parse_config
    with pytest.raises(SystemExit):
        parse(["--data", "multi30k", "--target_lang", "de,fr,cs"])
    err = capsys.readouterr().err
    assert "the languages a run trains into are --target_langs" in err
    assert parse(["--data", "multi30k", "--target_langs", "fr"]).target_codes == ("fr",)


@pytest.mark.large  # trains and evaluates: a whole run
def test_one_model_for_three_directions(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(corpora.CORPORA, "multi30k", CORPUS)
    monkeypatch.chdir(tmp_path)
    url = write_mirror(tmp_path / "mirror")
    results = load_example("wmt_ende").main(
        ["--data", "multi30k", "--data_url", url, "--target_langs", "de,fr,cs"]
        + ["--temperature", "2", *TINY_RUN_FLAGS, "--ctranslate2_dir", "ct2"]
    )
    # The command the run ends by suggesting works as printed (a
    # multilingual model's names its first language).
    [hint] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("try it")]
    assert hint.endswith("| kt-translate --model ct2 --target_lang de")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"A man is riding a bike.\n")))
    assert translate.main(hint.split("| kt-translate ")[1].split()) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1
    run = tmp_path / "runs" / "multi30k"
    test = results["test"]
    assert list(test["directions"]) == ["de", "fr", "cs"]
    assert test["sentences"] == 27 and all(d["sentences"] == 9 for d in test["directions"].values())
    for key in ("sacrebleu", "chrf", "off_target"):
        mean = sum(d[key] for d in test["directions"].values()) / 3
        assert test[key] == pytest.approx(mean)
    config = json.loads((run / "config.json").read_text())
    assert config["mixing_weights"] == pytest.approx({"de": 1 / 3, "fr": 1 / 3, "cs": 1 / 3})
    tokenizer = SentencePieceTokenizer.from_file(run / "spm.model")
    assert tokenizer.language_tags == (">>cs<<", ">>de<<", ">>fr<<")
    summary = (run / "summary.md").read_text()
    assert "| direction | test sacreBLEU | test chrF | test off-target |" in summary
    assert all(f"| en→{code} |" in summary for code in ("de", "fr", "cs"))
    assert " pairs in 3 directions, drawn de 0.333, fr 0.333, cs 0.333 |" in summary
    assert len((run / "hypotheses.test.txt").read_text().splitlines()) == 27
    evaluations = json.loads((run / "training_done.json").read_text())["evaluations"]
    assert {"val_bleu_de", "val_bleu_fr", "val_bleu_cs"} <= set(evaluations[-1])
    assert os.path.exists(run / "summary.json")


def test_a_run_recorded_with_target_lang_keeps_its_languages_frozen(tmp_path):
    """config.json of a run made before --target_langs records
    `target_lang`: a rerun into other languages is still refused."""
    config_module, stages = load_example("wmt_config"), load_example("wmt_stages")
    config = config_module.parse_config(["--model_dir", str(tmp_path), "--target_langs", "de"])
    stored = config.to_json()
    stored["target_lang"] = stored.pop("target_langs").replace("de", "fr")
    (tmp_path / "config.json").write_text(json.dumps(stored))
    with pytest.raises(SystemExit, match=r"target_langs: 'fr' -> 'de'"):
        stages.start_run(config)
    stored["target_lang"] = "de"
    (tmp_path / "config.json").write_text(json.dumps(stored))
    stages.start_run(config)  # the same languages: the rerun goes on
    assert json.loads((tmp_path / "config.json").read_text())["target_langs"] == "de"
