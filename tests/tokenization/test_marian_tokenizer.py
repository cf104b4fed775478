import json

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.tokenization import MarianTokenizer
from tests.pretrained.marian_directory import generated_pairs

pytestmark = pytest.mark.tensorflow_only  # TF Text by design
transformers = pytest.importorskip("transformers")

# What a tokenizer meets besides ordinary sentences.
AWKWARD = [
    "",
    " ",
    "  leading  and   double spaces ",
    "Emoji 😀 here 🐕!",
    "Mixed Καλημέρα мир 世界 straße",
    "Unknown characters: ∮ ⅀ ꙮ \u200b \x7f",
    "tab\there\nnewline",
    "ÄÖÜ ß é É",
    ">>deu<< A dog.",
    ">>fra<<Red ball",
    ">>xxx<< an unknown code",
    ">> not a code",
    "a dog " * 40,
]


@pytest.fixture(scope="module")
def tokenizers(marian_directory):
    reference = transformers.MarianTokenizer.from_pretrained(marian_directory)
    return MarianTokenizer.from_directory(marian_directory), reference


def test_ids_equal_marian_tokenizers_on_both_sides(tokenizers):
    ours, reference = tokenizers
    sources, targets = generated_pairs(300, seed=7)
    texts = sources + targets + AWKWARD
    for tokenize, side in ((ours.tokenize, "text"), (ours.tokenize_target, "text_target")):
        got = tokenize(texts).to_list()
        expected = [reference(**{side: text})["input_ids"][:-1] for text in texts]  # less EOS
        assert got == expected, side
    assert ours.tokenize(">>deu<< Dog").numpy()[0] == reference.convert_tokens_to_ids(">>deu<<")


def test_special_ids_and_the_added_start_id(tokenizers):
    ours, reference = tokenizers
    assert (ours.pad_id, ours.unk_id, ours.eos_id) == (
        reference.pad_token_id,
        reference.unk_token_id,
        reference.eos_token_id,
    )
    assert ours.bos_id == len(reference.get_vocab()) == ours.vocab_size - 1
    assert ours.id_to_piece(ours.bos_id) == "<s>"


def test_detokenize_equals_marian_decode(tokenizers):
    ours, reference = tokenizers
    rng = np.random.default_rng(0)
    rows = [rng.integers(0, ours.vocab_size - 1, rng.integers(0, 14)).tolist() for _ in range(300)]
    rows = [row[: row.index(0)] if 0 in row else row for row in rows]  # up to EOS (id 0)
    got = ours.detokenize(tf.ragged.constant(rows, tf.int32, ragged_rank=1)).numpy()
    expected = [reference.decode(row, skip_special_tokens=True) for row in rows]
    assert [text.decode() for text in got] == expected
    # Round trip of real targets through the target model.
    _, targets = generated_pairs(50, seed=3)
    ids = ours.tokenize_target(targets)
    assert [t.decode() for t in ours.detokenize(ids).numpy()] == targets


def test_dense_rows_stop_at_the_first_eos(tokenizers):
    ours, _ = tokenizers
    ids = ours.tokenize_target(["Ein Hund."]).to_tensor()[0].numpy().tolist()
    row = [ours.bos_id, *ids, ours.eos_id, *ids, ours.pad_id]
    assert ours.detokenize(tf.constant([row])).numpy()[0].decode() == "Ein Hund."


def test_special_piece_text_stays_text(tokenizers):
    ours, _ = tokenizers
    ids = ours.tokenize(["a </s> b"]).to_list()[0]
    assert ours.eos_id not in ids and ours.pad_id not in ids


def test_save_and_reload_in_graph(tokenizers, tmp_path):
    ours, _ = tokenizers
    ours.save(tmp_path / "copy")
    again = MarianTokenizer.from_directory(tmp_path / "copy")
    assert again.fingerprint == ours.fingerprint
    text = tf.constant(["A red dog.", ">>deu<< Ein Ball"])
    traced = tf.function(lambda t: again.tokenize(t).to_tensor(-1))
    assert traced(text).numpy().tolist() == ours.tokenize(text).to_tensor(-1).numpy().tolist()
    module = tf.Module()
    module.tokenizer = again
    module.f = tf.function(
        lambda t: again.tokenize(t).to_tensor(-1),
        input_signature=[tf.TensorSpec([None], tf.string)],
    )
    tf.saved_model.save(module, str(tmp_path / "saved"))
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    assert loaded.f(text).numpy().tolist() == traced(text).numpy().tolist()


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda vocab: vocab.pop("<pad>"), "without \\['<pad>'\\]"),
        (lambda vocab: vocab.update({"extra": 0}), "once each"),
        (lambda vocab: vocab.update({"</s>": 10_000}), "once each"),
    ],
)
def test_bad_vocabularies_are_refused(marian_directory, tmp_path, change, message):
    vocab = json.loads((marian_directory / "vocab.json").read_text())
    change(vocab)
    for name in ("source.spm", "target.spm"):
        (tmp_path / name).write_bytes((marian_directory / name).read_bytes())
    (tmp_path / "vocab.json").write_text(json.dumps(vocab))
    with pytest.raises(ValueError, match=message):
        MarianTokenizer.from_directory(tmp_path)


def test_separate_vocabularies_are_refused(marian_directory, tmp_path):
    for path in marian_directory.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, "separate_vocabs": True}))
    with pytest.raises(ValueError, match="separate source and target vocabularies"):
        MarianTokenizer.from_directory(tmp_path)


def test_missing_files_are_named(tmp_path):
    with pytest.raises(ValueError, match="source.spm does not exist"):
        MarianTokenizer.from_directory(tmp_path)
