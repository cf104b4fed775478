"""`kt-translate` over a SavedModel: modes, line handling and the
export's limits, with the session's exported micro translator (the
CTranslate2, LiteRT and ONNX runs are in their export tests; what needs
no model, in test_translate_command.py)."""

import os
import subprocess
import sys

import numpy as np
import pytest

import keras_transformer_runtime.translate_output as translate_output

# TensorFlow by design; skipped where the runtime runs without it.
tf = pytest.importorskip("tensorflow")
export_saved_model = pytest.importorskip("keras_transformer.export").export_saved_model
pytestmark = pytest.mark.tensorflow_only

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


@pytest.fixture
def exported(exported_translator):
    """The session's micro translator and its SavedModel."""
    return exported_translator


def decoded(strings):
    return np.vectorize(lambda b: b.decode("utf-8", "replace"), otypes=[object])(
        strings.numpy()
    ).tolist()


@pytest.mark.large  # loads the exported translator
def test_command_line(exported):
    translator, path = exported
    sentences = ["A dog runs.", "", "Two dogs."]
    base = os.path.dirname(path)
    run = lambda *args, **kw: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "keras_transformer_runtime.translate", "--model", base, *args],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=ROOT,
        **kw,
    )
    result = run("--batch_size", "2", input="\n".join(sentences) + "\n")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split("\n")[:3] == translator.translate(sentences)
    info = run("--info")
    assert info.returncode == 0, info.stderr[-3000:]
    beam_size = translator.settings.beam_size
    assert f'"beam_size": {beam_size}' in info.stdout and '"max_batch_size": 256' in info.stdout
    signature = "text: string[None] -> score: float32[None], translation: string[None]"
    assert f"signature serving_default: {signature}" in info.stdout


_LOADED = {}


@pytest.fixture
def cli(cli, monkeypatch):
    """The runtime's `cli` (tests/runtime/conftest.py), each SavedModel
    loaded once per session (`test_command_line` runs the real
    subprocess)."""
    real_load = tf.saved_model.load

    def load(path):
        if path not in _LOADED:
            _LOADED[path] = real_load(path)
        return _LOADED[path]

    monkeypatch.setattr(tf.saved_model, "load", load)
    return cli


@pytest.mark.large  # loads the exported translator
def test_command_line_modes(exported, cli, tmp_path):
    translator, path = exported
    sentences = ["A dog runs.", "", "Two dogs."]
    run = lambda *args, stdin: cli("--model", path, *args, stdin=stdin)  # noqa: E731
    stdin = "\n".join(sentences) + "\n"
    beam = translator.settings.beam_size
    code, out, err = run("--n_best", str(beam), "--with_scores", "--batch_size", "2", stdin=stdin)
    assert code == 0, err[-3000:]
    expected = translator.graph.n_best(tf.constant(sentences))
    rows = [line.split("\t") for line in out.decode().splitlines()]
    assert [int(r[0]) for r in rows] == [line for line in (1, 2, 3) for _ in range(beam)]
    assert [r[2] for r in rows] == decoded(tf.reshape(expected["translations"], [-1]))
    np.testing.assert_allclose(
        [float(r[1]) for r in rows], expected["scores"].numpy().ravel(), atol=1e-4
    )
    pairs = ["A dog runs.\tEin Hund rennt.", "\t", "Two dogs.\tZwei."]
    code, out, err = run("--mode", "score", stdin="\n".join(pairs) + "\n")
    assert code == 0, err[-3000:]
    expected = translator.graph.score(
        tf.constant([p.split("\t")[0] for p in pairs]),
        tf.constant([p.split("\t")[1] for p in pairs]),
    )
    rows = [line.split("\t") for line in out.decode().splitlines()]
    assert len(rows) == 3
    np.testing.assert_allclose([float(r[0]) for r in rows], expected["score"].numpy(), atol=1e-4)
    np.testing.assert_allclose([float(r[1]) for r in rows], expected["log_prob"].numpy(), atol=1e-4)
    tokens = (expected["target_tokens"].numpy()[0] != b"").sum()
    np.testing.assert_allclose(
        [float(v) for v in rows[0][2].split()],
        expected["token_scores"].numpy()[0, :tokens],
        atol=1e-4,
    )
    # Token scores after each translation: as scoring that translation gives them.
    code, out, err = run("--with_token_scores", "--with_scores", stdin=stdin)
    assert code == 0, err[-3000:]
    rows = [line.split("\t") for line in out.decode().splitlines()]
    expected = translator.graph.translate_with_alignments(tf.constant(sentences))
    assert [r[1] for r in rows] == decoded(expected["translation"])
    for row, values in zip(rows, expected["token_scores"].numpy(), strict=True):
        printed = [float(v) for v in row[2].split()]
        np.testing.assert_allclose(printed, values[: len(printed)], atol=1e-4)
        assert not values[len(printed) :].any()
        assert len(printed) >= 1  # EOS at least
    code, _, err = run("--with_token_scores", "--n_best", "2", stdin=stdin)
    assert code == 2 and "--with_token_scores goes with" in err
    # Terminology: constraints and banned phrases per line, or a glossary's.
    lines = ["A dog runs.\tHund ||| rennt", "\t\tein", "Two dogs.\tZwei"]
    code, out, err = run("--mode", "constrain", stdin="\n".join(lines) + "\n")
    assert code == 0, err[-3000:]
    fields = [(line.split("\t") + [""])[:3] for line in lines]
    expected = translator.graph.translate_with_constraints(
        *(tf.constant([f[i] for f in fields]) for i in range(3))
    )
    assert out.decode().splitlines() == decoded(expected["translation"])
    unmet = [i + 1 for i, ok in enumerate(expected["constraints_met"].numpy()) if not ok]
    assert ("warning: the length limit came before" in err) == bool(unmet)
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("dog\tHund\ntwo dogs\tzwei Hunde\n", encoding="utf-8")
    code, out, err = run("--glossary", str(glossary), stdin=stdin)
    assert code == 0, err[-3000:]
    expected = translator.graph.translate_with_constraints(
        tf.constant(sentences), tf.constant(["Hund", "", "zwei Hunde"]), tf.constant([""] * 3)
    )
    assert out.decode().splitlines() == decoded(expected["translation"])
    code, _, err = run("--mode", "constrain", stdin="no tab\n")
    assert code == 2 and "line 1 has 0 tabs" in err
    code, _, err = run("--glossary", str(glossary), "--n_best", "2", stdin=stdin)
    assert code == 2 and "--glossary go with" in err
    code, sampled, err = run("--mode", "sample", "--n_best", "2", "--seed", "4", stdin=stdin)
    assert code == 0, err[-3000:]
    assert [line.split("\t")[0] for line in sampled.decode().splitlines()] == list("112233")
    assert run("--mode", "sample", "--n_best", "2", "--seed", "4", stdin=stdin)[1] == sampled
    code, _, err = run("--mode", "score", stdin="one\ttwo\nno tab\n")
    assert code == 2 and "line 2 has 0 tabs" in err
    too_many = translator.settings.beam_size + 1
    code, _, err = run("--n_best", str(too_many), stdin=stdin)
    assert code == 2 and f"Received: --n_best={too_many}" in err


