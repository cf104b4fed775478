"""The LiteRT export: the whole search in built-in ops, run by the LiteRT
interpreter with SentencePiece on the host, translating as `Translator`."""

import io
import json
import os
import pathlib
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import Transformer
from keras_transformer import Translator
from keras_transformer.export import export_litert
from keras_transformer.export import litert_operators
from keras_transformer_runtime.translate import main as translate_main
from tests.export.agreement import assert_translates_as
from tests.export.random_models import random_model
from tests.export.runtime_process import translate_in_a_process
from tests.training.helpers import letter_reversal_corpus

pytestmark = [pytest.mark.tensorflow_only, pytest.mark.large]  # each converts a traced search

pytest.importorskip(
    "ai_edge_litert", reason='LiteRT is an optional extra: pip install -e ".[litert]"'
)

from keras_transformer_runtime import LiteRTTranslator  # noqa: E402


def builtin_operator_names():
    from tensorflow.lite.python import schema_py_generated as schema

    return {name for name in vars(schema.BuiltinOperator) if name.isupper()}


@pytest.mark.parametrize("beam_size", [1, 3])
def test_translates_as_the_translator_in_builtin_operators_only(
    letter_reverser, reverser_translator, reverser_export, tmp_path, beam_size
):
    # A trained model: a random one's flat distributions hold near-ties
    # that rounding differences of 1e-6 may break either way. Beam 3's
    # export is the one the runner conformance tests use.
    tokenizer = letter_reverser.tokenizer
    if beam_size == reverser_translator.settings.beam_size:
        translator, path = reverser_translator, reverser_export("LiteRTTranslator")
    else:
        translator = Translator(letter_reverser.model, tokenizer, beam_size=beam_size)
        path = export_litert(translator, tmp_path / "ende.tflite")

    operators = litert_operators(path)
    assert set(operators) <= builtin_operator_names()  # no Flex (TensorFlow) or custom op
    assert operators["WHILE"] >= 1  # the search is inside the model
    if beam_size > 1:
        assert operators["TOPK_V2"] >= 1

    # Any batch size and length, empty sources, the order kept.
    sources = ["", "a", *letter_reversal_corpus(60, seed=21)[0]]
    hypotheses = assert_translates_as(translator, LiteRTTranslator, path, sources)
    # Tokens and log-probabilities: the search's ids, scored teacher-forced.
    source_ids = translator.graph.encode_text(tf.constant(sources))
    ids = translator.graph.search_ids(source_ids, 1)[0][:, 0].numpy()
    log_probs = translator.model_search.token_log_probs(source_ids, ids).numpy().sum(axis=1)
    for row, log_prob, hypothesis in zip(ids, log_probs, hypotheses, strict=True):
        length = list(row).index(tokenizer.eos_id) + 1
        assert hypothesis.tokens == [tokenizer.id_to_piece(i) for i in row[:length]]
        np.testing.assert_allclose(hypothesis.log_prob, log_prob, rtol=1e-4, atol=1e-4)

    with open(f"{path}.json") as f:
        record = json.load(f)
    assert record["beam_size"] == beam_size and record["quantization"] == "float32"
    assert (record["pad_id"], record["eos_id"]) == (tokenizer.pad_id, tokenizer.eos_id)


def test_output_controls_and_a_larger_model_vocabulary_convert(words_tokenizer, tmp_path):
    # The output controls' ops (a segment maximum among them) are LiteRT
    # builtins too; the ids the tokenizer lacks are never emitted.
    tokenizer, sentences = words_tokenizer
    controls = dict(min_length=2, no_repeat_ngram_size=2, repetition_penalty=1.2)
    translator = Translator(random_model(), tokenizer, beam_size=2, max_extra_length=6, **controls)
    path = export_litert(translator, tmp_path / "m.tflite")
    assert set(litert_operators(path)) <= builtin_operator_names()
    converted = LiteRTTranslator(path)
    ids = converted._search(converted.source_ids(sentences[:40]))["ids"]
    assert ids.max() < tokenizer.vocab_size
    outputs = converted.translate(sentences[:40])
    same = [a == b for a, b in zip(outputs, translator.translate(sentences[:40]), strict=True)]
    assert np.mean(same) >= 0.9  # a random model's near-ties may break either way


