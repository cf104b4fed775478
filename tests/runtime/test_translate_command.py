"""`kt-translate`'s arguments and line handling, with runners that need no
model (the SavedModel runs: test_translate.py; the other kinds': their
export tests)."""

import io

import pytest

import keras_transformer_runtime.translate as translate_cli
import keras_transformer_runtime.translate_output as translate_output
from keras_transformer_runtime.runners.loading import KINDS
from tests.runtime.text.test_documents import RuleRunner


class DrawingRunner(RuleRunner):
    """`RuleRunner`, whose draws are its translations."""

    def _sample(self, sentences, num_samples, seed, batch_size):
        return self._translate_with_scores(sentences, num_samples, False, batch_size)


@pytest.fixture
def loaded(monkeypatch):
    """What `load_runner` is asked to load: `(path, options)`, the runner
    an upper-casing `RuleRunner`."""
    asked = []

    def load_runner(path, **options):
        asked.append((path, options))
        return DrawingRunner()

    monkeypatch.setattr(translate_cli, "load_runner", load_runner)
    return asked


@pytest.mark.parametrize(
    "path, kind",
    [
        ("ende.tflite", "litert"),
        ("ende.onnx", "onnx"),
        ("ct2", "ctranslate2"),
        ("sm", "saved_model"),
    ],
)
def test_the_kind_is_read_from_the_path(cli, loaded, tmp_path, path, kind):
    (tmp_path / "ct2").mkdir()
    (tmp_path / "ct2" / "model.bin").write_bytes(b"")
    (tmp_path / "sm").mkdir()
    code, out, err = cli("--model", str(tmp_path / path), stdin="a dog\n")
    assert code == 0, err
    assert out == b"A DOG\n" and err == ""
    assert loaded[0][1]["kind"] == kind


def test_kind_overrides_the_path_and_former_flags_still_work(cli, loaded):
    code, out, err = cli("--model", "gs://bucket/ende", "--kind", "ctranslate2", stdin="x\n")
    assert code == 0 and out == b"X\n", err
    assert loaded[-1] == (
        "gs://bucket/ende",
        {"threads": None, "version": None, "compute_type": "default", "kind": "ctranslate2"},
    )
    code, out, err = cli("--litert_model", "anything", stdin="x\n")
    assert code == 0 and out == b"X\n"
    assert loaded[-1][1]["kind"] == "litert"
    assert "--litert_model is now --model" in err


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "name the model with --model PATH (exactly one). Received: none"),
        (["--model", "a.onnx", "--onnx_model", "b.onnx"], "Received: --model, --onnx_model"),
        (["--model", "nowhere"], "or name its kind with --kind"),
        (["--model", "a.onnx", "--kind", "keras"], "invalid choice: 'keras'"),
    ],
)
def test_a_model_not_named_once_is_a_usage_error(cli, loaded, args, message):
    code, out, err = cli(*args, stdin="x\n")
    assert code == 2 and out == b"" and message in err
    assert loaded == []
    assert set(KINDS) == {"litert", "onnx", "ctranslate2", "saved_model"}


def test_sampling_settings_reach_the_runner_and_go_with_sample_only(cli, loaded):
    from keras_transformer_runtime.runners.loading import load_runner

    args = ("--model", "m.onnx", "--temperature", "0.7", "--top_k", "20", "--top_p", "0.9")
    code, _, err = cli(*args, stdin="x\n")
    assert code == 2 and "go with --mode sample" in err and loaded == []
    code, out, err = cli(*args, "--mode", "sample", stdin="x\n")
    assert code == 0 and out == b"X\n", err
    assert {k: loaded[-1][1][k] for k in ("temperature", "top_k", "top_p")} == {
        "temperature": 0.7,
        "top_k": 20,
        "top_p": 0.9,
    }
    # A kind whose search is in the file refuses settings that differ.
    with pytest.raises(ValueError, match="only a CTranslate2 export takes them"):
        from keras_transformer_runtime.runners import loading

        loading._check_exported(_Exported(), "onnx", {"top_k": 20})
    loading._check_exported(_Exported(), "onnx", {"top_k": 0})  # as exported: fine
    assert callable(load_runner)


class _Exported:
    from keras_transformer_runtime.runners.settings import DecodingSettings

    settings = DecodingSettings()


@pytest.mark.parametrize("model", ["--model", "--ctranslate2_dir"])
@pytest.mark.parametrize(
    "argument, value, accepted",
    [
        ("--seed", "-1", "in [0, 4294967295]"),
        ("--seed", "4294967296", "in [0, 4294967295]"),
        ("--version", "-1", "0 or more"),
    ],
)
def test_command_line_arguments_out_of_range_are_usage_errors(
    cli, model, argument, value, accepted
):
    # Checked before anything is loaded: the model directory is not read.
    code, out, err = cli(model, "/nonexistent", "--mode", "sample", argument, value, stdin="a\n")
    assert code == 2 and out == b""
    assert f"{argument} must be" in err and accepted in err and f"{argument}={value}" in err


