"""`load_marian` against Hugging Face transformers' own Marian model, and
the imported model through the package's translator, exports and
CTranslate2 (whose own converter is the second oracle)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from keras_transformer import Translator
from keras_transformer.pretrained import load_marian
from tests.pretrained.marian_directory import generate
from tests.pretrained.marian_directory import generated_pairs
from tests.pretrained.marian_directory import searched
from tests.pretrained.marian_directory import write_marian_directory

pytestmark = pytest.mark.tensorflow_only  # the tokenizer and searches are TensorFlow's
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")


def reference(directory):
    model = transformers.MarianMTModel.from_pretrained(directory).eval()
    return model, transformers.MarianTokenizer.from_pretrained(directory)


def teacher_forced(pretrained, hf_model, hf_tokenizer, sources, targets):
    """`(ours, theirs, mask)`: both models' logits for the same pairs (ours
    without the added start id), and where the targets are real tokens."""
    batch = hf_tokenizer(sources, text_target=targets, return_tensors="pt", padding=True)
    labels = batch["labels"].numpy()
    pad = hf_tokenizer.pad_token_id
    with torch.no_grad():
        theirs = hf_model(**batch).logits.numpy()  # decoder input: labels shifted, from pad
    start = np.full((len(sources), 1), pretrained.tokenizer.bos_id)
    decoder_input = np.concatenate([start, labels[:, :-1]], axis=1)
    ours = pretrained.model((batch["input_ids"].numpy(), decoder_input), training=False)
    return np.asarray(ours)[..., :-1], theirs, labels != pad


@pytest.mark.parametrize(
    "options",
    [
        dict(),
        dict(share_embeddings=False, activation="relu"),
        dict(tie_output=False, activation="gelu", encoder_layers=1, decoder_layers=2),
    ],
    ids=["tied_swish", "separate_embeddings_relu", "untied_output_gelu"],
)
def test_teacher_forced_logits_equal_pytorch(tmp_path, options):
    sources, targets = generated_pairs(200, seed=0)
    write_marian_directory(tmp_path, sources, targets, train_steps=40, **options)
    pretrained = load_marian(tmp_path)
    hf_model, hf_tokenizer = reference(tmp_path)
    ours, theirs, mask = teacher_forced(
        pretrained, hf_model, hf_tokenizer, sources[:16], targets[:16]
    )
    bias = hf_model.final_logits_bias.numpy()[0]
    assert np.abs(theirs - bias)[mask].max() > 1.0  # the network's part, not only the bias
    np.testing.assert_allclose(ours[mask], theirs[mask], atol=1e-4)
    expected_tying = {(True, True): "all", (False, True): "target", (True, False): "none"}
    tying = (options.get("share_embeddings", True), options.get("tie_output", True))
    assert pretrained.model.tie_embeddings == expected_tying[tying]


def test_pytorch_checkpoint_reads_as_safetensors(tmp_path, marian_directory):
    hf_model, hf_tokenizer = reference(marian_directory)
    torch.save(hf_model.state_dict(), tmp_path / "pytorch_model.bin")  # as older releases saved
    for name in ("config.json", "source.spm", "target.spm", "vocab.json"):
        (tmp_path / name).write_bytes((marian_directory / name).read_bytes())
    assert (tmp_path / "pytorch_model.bin").exists()
    assert not (tmp_path / "model.safetensors").exists()
    from_bin, from_safetensors = load_marian(tmp_path), load_marian(marian_directory)
    for a, b in zip(from_bin.model.weights, from_safetensors.model.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.large  # starts a Python process
def test_safetensors_import_without_pytorch(marian_directory):
    code = (
        "import sys; sys.modules['torch'] = None\n"  # importing it would raise
        "from keras_transformer.pretrained import load_marian\n"
        f"print(load_marian({str(marian_directory)!r}).model.count_params())"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert int(result.stdout.split()[-1]) == load_marian(marian_directory).model.count_params()


def test_model_options_and_settings(marian_directory):
    pretrained = load_marian(marian_directory)
    model, config = pretrained.model, json.loads((marian_directory / "config.json").read_text())
    assert model.activation == "silu" and model.output_bias
    assert model.position_encoding == "sinusoidal_concatenated"
    assert model.layer_norm_epsilon == 1e-5 and model.pad_id == config["pad_token_id"]
    assert model.vocab_size == config["vocab_size"] + 1  # the start id
    start = pretrained.tokenizer.bos_id
    embeddings = np.asarray(model.source_embedding.embeddings)
    np.testing.assert_array_equal(embeddings[start], embeddings[config["pad_token_id"]])
    assert np.asarray(model.logits_bias)[start] < -1e8  # never emitted
    assert pretrained.settings.beam_size == 1  # the generation config has no num_beams


def test_beam_size_from_the_generation_config_or_the_config(tmp_path, marian_directory):
    for path in marian_directory.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    generation = json.loads((tmp_path / "generation_config.json").read_text())
    (tmp_path / "generation_config.json").write_text(json.dumps({**generation, "num_beams": 6}))
    assert load_marian(tmp_path).settings.beam_size == 6
    (tmp_path / "generation_config.json").unlink()  # older directories: config.json only
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "num_beams": 3}))
    assert load_marian(tmp_path).settings.beam_size == 3


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(model_type="bart"), "'bart' model"),
        (dict(decoder_attention_heads=4), "encoder_attention_heads == decoder_attention_heads"),
        (dict(activation_function="tanh"), "activation_function='tanh'"),
        (dict(vocab_size=7), "vocabularies"),
        (dict(normalize_before=True), "normalize_before=True"),
        (dict(normalize_embedding=True), "normalize_embedding=True"),
    ],
)
def test_unsupported_configs_are_named(tmp_path, marian_directory, change, message):
    for path in marian_directory.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    config = json.loads((marian_directory / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(ValueError, match=message):
        load_marian(tmp_path)


def test_missing_weights_are_named(tmp_path, marian_directory):
    for name in ("config.json", "source.spm", "target.spm", "vocab.json"):
        (tmp_path / name).write_bytes((marian_directory / name).read_bytes())
    with pytest.raises(ValueError, match="neither model.safetensors nor pytorch_model.bin"):
        load_marian(tmp_path)
    with pytest.raises(ValueError, match="config.json is missing"):
        load_marian(tmp_path / "nothing")


@pytest.mark.large
@pytest.mark.parametrize("beam_size", [1, 4])
def test_searches_equal_generate(trained_marian, beam_size):
    """Greedy search, and beam search with no length penalty on either
    side (`alpha=0`, `length_penalty=0`), give Hugging Face's tokens."""
    pretrained = load_marian(trained_marian)
    hf_model, hf_tokenizer = reference(trained_marian)
    sources, _ = generated_pairs(60, seed=11)
    translator = Translator(
        pretrained.model, pretrained.tokenizer, beam_size=beam_size, alpha=0.0, max_extra_length=8
    )
    ours = searched(translator, sources)
    theirs = generate(hf_model, hf_tokenizer, sources, beam_size, extra=8)
    assert ours == theirs
    assert len({tuple(row) for row in ours}) > 10  # varied outputs
    texts = translator.translate(sources)
    assert texts == hf_tokenizer.batch_decode(theirs, skip_special_tokens=True)


