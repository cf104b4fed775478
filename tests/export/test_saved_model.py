import collections
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
import keras_transformer.export.serving_module as serving_module
from keras_transformer import Transformer
from keras_transformer import Translator
from keras_transformer.export import existing_versions
from keras_transformer.export import export_saved_model
from keras_transformer.translator.graph import TranslatorGraph

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design

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


@pytest.mark.large  # loads the exported translator
def test_every_signature_loads_without_keras_both_ways_and_matches_python(exported, tmp_path):
    translator, path = exported
    text = tf.constant(as_bytes(HOSTILE))
    targets = HOSTILE[1:] + HOSTILE[:1]
    ids = translator.tokenizer(["Two dogs are playing."]).to_tensor()
    expected = {
        "serving_default": translator.graph.serving_default(text),
        "n_best": translator.graph.n_best(text),
        "score": translator.graph.score(text, tf.constant(as_bytes(targets))),
        "sample": translator.graph.sample(text, tf.constant(5, tf.int64)),
        "translate_with_alignments": translator.graph.translate_with_alignments(text),
        "translate_with_options": translator.graph.translate_with_options(
            text, tf.constant(as_bytes(PREFIXES)), tf.constant(4)
        ),
        "translate_with_constraints": translator.graph.translate_with_constraints(
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


@pytest.mark.large  # loads the exported translator
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


@pytest.mark.large  # loads the exported translator
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


@pytest.mark.large  # loads the exported translator
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


@pytest.mark.large  # loads the exported translator
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
    limits = {"max_batch_size": 256, "max_input_tokens": 16_384, "max_phrases": 32}  # defaults
    languages = {"languages": [], "language_required": False}  # one language pair: none needed
    assert settings == {**translator.settings.to_dict(), **limits, **languages}
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


@pytest.mark.large  # traces a SavedModel
def test_each_signature_is_traced_once(micro_translator, tmp_path):
    # `tf.saved_model.save` traces a saved object's functions again (in its
    # own context): the signature functions must not be on the object. The
    # default limits search 256 sentences at a time, as the translator's
    # graph does: the export uses that graph.
    translator = Translator(micro_translator.model, micro_translator.tokenizer, beam_size=2)
    functions = translator.graph.signature_functions()
    export_saved_model(translator, tmp_path / "export", warmup_sentences=())
    traces = {name: f.experimental_get_tracing_count() for name, f in functions.items()}
    assert traces == dict.fromkeys(functions, 1)


@pytest.mark.large  # traces a SavedModel
def test_an_export_searches_max_batch_size_sentences_at_a_time(
    micro_translator, tmp_path, monkeypatch
):
    graphs = []

    class RecordedGraph(TranslatorGraph):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            graphs.append(self)

    monkeypatch.setattr(serving_module, "TranslatorGraph", RecordedGraph)
    translator = Translator(micro_translator.model, micro_translator.tokenizer, beam_size=2)
    path = export_saved_model(
        translator, tmp_path / "export", warmup_sentences=(), max_batch_size=3
    )
    [graph] = graphs  # the export's own: the translator's searches 256 at a time
    assert (graph.max_rows, translator.graph.max_rows) == (3, 256)
    functions = graph.signature_functions()
    traces = {name: f.experimental_get_tracing_count() for name, f in functions.items()}
    assert traces == dict.fromkeys(functions, 1)
    # Two texts of 8 sentences, searched 3 at a time: one search's translations.
    texts = ["Abc. Def ghi. Jk. Lmn. Op. Qr. St. Uv.", "Wx yz. Ab. Cd. Ef. Gh. Ij. Kl. Mn."]
    served = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant(texts))
    assert decoded(served["translation"]) == translator.translate(texts)


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


class CountedSignatures(dict):
    """A SavedModel's signatures, each call counted by name."""

    def __init__(self, signatures):
        super().__init__(signatures)
        self.calls = collections.Counter()

    def __getitem__(self, name):
        function = super().__getitem__(name)

        def counted(**inputs):
            self.calls[name] += 1
            return function(**inputs)

        return counted


@pytest.mark.large  # loads the exported translator
def test_the_client_tokenizes_each_sentence_once_on_the_host(exported):
    """Splitting a request measures its sentences (`tokenize`), and so
    does batching it within the export's limits: one call serves both,
    so a sentence is tokenized twice on its way, once there and once in
    the graph."""
    from keras_transformer_runtime import SavedModelTranslator

    translator, path = exported
    runner = SavedModelTranslator(path)
    runner.signatures = CountedSignatures(runner.signatures)
    texts = ["A dog runs. Two dogs run.", "A cat.", "A dog runs. Two dogs run."]
    assert runner.translate(texts) == translator.translate(texts)
    assert runner.signatures.calls == {"tokenize": 1, "serving_default": 1}
    runner.translate(texts)  # the same sentences again: their lengths are known
    assert runner.signatures.calls == {"tokenize": 1, "serving_default": 2}


@pytest.mark.large  # loads the exported translator
def test_info_of_a_one_language_export_says_it_needs_no_language(exported):
    """`--info` said `"language_required": true, "languages": []`."""
    from keras_transformer_runtime import SavedModelTranslator

    _, path = exported
    runner = SavedModelTranslator(path)
    assert runner.recorded["language_required"] is False and runner.recorded["languages"] == []
    runner.recorded["language_required"] = True  # as exports before this fix recorded it
    described = runner.describe()
    assert '"language_required": false' in described and '"languages": []' in described