def test_command_line_line_handling():
    stream = io.BytesIO(b"a\r\nb \r c\n\nlast")
    assert translate_cli.read_lines(stream) == [b"a", b"b \r c", b"", b"last"]
    assert translate_cli.invalid_utf8([b"ok", b"\xff", "é".encode()]) == [2]
    one_line = translate_output.one_line
    assert one_line("Ein Hund\nläuft\r\nschnell\u2028.") == "Ein Hund läuft schnell ."


class RecordingRunner:
    """A runner that records what `translate_with_constraints` is asked."""

    def translate_with_constraints(
        self, sentences, constraints, banned, batch_size=None, glossary=None, target_lang=None
    ):
        from keras_transformer_runtime.runners.results import Hypothesis

        self.asked = (sentences, constraints, banned, glossary, target_lang)
        self.batch_size = batch_size
        return [Hypothesis("", 0.0, constraints_met=True) for _ in sentences]


def test_a_glossary_goes_with_the_constraints_of_constrain_mode(tmp_path):
    """`--mode constrain --glossary FILE` used only the lines' own
    constraints: the glossary's terms were silently dropped. The runner
    gets both (and gives each sentence its terms: tests/runtime/
    test_documents.py)."""
    from keras_transformer_runtime.text.glossary import Glossary

    glossary = Glossary([("dog", "Hund"), ("park", "Park")])
    lines = [b"A dog in the park.\tHund ||| rennt\tlaeuft", b"A cat.\tKatze", b"The dog.\t"]
    runner = RecordingRunner()
    args = translate_cli.make_parser().parse_args(["--export_dir", "x", "--mode", "constrain"])
    translate_cli.run(runner, args, lines, glossary)
    sentences, constraints, banned, given, target_lang = runner.asked
    assert sentences == [b"A dog in the park.", b"A cat.", b"The dog."]
    assert constraints == [["Hund", "rennt"], ["Katze"], []]
    assert banned == [["laeuft"], [], []]
    assert given is glossary and target_lang is None
    # Without --batch_size, the runner's own default: its bulk batches
    # (tests/runtime/runners/test_runner.py).
    assert runner.batch_size is None


def test_a_line_with_a_sentence_over_the_limit_is_named_on_stderr(cli, monkeypatch):
    from tests.runtime.text.test_documents import RuleRunner

    monkeypatch.setattr(translate_cli, "load_runner", lambda path, **options: RuleRunner(
        max_input_length=6))  # fmt: skip
    lines = "fits.\nab cd ef gh. Ok.\nfine\nabcdefgh ij"
    code, out, err = cli("--model", "unused.onnx", stdin=lines)
    assert code == 0, err
    assert out.decode().splitlines() == ["FITS.", "AB CD EF GH. OK.", "FINE", "ABCDEFGH IJ"]
    assert (
        "warning: 2 line(s) had a sentence longer than max_input_length (6 tokens): translated "
        "in pieces of whole words (line 2, 4); a word alone was longer and cut in line 4."
    ) in err


def test_format_html_translates_stdin_as_one_page(cli, monkeypatch, tmp_path):
    from tests.runtime.text.test_formats import WordReversingRunner

    monkeypatch.setattr(translate_cli, "load_runner", lambda path, **options: WordReversingRunner())
    page = "<html><body>\n<p><b>a b</b> c</p>\n<ul>\n  <li>d e</li>\n</ul>\n</body></html>\n"
    code, out, err = cli("--model", str(tmp_path), "--format", "html", stdin=page)
    assert code == 0, err
    assert out.decode() == (
        "<html><head></head><body>\n<p>C <b>B A</b></p>\n<ul>\n  <li>E D</li>\n</ul>\n\n"
        "</body></html>"
    )
    assert err == ""  # the <head> a page may leave out is no repair
    code, out, err = cli("--model", str(tmp_path), "--format", "markdown", stdin="# a *b*\n")
    assert (code, out, err) == (0, b"# *B* A\n", "")
    code, _, err = cli("--model", str(tmp_path), "--format", "html", "--n_best", "2", stdin="a")
    assert code == 2 and "--format html goes with --mode translate" in err


def test_a_document_the_export_refuses_part_of_is_an_error_not_a_crash(cli, monkeypatch, tmp_path):
    monkeypatch.setattr(translate_cli, "load_runner", lambda path, **options: RuleRunner())
    page = "<p>One.</p><p>REFUSE this.</p>"
    code, out, err = cli("--model", str(tmp_path), "--format", "html", stdin=page)
    assert (code, out) == (1, b"")
    assert "error: The export refuses a part of the document: too long" in err