def test_the_operator_list_names_a_tensorflow_op(tmp_path):
    # The check above can fail: a model with a TensorFlow ("Select") op
    # lists it under its custom code.
    @tf.function(input_signature=[tf.TensorSpec([4, 6], tf.float32)])
    def write(x):
        return tf.raw_ops.TensorStridedSliceUpdate(
            input=x, begin=[0, 2], end=[4, 3], strides=[1, 1], value=tf.ones([4, 1])
        )

    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [write.get_concrete_function()], write
    )
    converter.target_spec.supported_ops = [
        tf.lite.OpsSet.TFLITE_BUILTINS,
        tf.lite.OpsSet.SELECT_TF_OPS,
    ]
    path = tmp_path / "flex.tflite"
    path.write_bytes(converter.convert())
    assert "FlexTensorStridedSliceUpdate" in litert_operators(path)
    assert not set(litert_operators(path)) <= builtin_operator_names()


def test_quantized_exports_are_smaller_and_translate(words_tokenizer, tmp_path):
    tokenizer, sentences = words_tokenizer
    # Wide enough that the weights, not the graph, make most of the file.
    model = random_model(d_model=128, d_ff=512)
    translator = Translator(model, tokenizer, beam_size=2, max_extra_length=4)
    sizes = {}
    for quantization in (None, "dynamic_int8", "float16"):
        path = export_litert(translator, tmp_path / f"{quantization}.tflite", quantization)
        sizes[quantization] = os.path.getsize(path)
        converted = LiteRTTranslator(path)
        assert converted.quantization == (quantization or "float32")
        assert len(converted.translate(sentences[:5])) == 5
    assert sizes["dynamic_int8"] < 0.35 * sizes[None]  # the graph is 6% of it here
    assert sizes["float16"] < 0.6 * sizes[None]

    # The tied embedding, looked up and multiplied, is stored once in int8
    # (`share_quantized_constants`), each value within half a step of the
    # float32 weight.
    from tensorflow.lite.python import schema_py_generated as schema

    with open(tmp_path / "dynamic_int8.tflite", "rb") as f:
        litert_model = schema.ModelT.InitFromPackedBuf(f.read(), 0)
    copies = {
        tensor.buffer: tensor
        for subgraph in litert_model.subgraphs
        for tensor in subgraph.tensors
        if list(tensor.shape) == [320, 128]
        and tensor.type == schema.TensorType.INT8
        and litert_model.buffers[tensor.buffer].data is not None
    }
    assert len(copies) == 1
    (tensor,) = copies.values()
    ints = np.asarray(litert_model.buffers[tensor.buffer].data, np.uint8).view(np.int8)
    scales = np.asarray(tensor.quantization.scale)[:, None]
    weights = model.source_embedding.embeddings.numpy()
    assert np.all(np.abs(ints.reshape(320, 128) * scales - weights) <= scales / 2 * (1 + 1e-5))


def test_a_mixed_precision_model_is_exported_in_float32(words_tokenizer, tmp_path):
    tokenizer, sentences = words_tokenizer
    model = random_model()
    mixed = Transformer.from_config({**model.get_config(), "dtype": "mixed_bfloat16"})
    mixed.set_weights(model.get_weights())
    path = export_litert(Translator(mixed, tokenizer, beam_size=2), tmp_path / "m.tflite")
    float32 = Translator(model, tokenizer, beam_size=2)
    assert LiteRTTranslator(path).translate(sentences[:10]) == float32.translate(sentences[:10])


