import io
import json
import os
import pathlib
import subprocess
import sys
import threading

import numpy as np
import pytest
import tensorflow as tf

import keras_transformer.export.saved_model as saved_model_module
import keras_transformer.translate as translate_cli
from keras_transformer import Transformer
from keras_transformer.export import existing_versions
from keras_transformer.export import export_saved_model

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design
# The tests of an export's contents load the session's exported translator
# (tracing every signature is the cost), and are large.
served = pytest.mark.large

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
# Raw bytes (latin-1 round trip in JSON): empty, long, invalid UTF-8, scripts.
HOSTILE = [
    "A dog runs.",
    "",
    " ".join(["word"] * 2000),
    b"bad \xff\xfe utf-8 \xc3".decode("latin-1"),
    "Ελληνικά, русский, 日本語 and emoji 😀🚀".encode("utf-8").decode("latin-1"),
    "Two dogs.",
]


@pytest.fixture
def exported(exported_translator):
    """The session's micro translator and its SavedModel (its tokenizer was
    never a file: the export carries it)."""
    return exported_translator


PREFIXES = ["Zwei", "", "x \xff", "", "Ein", ""]


def as_bytes(sentences):
    return [s.encode("latin-1") for s in sentences]


def load_in_fresh_process(path, requests, tmp_path):
    """Runs `load_without_keras.py` on `requests` (signature name ->
    inputs, strings as latin-1) and returns what it prints."""
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps(requests))
    result = subprocess.run(
        [sys.executable, os.path.join(HERE, "load_without_keras.py"), path, str(inputs)],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def decoded(strings):
    return np.vectorize(lambda b: b.decode("utf-8", "replace"), otypes=[object])(
        strings.numpy()
    ).tolist()


@served
def test_every_signature_loads_without_keras_both_ways_and_matches_python(exported, tmp_path):
    translator, path = exported
    text = tf.constant(as_bytes(HOSTILE))
    targets = HOSTILE[1:] + HOSTILE[:1]
    ids = translator.tokenizer(["Two dogs are playing."]).to_tensor()
    expected = {
        "serving_default": translator.translate_with_scores(text),
        "n_best": translator.translate_n_best(text),
        "score": translator.score_targets(text, tf.constant(as_bytes(targets))),
        "sample": translator.sample_with_scores(text, tf.constant(5, tf.int64)),
        "translate_with_alignments": translator.translate_with_alignments(text),
        "translate_with_options": translator.translate_with_options(
            text, tf.constant(as_bytes(PREFIXES)), tf.constant(4)
        ),
        "translate_with_constraints": translator.translate_with_constraints(
            text, tf.constant(as_bytes(PREFIXES)), tf.constant(as_bytes(targets))
        ),
        "tokenize": {"ids": ids, "lengths": tf.constant([ids.shape[1]], tf.int32)},
        "detokenize": {"text": translator.tokenizer.detokenize(ids)},
    }
    requests = {
        "serving_default": {"text": HOSTILE},
        "n_best": {"text": HOSTILE},
        "score": {"source": HOSTILE, "target": targets},
        "sample": {"text": HOSTILE, "seed": 5},
        "translate_with_alignments": {"text": HOSTILE},
        "translate_with_options": {"text": HOSTILE, "prefix": PREFIXES, "max_output_length": 4},
        "translate_with_constraints": {"text": HOSTILE, "constraints": PREFIXES, "banned": targets},
        "tokenize": {"text": ["Two dogs are playing."]},
        "detokenize": {"ids": ids.numpy().tolist()},
    }
    result = load_in_fresh_process(path, requests, tmp_path)
    assert sorted(requests) == result["signatures"]  # every signature is covered
    for name, outputs in expected.items():
        for way in ("eager", "session"):
            got = result["results"][name][way]
            assert sorted(got) == sorted(outputs), (name, way)
            for key, value in outputs.items():
                if value.dtype == tf.string:
                    assert got[key] == decoded(value), (name, way, key)
                else:
                    np.testing.assert_allclose(got[key], value.numpy(), rtol=1e-5, atol=1e-6)
    assert len(result["results"]["serving_default"]["eager"]["translation"]) == len(HOSTILE)


@served
def test_only_tensorflow_core_and_text_ops(exported, tmp_path):
    _, path = exported
    result = load_in_fresh_process(path, {"serving_default": {"text": ["x"]}}, tmp_path)
    assert result["unknown"] == []
    forbidden = [op for op in result["ops"] if "PyFunc" in op or op.startswith("Xla")]
    assert forbidden == []
    assert "SentencepieceTokenizeOp" in result["text"]
    assert set(result["text"]) <= {
        "SentencepieceOp",
        "SentencepieceTokenizeOp",
        "SentencepieceDetokenizeOp",
        "SentencepieceIdToStringOp",
    }


@served
def test_bad_input_keeps_every_sentence_in_order(exported):
    translator, path = exported
    serve = tf.saved_model.load(path).signatures["serving_default"]
    batch = serve(text=tf.constant(as_bytes(HOSTILE)))["translation"].numpy()
    assert len(batch) == len(HOSTILE)
    for i, sentence in enumerate(HOSTILE):  # each equals its translation alone
        alone = serve(text=tf.constant(as_bytes([sentence])))["translation"].numpy()[0]
        assert batch[i] == alone, i
    empty = serve(text=tf.constant([], tf.string))
    assert empty["translation"].shape == (0,) and empty["score"].shape == (0,)


@served
def test_sixteen_threads_get_the_single_thread_results(exported):
    _, path = exported
    serve = tf.saved_model.load(path).signatures["serving_default"]
    requests = [as_bytes(HOSTILE[i % 6 : i % 6 + 2] or HOSTILE[:1]) for i in range(16)]
    expected = [serve(text=tf.constant(r))["translation"].numpy().tolist() for r in requests]
    results = [None] * 16
    start = threading.Barrier(16)

    def call(i):
        start.wait()
        results[i] = serve(text=tf.constant(requests[i]))["translation"].numpy().tolist()

    threads = [threading.Thread(target=call, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == expected


@served
def test_other_signatures_settings_and_warmup(exported):
    translator, path = exported
    loaded = tf.saved_model.load(path)
    assert set(loaded.signatures) == {
        "serving_default",
        "n_best",
        "sample",
        "score",
        "translate_with_alignments",
        "translate_with_constraints",
        "translate_with_options",
        "tokenize",
        "detokenize",
    }
    text = tf.constant(["Two dogs are playing."])
    tokens = loaded.signatures["tokenize"](text=text)
    assert tokens["ids"].numpy().tolist() == [
        translator.tokenizer(["Two dogs are playing."])[0].numpy().tolist()
    ]
    assert (
        loaded.signatures["detokenize"](ids=tokens["ids"])["text"].numpy()[0]
        == b"Two dogs are playing."
    )
    n_best = loaded.signatures["n_best"](text=text)
    beam_size = translator.settings.beam_size
    assert n_best["translations"].shape == (1, beam_size) and beam_size > 1
    settings = json.loads(loaded.settings_json.numpy())
    limits = {"max_batch_size": 256, "max_input_tokens": 16_384}  # the defaults
    assert settings == {**translator.settings.to_dict(), **limits}
    with open(os.path.join(path, "assets.extra", "keras_transformer.json")) as f:
        assert json.load(f)["alpha"] == 0.6

    from tensorflow_serving.apis import prediction_log_pb2

    records = list(
        tf.data.TFRecordDataset(os.path.join(path, "assets.extra", "tf_serving_warmup_requests"))
    )
    log = prediction_log_pb2.PredictionLog.FromString(records[0].numpy())
    request = log.predict_log.request
    assert request.model_spec.signature_name == "serving_default"
    assert tf.make_ndarray(request.inputs["text"]).tolist()[0] == b"A man is riding a bicycle."


def test_versions_and_failed_exports(micro_translator, tmp_path, monkeypatch, quick_writes):
    translator = micro_translator
    base = tmp_path / "models"
    first = export_saved_model(translator, base, warmup_sentences=())
    second = export_saved_model(translator, base, warmup_sentences=())
    assert (os.path.basename(first), os.path.basename(second)) == ("1", "2")
    assert existing_versions(str(base)) == [1, 2]
    with pytest.raises(FileExistsError, match="overwrite=True"):
        export_saved_model(translator, base, version=2)
    export_saved_model(translator, base, version=2, overwrite=True, warmup_sentences=())
    assert quick_writes == [1, 2, 2]
    with pytest.raises(ValueError, match="Received: version=0"):
        export_saved_model(translator, base, version=0)

    def broken(translator, directory, version, limits, warmup_sentences):
        pathlib.Path(directory, "saved_model.pb").write_text("half of it")
        raise RuntimeError("disk full")

    monkeypatch.setattr(saved_model_module, "_write_export", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        export_saved_model(translator, base)
    assert sorted(os.listdir(base)) == ["1", "2"]  # no version 3, no temp dirs


@served
def test_command_line(exported):
    translator, path = exported
    sentences = ["A dog runs.", "", "Two dogs."]
    base = os.path.dirname(path)
    run = lambda *args, **kw: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "keras_transformer.translate", "--export_dir", base, *args],
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
def cli(monkeypatch, capsysbinary):
    """Runs the command line in this process: `run(*args, stdin=...)` ->
    `(exit code, stdout bytes, stderr text)`. Each SavedModel is loaded once
    per session (`test_command_line` runs the real subprocess)."""
    real_load = tf.saved_model.load

    def load(path):
        if path not in _LOADED:
            _LOADED[path] = real_load(path)
        return _LOADED[path]

    monkeypatch.setattr(tf.saved_model, "load", load)

    def run(*args, stdin=b""):
        stdin = stdin.encode() if isinstance(stdin, str) else stdin
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        try:
            code = translate_cli.main(list(args))
        except SystemExit as error:
            code = error.code
        captured = capsysbinary.readouterr()
        return code, captured.out, captured.err.decode("utf-8", "replace")

    return run


@served
def test_command_line_modes(exported, cli, tmp_path):
    translator, path = exported
    sentences = ["A dog runs.", "", "Two dogs."]
    run = lambda *args, stdin: cli("--export_dir", path, *args, stdin=stdin)  # noqa: E731
    stdin = "\n".join(sentences) + "\n"
    beam = translator.settings.beam_size
    code, out, err = run("--n_best", str(beam), "--with_scores", "--batch_size", "2", stdin=stdin)
    assert code == 0, err[-3000:]
    expected = translator.translate_n_best(tf.constant(sentences))
    rows = [line.split("\t") for line in out.decode().splitlines()]
    assert [int(r[0]) for r in rows] == [line for line in (1, 2, 3) for _ in range(beam)]
    assert [r[2] for r in rows] == decoded(tf.reshape(expected["translations"], [-1]))
    np.testing.assert_allclose(
        [float(r[1]) for r in rows], expected["scores"].numpy().ravel(), atol=1e-4
    )
    pairs = ["A dog runs.\tEin Hund rennt.", "\t", "Two dogs.\tZwei."]
    code, out, err = run("--mode", "score", stdin="\n".join(pairs) + "\n")
    assert code == 0, err[-3000:]
    expected = translator.score_targets(
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
    expected = translator.translate_with_alignments(tf.constant(sentences))
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
    expected = translator.translate_with_constraints(
        *(tf.constant([f[i] for f in fields]) for i in range(3))
    )
    assert out.decode().splitlines() == decoded(expected["translation"])
    unmet = [i + 1 for i, ok in enumerate(expected["constraints_met"].numpy()) if not ok]
    assert ("warning: the length limit came before" in err) == bool(unmet)
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("dog\tHund\ntwo dogs\tzwei Hunde\n", encoding="utf-8")
    code, out, err = run("--glossary", str(glossary), stdin=stdin)
    assert code == 0, err[-3000:]
    expected = translator.translate_with_constraints(
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


@pytest.mark.parametrize("model", ["--export_dir", "--ctranslate2_dir"])
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


def test_batches_keep_within_the_limits_and_a_line_over_them_goes_alone():
    batches = translate_cli.batches_within
    costs = [(3,), (4,), (2,), (9,), (1,), (1,), (1,)]
    # Sentences: the smaller of --batch_size and the export's max_batch_size.
    assert list(batches(costs, 300, max_batch_size=2)) == [(0, 2), (2, 4), (4, 6), (6, 7)]
    assert list(batches(costs, 3)) == [(0, 3), (3, 6), (6, 7)]
    # Tokens: each batch's sum within max_input_tokens; 9 > 8 goes alone.
    assert list(batches(costs, 300, 256, 8)) == [(0, 2), (2, 3), (3, 4), (4, 7)]
    # Every input of a request counts: here the second (targets).
    pairs = [(1, 5), (1, 5), (1, 1)]
    assert list(batches(pairs, 300, 256, 8)) == [(0, 1), (1, 3)]
    assert list(batches([], 4, 2, 8)) == []


@served
def test_command_line_keeps_within_the_exports_limits(micro_translator, tmp_path, cli):
    path = export_saved_model(
        micro_translator, tmp_path, max_batch_size=2, max_input_tokens=12, warmup_sentences=()
    )
    short = ["a b", "c d e", "f", "g h", "i"]
    code, out, err = cli("--export_dir", path, "--batch_size", "300", stdin="\n".join(short))
    assert code == 0, err[-3000:]
    assert out.decode().splitlines() == micro_translator.translate(short)
    # A line over max_input_tokens alone: the lines before it are written,
    # and the error names it and the limit.
    long = " ".join("abcdefghij" * 3)
    lines = short[:3] + [long] + short[3:]
    code, out, err = cli("--export_dir", path, stdin="\n".join(lines))
    assert code == 1
    assert out.decode().splitlines() == micro_translator.translate(short[:3])
    assert "line 4" in err and "max_input_tokens=12" in err
    pairs = [f"{s}\t{s}" for s in short[:2]] + [f"a\t{long}"]
    code, out, err = cli("--export_dir", path, "--mode", "score", stdin="\n".join(pairs))
    assert code == 1 and len(out.decode().splitlines()) == 2
    assert "line 3" in err and "max_input_tokens=12 target tokens" in err


@served
def test_command_line_keeps_output_line_i_for_input_line_i(exported, cli):
    translator, path = exported
    # Invalid UTF-8, a lone carriage return inside a line, a CRLF ending.
    lines = [b"A dog runs.", b"bad \xff\xfe byte", b"one \r line", b"Two dogs.\r"]
    code, out, err = cli("--export_dir", path, stdin=b"\n".join(lines) + b"\n")
    assert code == 0, err[-3000:]
    output = out.decode("utf-8").split("\n")
    assert output[-1] == "" and len(output) == len(lines) + 1
    expected = translator.translate_with_scores(
        tf.constant([lines[0], lines[1], lines[2], lines[3][:-1]])
    )["translation"].numpy()
    assert output[:-1] == [translate_cli.one_line(t.decode("utf-8", "replace")) for t in expected]
    assert "1 input line(s) are not valid UTF-8 (line 2)" in err


def test_command_line_line_handling():
    stream = io.BytesIO(b"a\r\nb \r c\n\nlast")
    assert translate_cli.read_lines(stream) == [b"a", b"b \r c", b"", b"last"]
    assert translate_cli.invalid_utf8([b"ok", b"\xff", "é".encode()]) == [2]
    assert translate_cli.one_line("Ein Hund\nläuft\r\nschnell\u2028.") == "Ein Hund läuft schnell ."


@pytest.mark.large  # traces a SavedModel
def test_keras_export_of_the_raw_model(tmp_path):
    """`model.export()` gives a SavedModel of logits, for users who want them."""
    model = Transformer.from_preset("tiny", vocab_size=50)
    spec = (
        tf.TensorSpec([None, None], tf.int32, name="source"),
        tf.TensorSpec([None, None], tf.int32, name="target"),
    )
    model.export(
        str(tmp_path / "raw"), format="tf_saved_model", input_signature=[spec], verbose=False
    )
    source, target = np.array([[5, 6, 7, 3]], "int32"), np.array([[2, 8, 9]], "int32")
    restored = tf.saved_model.load(str(tmp_path / "raw"))  # keep it: it owns the variables
    logits = restored.serve((source, target))
    np.testing.assert_allclose(logits.numpy(), model((source, target)).numpy(), atol=1e-5)