@pytest.mark.large
def test_export_of_an_imported_model_gives_the_python_outputs(trained_marian, tmp_path):
    from keras_transformer.export import export_saved_model
    from tests.export.test_saved_model import load_in_fresh_process

    pretrained = load_marian(trained_marian)
    translator = Translator(pretrained.model, pretrained.tokenizer, beam_size=2)
    sources, _ = generated_pairs(12, seed=5)
    sources += [">>deu<< A dog.", "", "Emoji 😀"]
    expected = translator.translate(sources)
    path = export_saved_model(translator, tmp_path / "export")
    raw = [text.encode("utf-8").decode("latin-1") for text in sources]  # the loader's format
    result = load_in_fresh_process(path, {"serving_default": {"text": raw}}, tmp_path)
    for way in ("eager", "session"):
        assert result["results"]["serving_default"][way]["translation"] == expected, way
    check_unwritable_constraints_are_refused(path, tmp_path)


def check_unwritable_constraints_are_refused(path, tmp_path):
    """A constraint the target vocabulary cannot write came out as an
    unknown piece, counted as met and dropped from the text: every path
    of the export must refuse it, naming the phrase (and the glossary
    line it came from)."""
    import tensorflow as tf

    import keras_transformer_runtime.translate as translate_cli
    from keras_transformer_runtime import Glossary
    from keras_transformer_runtime import SavedModelTranslator
    from keras_transformer_runtime.runners.results import RefusedRequestError

    signature = tf.saved_model.load(path).signatures["translate_with_constraints"]
    with pytest.raises(tf.errors.InvalidArgumentError, match="characters it lacks.*a\u2603"):
        signature(
            text=tf.constant(["a b"]),
            constraints=tf.constant(["a\u2603"]),
            banned=tf.constant([""]),
        )
    client = SavedModelTranslator(path)
    with pytest.raises(RefusedRequestError) as refused:
        client.translate_with_constraints(["a b", "c d", "e f"], [["a"], ["a\u2603"], []])
    assert (refused.value.start, refused.value.end, len(refused.value.done)) == (1, 2, 1)
    assert "characters it lacks" in refused.value.reason and "a\u2603" in refused.value.reason

    terms = tmp_path / "terms.tsv"
    terms.write_text("# terms\nb\tb\u2603\n", encoding="utf-8")
    args = translate_cli.make_parser().parse_args(["--export_dir", path])
    with pytest.raises(RefusedRequestError) as refused:
        translate_cli.run(client, args, [b"a", b"a b"], Glossary.from_tsv(terms))
    assert refused.value.start == 1
    assert f"'b\u2603' ({terms}:2)" in refused.value.reason


