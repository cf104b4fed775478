"""A multilingual model in every runtime: each export knows the languages of
its vocabulary's tags, translates a batch that mixes them as `Translator`
does (each sentence into its own `target_lang`), and refuses a language
the model was not trained on (an untrained model: what is compared is the
search on the tagged sources, whatever it outputs)."""

import importlib.util
import os

import keras
import pytest

from keras_transformer import Translator
from keras_transformer_runtime import CTranslate2Translator
from keras_transformer_runtime import LiteRTTranslator
from keras_transformer_runtime import ONNXTranslator
from keras_transformer_runtime import SavedModelTranslator
from keras_transformer_runtime.text import languages
from tests.export.random_models import random_model
from tests.export.random_models import word_sentences

pytestmark = [pytest.mark.tensorflow_only, pytest.mark.large]  # converts a model per runtime

CODES = ("de", "fr")
EXPORTS = {
    "SavedModelTranslator": (SavedModelTranslator, None, "saved_model"),
    "CTranslate2Translator": (CTranslate2Translator, "ctranslate2", "ct2"),
    "LiteRTTranslator": (LiteRTTranslator, "ai_edge_litert", "model.tflite"),
    "ONNXTranslator": (ONNXTranslator, "tf2onnx", "model.onnx"),
}
SOURCES = word_sentences(16, seed=5)
TARGETS = [CODES[i % 2] for i in range(len(SOURCES))]


@pytest.fixture(scope="module")
def multilingual():
    """A `Translator` (beam 1, whose search every export runs) of a random
    model with a vocabulary of two language tags."""
    from keras_transformer.tokenization import train_sentencepiece

    sentences = word_sentences()
    tagged = [f"{languages.tag(CODES[i % 2])} {s}" for i, s in enumerate(sentences)]
    tokenizer = train_sentencepiece(
        tagged, 300, user_defined_symbols=languages.tags(CODES), num_threads=1
    )
    keras.utils.set_random_seed(3)
    # Every output as long as the model allows (an untrained model never
    # ends early): the same limit for each sentence in every runtime, where
    # CTranslate2 limits a batch by its longest source.
    return Translator(random_model(), tokenizer, beam_size=1, max_extra_length=64)


@pytest.fixture(scope="module")
def runners(multilingual, tmp_path_factory):
    """`runner(name)`: the runner of `multilingual`'s export for that
    runtime, exported in this process when first asked for (the model is
    this process's own)."""
    from keras_transformer import export

    writers = {
        "SavedModelTranslator": export.export_saved_model,
        "CTranslate2Translator": export.export_ctranslate2,
        "LiteRTTranslator": export.export_litert,
        "ONNXTranslator": export.export_onnx,
    }
    loaded = {}

    def runner(name):
        if name not in loaded:
            runner_class, _, file_name = EXPORTS[name]
            path = tmp_path_factory.mktemp("multilingual") / file_name
            path = writers[name](multilingual, path) or path
            loaded[name] = runner_class(os.fspath(path))
        return loaded[name]

    return runner


@pytest.fixture(params=list(EXPORTS))
def exported(request, runners):
    """Each runtime's runner of `multilingual`'s export."""
    needs = EXPORTS[request.param][1]
    for module in filter(None, [needs, "onnxruntime" if needs == "tf2onnx" else None]):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is an optional extra")
    return runners(request.param)


def test_the_translator_knows_its_tags_and_tags_each_sentence(multilingual):
    assert multilingual.languages.codes == CODES
    found = multilingual.translate(SOURCES, target_lang=TARGETS)
    typed = [f">>{code}<< {source}" for source, code in zip(SOURCES, TARGETS, strict=True)]
    assert multilingual.translate(typed) == found
    # The tag decides: the same sources into the other language differ.
    other = multilingual.translate(SOURCES, target_lang=[CODES[i % 2 - 1] for i in range(16)])
    assert sum(a != b for a, b in zip(found, other, strict=True)) >= 4


def test_every_runtime_translates_a_mixed_batch_as_the_translator(exported, multilingual):
    assert exported.languages.codes == CODES
    expected = multilingual.translate(SOURCES, target_lang=TARGETS)
    assert exported.translate(SOURCES, target_lang=TARGETS) == expected
    for code in CODES:
        assert exported.translate(SOURCES[:4], target_lang=code) == multilingual.translate(
            SOURCES[:4], target_lang=code
        )