@pytest.mark.large  # loads the exported translator
def test_command_line_keeps_within_the_exports_limits(micro_translator, tmp_path, cli):
    path = export_saved_model(
        micro_translator, tmp_path, max_batch_size=2, max_input_tokens=12, warmup_sentences=()
    )
    short = ["a b", "c d e", "f", "g h", "i"]
    code, out, err = cli("--model", path, "--batch_size", "300", stdin="\n".join(short))
    assert code == 0, err[-3000:]
    assert out.decode().splitlines() == micro_translator.translate(short)
    # A line over max_input_tokens alone: the lines before it are written,
    # and the error names it and the limit.
    long = " ".join("abcdefghij" * 3)
    lines = short[:3] + [long] + short[3:]
    code, out, err = cli("--model", path, stdin="\n".join(lines))
    assert code == 1
    assert out.decode().splitlines() == micro_translator.translate(short[:3])
    assert "line 4" in err and "max_input_tokens=12" in err
    pairs = [f"{s}\t{s}" for s in short[:2]] + [f"a\t{long}"]
    code, out, err = cli("--model", path, "--mode", "score", stdin="\n".join(pairs))
    assert code == 1 and len(out.decode().splitlines()) == 2
    assert "line 3" in err and "max_input_tokens=12 target tokens" in err


@pytest.mark.large  # loads the exported translator
def test_command_line_keeps_output_line_i_for_input_line_i(exported, cli):
    translator, path = exported
    # Invalid UTF-8, a lone carriage return inside a line, a CRLF ending.
    lines = [b"A dog runs.", b"bad \xff\xfe byte", b"one \r line", b"Two dogs.\r"]
    code, out, err = cli("--model", path, stdin=b"\n".join(lines) + b"\n")
    assert code == 0, err[-3000:]
    output = out.decode("utf-8").split("\n")
    assert output[-1] == "" and len(output) == len(lines) + 1
    expected = translator.graph.serving_default(
        tf.constant([lines[0], lines[1], lines[2], lines[3][:-1]])
    )["translation"].numpy()
    texts = [t.decode("utf-8", "replace") for t in expected]
    assert output[:-1] == [translate_output.one_line(t) for t in texts]
    assert "1 input line(s) are not valid UTF-8 (line 2)" in err