@pytest.mark.large
def test_ctranslate2_export_equals_ctranslate2s_own_converter(trained_marian, tmp_path):
    ctranslate2 = pytest.importorskip("ctranslate2")
    from keras_transformer.export import export_ctranslate2
    from keras_transformer_runtime import CTranslate2Translator

    pretrained = load_marian(trained_marian)
    translator = Translator(pretrained.model, pretrained.tokenizer, beam_size=1)
    export_ctranslate2(translator, tmp_path / "ours")
    ctranslate2.converters.TransformersConverter(str(trained_marian)).convert(
        str(tmp_path / "theirs")
    )
    theirs = ctranslate2.Translator(str(tmp_path / "theirs"))
    hf_tokenizer = transformers.MarianTokenizer.from_pretrained(trained_marian)
    sources, _ = generated_pairs(40, seed=13)
    sources += [">>fra<< Red ball", "Emoji 😀"]
    tokens = [hf_tokenizer.convert_ids_to_tokens(hf_tokenizer(s)["input_ids"]) for s in sources]
    results = theirs.translate_batch(tokens, beam_size=1, max_decoding_length=40)
    expected = [
        hf_tokenizer.decode(
            hf_tokenizer.convert_tokens_to_ids(r.hypotheses[0]), skip_special_tokens=True
        )
        for r in results
    ]
    ours = CTranslate2Translator(tmp_path / "ours", max_extra_length=40)
    assert ours.translate(sources, batch_size=1) == expected
    assert translator.translate(sources) == expected


def test_constraints_the_target_vocabulary_cannot_write_are_refused(marian_directory):
    # Marian's SentencePiece models have no byte fallback: a character they
    # lack becomes the unknown piece, which translations drop.
    pretrained = load_marian(marian_directory)
    translator = Translator(pretrained.model, pretrained.tokenizer, pretrained.settings)
    with pytest.raises(ValueError, match="holds characters it lacks.*Received: 'a\u2603'"):
        translator.translate(["a b"], constraints=[["a\u2603"]])


def test_the_training_loss_of_an_imported_model_is_a_cross_entropy(marian_directory):
    """The decoder-start id's logit bias is −10⁹: smoothed over, the
    reported loss was ~ε·10⁹/V. Compiled for training, the loss smooths
    over the ids the model can output, and equals the formula."""
    import keras

    from keras_transformer.training import TrainingSettings
    from keras_transformer.training import compile_for_training
    from tests.training.test_losses import hand_loss

    model = load_marian(marian_directory).model
    compile_for_training(model, TrainingSettings(jit_compile=False))
    outputs = model.target_vocab_size - 1  # all but the decoder-start id
    assert model.loss.smoothed_vocab_size == model.output_vocab_size == outputs
    rng = np.random.default_rng(0)
    source = rng.integers(4, outputs, (2, 6))
    target = rng.integers(4, outputs, (2, 5))
    logits = keras.ops.convert_to_numpy(model((source, target), training=False))
    loss = float(model.loss(target, logits))
    assert loss == pytest.approx(hand_loss(target, logits, 0.1, smoothed=outputs), rel=1e-5)
    assert loss < 2 * np.log(outputs)  # a cross-entropy, not 10⁶


def test_a_multi_target_model_takes_target_lang_in_its_codes(marian_directory):
    """OPUS-MT's `>>fra<<` codes are the model's languages: `target_lang`
    writes them before each sentence, a text without one is translated as
    it is (as OPUS-MT's tools do), and another code is refused."""
    pretrained = load_marian(marian_directory)
    translator = Translator(pretrained.model, pretrained.tokenizer, beam_size=1, max_extra_length=4)
    assert translator.languages.codes == ("deu", "fra") and not translator.languages.required
    sources = ["Two dogs run. A cat sleeps.", "e f"]
    each = translator.translate([">>fra<< Two dogs run.", ">>fra<< A cat sleeps.", ">>fra<< e f"])
    expected = [f"{each[0]} {each[1]}", each[2]]
    assert translator.translate(sources, target_lang="fra") == expected
    assert translator.translate([">>fra<< Two dogs run. A cat sleeps.", ">>fra<<e f"]) == expected
    assert translator.translate(["e f"]) == translator.translate(["e f"], target_lang=None)
    with pytest.raises(ValueError, match="knows: 'deu', 'fra'"):
        translator.translate(sources, target_lang="de")