def test_bad_arguments_and_existing_files(words_tokenizer, tmp_path):
    tokenizer, _ = words_tokenizer
    translator = Translator(random_model(), tokenizer, beam_size=2, max_extra_length=2)
    with pytest.raises(ValueError, match="`quantization` must be one of"):
        export_litert(translator, tmp_path / "m.tflite", quantization="int8")
    with pytest.raises(ValueError, match="not sampling"):
        export_litert(Translator(translator.model, tokenizer, search="sample"), tmp_path / "s")
    with pytest.raises(ValueError, match="is a directory"):
        export_litert(translator, tmp_path)
    path = export_litert(translator, tmp_path / "m.tflite")
    before = pathlib.Path(path).read_bytes()
    with pytest.raises(FileExistsError, match="overwrite=True"):
        export_litert(translator, path)
    assert pathlib.Path(path).read_bytes() == before
    # A conversion that fails keeps the old files whole and leaves nothing.
    listing = sorted(os.listdir(tmp_path))

    def failing(*args, **kwargs):
        raise RuntimeError("the converter crashed")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tf.lite.TFLiteConverter, "from_saved_model", failing)
        with pytest.raises(RuntimeError, match="the converter crashed"):
            export_litert(translator, path, overwrite=True)
    assert sorted(os.listdir(tmp_path)) == listing
    assert pathlib.Path(path).read_bytes() == before
    # An export written before the tokenizers named their files alike
    # (`PATH.spm`) still loads, and an export over it removes the old name.
    translations = LiteRTTranslator(path).translate(["a b", "c"])
    os.rename(f"{path}.spm.model", f"{path}.spm")
    assert LiteRTTranslator(path).translate(["a b", "c"]) == translations
    export_litert(translator, path, quantization="dynamic_int8", overwrite=True)
    assert LiteRTTranslator(path).quantization == "dynamic_int8"
    assert sorted(os.listdir(tmp_path)) == ["m.tflite", "m.tflite.json", "m.tflite.spm.model"]
    os.remove(f"{path}.json")
    with pytest.raises(ValueError, match="m.tflite.json does not exist"):
        LiteRTTranslator(path)
    with pytest.raises(ValueError, match="`batch_size` must be a positive integer"):
        LiteRTTranslator(export_litert(translator, tmp_path / "n.tflite")).translate(["a"], 0)


def test_command_line(words_tokenizer, tmp_path, monkeypatch, capsysbinary):
    tokenizer, sentences = words_tokenizer
    translator = Translator(random_model(), tokenizer, beam_size=2, max_extra_length=4)
    path = export_litert(translator, tmp_path / "m.tflite")

    def run(*args):
        stdin = "".join(s + "\n" for s in sentences[:5])
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
        assert translate_main(["--litert_model", path, *args]) == 0
        return capsysbinary.readouterr().out.decode().splitlines()

    assert run() == translator.translate(sentences[:5])
    best = [options[0] for options in LiteRTTranslator(path).translate_with_scores(sentences[:5])]
    assert run("--with_scores") == [f"{h.score:.4f}\t{h.translation}" for h in best]
    assert '"beam_size": 2' in "\n".join(run("--info"))
    with pytest.raises(SystemExit):
        run("--mode", "sample")


def test_a_marian_translator_translates_as_in_the_graph(trained_marian, tmp_path):
    # Two SentencePiece models, a vocabulary, language codes: the host's
    # tokenizer must give the in-graph MarianTokenizer's ids and text.
    from keras_transformer import pretrained

    imported = pretrained.load_marian(trained_marian)
    translator = Translator(imported.model, imported.tokenizer, beam_size=2, max_extra_length=5)
    path = export_litert(translator, tmp_path / "opus.tflite")
    assert sorted(os.listdir(tmp_path)) == [
        "opus.tflite",
        "opus.tflite.json",
        "opus.tflite.source.spm",
        "opus.tflite.target.spm",
        "opus.tflite.vocab.json",
    ]
    sources = ["A dog runs.", ">>deu<< Two cats sleep!", "", "Ünïcode ☃ text 123"]
    converted = LiteRTTranslator(path)
    graph_ids = translator.graph.encode_text(tf.constant(sources)).numpy()
    np.testing.assert_array_equal(converted.source_ids(sources), graph_ids)
    assert converted.translate(sources) == translator.translate(sources)


def test_the_runtime_translates_in_a_process_without_tensorflow(words_tokenizer, tmp_path):
    """What a device or a small server runs: `keras_transformer_runtime`
    with `ai-edge-litert` and `sentencepiece`, no TensorFlow, no Keras."""
    tokenizer, sentences = words_tokenizer
    translator = Translator(random_model(), tokenizer, beam_size=2, max_extra_length=4)
    path = export_litert(translator, tmp_path / "m.tflite")
    ran = translate_in_a_process("LiteRTTranslator", path, sentences[:3])
    assert ran["imported"] == []
    assert ran["translations"] == translator.translate(sentences[:3])
