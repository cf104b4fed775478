"""What the export tests share."""

import os
import pathlib

import pytest

import keras_transformer.export.saved_model as saved_model_module


@pytest.fixture
def quick_writes(monkeypatch):
    """Exports that write a stand-in `saved_model.pb` (its contents number
    the writes) instead of tracing the search: for the tests of versions,
    claims and swaps, which the contents do not change."""
    writes = []

    def write(translator, directory, version, limits, warmup_sentences):
        writes.append(version)
        os.remove(os.path.join(directory, "owner"))  # as the real writer does
        pathlib.Path(directory, "saved_model.pb").write_text(f"write {len(writes)}")

    monkeypatch.setattr(saved_model_module, "_write_export", write)
    return writes


@pytest.fixture(scope="session")
def words_tokenizer():
    """`(tokenizer, sentences)`: a SentencePiece tokenizer of 300 pieces
    trained on 400 sentences of a dozen words, and those sentences."""
    from keras_transformer.tokenization import train_sentencepiece
    from tests.export.random_models import word_sentences

    sentences = word_sentences()
    return train_sentencepiece(sentences, 300), sentences


# Each runner's export of the trained letter reverser with beam search
# (beam 3), made where a test first asks for it, once for all workers: the
# runner conformance tests and the LiteRT and ONNX agreement tests share
# them (a conversion takes 20-40 s).
EXPORT_FILES = {
    "SavedModelTranslator": "saved_model",
    "CTranslate2Translator": "ct2",
    "LiteRTTranslator": "ende.tflite",
    "ONNXTranslator": "ende.onnx",
}


@pytest.fixture(scope="session")
def reverser_translator(letter_reverser):
    """`Translator` of the trained letter reverser, beam 3."""
    from keras_transformer import Translator

    return Translator(letter_reverser.model, letter_reverser.tokenizer, beam_size=3)


@pytest.fixture(scope="session")
def reverser_export(reverser_translator, tmp_path_factory):
    """`export(runner_name)`: the path of `reverser_translator`'s export
    for that runner (alone in its directory), written once per run."""
    from keras_transformer import export
    from tests.conftest import once_for_all_workers

    writers = {
        "SavedModelTranslator": export.export_saved_model,
        "CTranslate2Translator": export.export_ctranslate2,
        "LiteRTTranslator": export.export_litert,
        "ONNXTranslator": export.export_onnx,
    }

    def path(runner_name):
        def build(directory):
            target = directory / "export" / EXPORT_FILES[runner_name]
            target.parent.mkdir(exist_ok=True)
            return writers[runner_name](reverser_translator, target) or target

        def load(directory):
            return directory / "export" / EXPORT_FILES[runner_name]

        return os.fspath(
            once_for_all_workers(tmp_path_factory, f"reverser-{runner_name}", build, load)
        )

    return path