def test_every_runtime_refuses_a_language_the_model_does_not_know(exported):
    for target_lang in ("es", ["de", "es"], None):
        with pytest.raises(ValueError, match="'de', 'fr'"):
            exported.translate(SOURCES[:2], target_lang=target_lang)


def test_the_savedmodels_signatures_take_target_lang(runners, multilingual):
    """TF Serving's view: a `target_lang` input on the translating
    signatures, each sentence of a text tagged, a typed tag for `""`, and
    an unknown language refused naming the model's."""
    import tensorflow as tf

    saved = runners("SavedModelTranslator")
    default = saved.signatures["serving_default"]
    assert set(default.structured_input_signature[1]) == {"text", "target_lang"}
    assert set(saved.signatures["tokenize"].structured_input_signature[1]) == {"text"}
    texts = [f"{SOURCES[0]}. {SOURCES[1]}.", SOURCES[2], f">>fr<< {SOURCES[3]}. {SOURCES[4]}."]
    langs = ["de", "fr", ""]
    found = default(text=tf.constant(texts), target_lang=tf.constant(langs))["translation"]
    expected = multilingual.translate(texts[:2], target_lang=langs[:2]) + multilingual.translate(
        texts[2:]
    )
    assert [t.decode() for t in found.numpy()] == expected
    with pytest.raises(tf.errors.InvalidArgumentError, match="knows: de, fr"):
        default(text=tf.constant(["a"]), target_lang=tf.constant(["es"]))
    # A user's tag is no choice, an empty text is no refusal, and
    # what the runners refuse, the graph refuses (issue 77, items 3, 5, 6).
    texts = [f"{SOURCES[5]} >>fr<<", "", f">>fr<< {SOURCES[6]}"]
    found = default(text=tf.constant(texts), target_lang=tf.constant(["de", "de", "de"]))
    expected = multilingual.translate(texts, target_lang="de")
    assert [t.decode() for t in found["translation"].numpy()] == expected
    for text, words in (("a", "pass target_lang"), (">>xx<< a", "knows: de, fr")):
        with pytest.raises(tf.errors.InvalidArgumentError, match=words):
            default(text=tf.constant([text]), target_lang=tf.constant([""]))


def test_the_command_line_takes_target_lang(runners, multilingual, monkeypatch, capsysbinary):
    import io
    import sys

    from keras_transformer_runtime import translate as translate_cli
    from keras_transformer_runtime import translate_output

    pytest.importorskip("ctranslate2")
    path = runners("CTranslate2Translator").model_dir

    def run(*args):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("\n".join(SOURCES).encode())))
        try:
            code = translate_cli.main(["--ctranslate2_dir", path, *args])
        except SystemExit as error:
            code = error.code
        captured = capsysbinary.readouterr()
        return code, captured.out.decode().splitlines(), captured.err.decode()

    code, lines, _ = run("--target_lang", "fr")
    expected = multilingual.translate(SOURCES, target_lang="fr")
    assert code == 0 and lines == [translate_output.one_line(t) for t in expected]
    code, lines, _ = run("--info")
    assert code == 0 and "target languages: de, fr" in lines
    code, _, err = run("--target_lang", "es")
    assert code == 2 and "--target_lang" in err and "'de', 'fr'" in err
    code, _, err = run()  # neither --target_lang nor tags in the lines
    assert code == 2 and "pass `target_lang`" in err


def test_the_served_model_translates_a_mixed_batch_as_the_translator(runners, multilingual):
    """The HTTP server over the SavedModel's runner: requests naming their
    languages, batched together, give `Translator`'s translations."""
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from keras_transformer_runtime.serving.app import Server

    server = Server([runners("SavedModelTranslator")], model_name="many", batch_timeout_ms=1)
    with TestClient(server.app) as client:
        assert client.get("/info").json()["languages"] == list(CODES)
        body = {"text": SOURCES, "target_lang": TARGETS}
        found = client.post("/translate", json=body).json()["translations"]
        rows = [{"text": s, "target_lang": c} for s, c in zip(SOURCES, TARGETS, strict=True)]
        predicted = client.post("/v1/models/many:predict", json={"instances": rows}).json()
    expected = multilingual.translate(SOURCES, target_lang=TARGETS)
    assert [t["translation"] for t in found] == expected
    assert [p["translation"] for p in predicted["predictions"]] == expected
