import gzip
import io
import os
import subprocess
import sys

import numpy as np
import pytest
import sentencepiece
import tensorflow as tf

from keras_transformer.special_ids import BOS_ID
from keras_transformer.special_ids import EOS_ID
from keras_transformer.tokenization import SentencePieceTokenizer
from keras_transformer.tokenization import train_sentencepiece
from tests.tokenization.helpers import OTHER_IDS
from tests.tokenization.helpers import tokenizer_with_other_ids

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design

ENGLISH = [
    "A man in a blue shirt is standing on a ladder.",
    "Two dogs are running through the snow.",
    "A little girl climbs into a wooden playhouse.",
    "People are walking down a busy street at night.",
]
GERMAN = [
    "Ein Mann in einem blauen Hemd steht auf einer Leiter.",
    "Zwei Hunde laufen durch den Schnee.",
    "Ein kleines Mädchen klettert in ein Spielhaus aus Holz.",
    "Leute gehen nachts eine belebte Straße entlang.",
]


@pytest.fixture(scope="module")
def tokenizer():
    return train_sentencepiece(list(zip(ENGLISH * 20, GERMAN * 20, strict=True)), vocab_size=400)


def test_special_ids_are_fixed(tokenizer):
    assert tokenizer.vocab_size == 400
    assert [tokenizer.id_to_piece(i) for i in range(4)] == ["<pad>", "<unk>", "<s>", "</s>"]


def test_round_trip_normal_text(tokenizer):
    text = ENGLISH + GERMAN + ["Ein Hund.", "", "Straße, Mädchen: 42!"]
    ids = tokenizer.tokenize(text)
    assert isinstance(ids, tf.RaggedTensor) and ids.dtype == tf.int32
    assert [s.decode() for s in tokenizer.detokenize(ids).numpy()] == text
    # No special ids appear in tokenized text.
    assert not tf.reduce_any(ids.flat_values < 4)


def test_unseen_characters_are_not_lost(tokenizer):
    text = ["日本語 😀 ÆØÅ", "Ελληνικά"]
    ids = tokenizer(text)
    assert [s.decode() for s in tokenizer.detokenize(ids).numpy()] == text


def test_detokenize_dense_stops_at_eos(tokenizer):
    ids = tokenizer(["Two dogs.", "A man."]).to_tensor()
    padded = tf.concat([ids, tf.fill([2, 1], EOS_ID), tf.fill([2, 2], 7)], axis=1)
    with_bos = tf.concat([tf.fill([2, 1], BOS_ID), padded], axis=1)
    assert tokenizer.detokenize(with_bos).numpy().tolist() == [b"Two dogs.", b"A man."]
    assert tokenizer.detokenize(ids[0]).numpy() == b"Two dogs."


def test_runs_in_a_graph(tokenizer):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def round_trip(text):
        return tokenizer.detokenize(tokenizer.tokenize(text))

    assert round_trip(tf.constant(["Two dogs."])).numpy() == [b"Two dogs."]


def test_id_to_string_gives_sentencepieces_own_pieces(tokenizer):
    processor = sentencepiece.SentencePieceProcessor(model_proto=tokenizer.proto)
    ids = np.arange(tokenizer.vocab_size, dtype=np.int32).reshape(-1, 4)[:, ::-1]
    expected = [[processor.id_to_piece(int(i)).encode() for i in row] for row in ids]
    graph = tf.function(tokenizer.id_to_string, input_signature=[tf.TensorSpec(None, tf.int32)])
    for run in (tokenizer.id_to_string, graph):
        assert run(ids).numpy().tolist() == expected
    unknown = processor.id_to_piece(tokenizer.unk_id).encode()
    assert tokenizer.id_to_string([-1, tokenizer.vocab_size]).numpy().tolist() == [unknown] * 2


def test_files_and_formats(tmp_path, tokenizer):
    (tmp_path / "train.en").write_text("\n".join(ENGLISH * 10) + "\n")
    with gzip.open(tmp_path / "train.de.gz", "wt") as f:
        f.write("\n".join(GERMAN * 10) + "\n")
    from_files = train_sentencepiece([tmp_path / "train.en", str(tmp_path / "train.de.gz")], 400)
    assert from_files.detokenize(from_files(["Zwei Hunde."])).numpy() == [b"Zwei Hunde."]
    unigram = train_sentencepiece(ENGLISH * 20, 300, model_type="unigram")
    assert unigram.vocab_size <= 300

    tokenizer.save(tmp_path / "spm.model")
    loaded = SentencePieceTokenizer.from_file(tmp_path / "spm.model")
    again = SentencePieceTokenizer.from_config(tokenizer.get_config())
    for other in (loaded, again, SentencePieceTokenizer.from_proto(tokenizer.proto)):
        assert other(ENGLISH).to_list() == tokenizer(ENGLISH).to_list()


@pytest.mark.large  # traces a SavedModel, starts a Python process
def test_saved_model_needs_no_files(tmp_path):
    """The model proto travels inside a SavedModel: delete the .model file
    and load the SavedModel in a process without keras_transformer."""
    model_file = tmp_path / "spm.model"
    train_sentencepiece(ENGLISH * 20, 300).save(model_file)
    tokenizer = SentencePieceTokenizer.from_file(model_file)
    module = tf.Module()
    module.tokenizer = tokenizer
    module.round_trip = tf.function(
        lambda text: tokenizer.detokenize(tokenizer.tokenize(text)),
        input_signature=[tf.TensorSpec([None], tf.string)],
    )
    tf.saved_model.save(module, str(tmp_path / "saved"))
    os.remove(model_file)
    code = (
        "import sys, tensorflow as tf, tensorflow_text\n"
        "assert 'keras_transformer' not in sys.modules\n"
        f"m = tf.saved_model.load({str(tmp_path / 'saved')!r})\n"
        "print(m.round_trip(tf.constant(['Two dogs are running.'])).numpy()[0].decode())\n"
    )
    output = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert output.returncode == 0, output.stderr[-2000:]
    assert output.stdout.strip().splitlines()[-1] == "Two dogs are running."


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(vocab_size=100), "vocab_size"),
        (dict(vocab_size=400, model_type="wordpiece"), "model_type"),
    ],
)
def test_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=f"Received: {name}="):
        train_sentencepiece(ENGLISH, **kwargs)
    with pytest.raises(ValueError, match="from_file"):
        SentencePieceTokenizer("spm.model")


def test_survives_reseeding(tokenizer):
    """`tf.random.set_seed` clears TensorFlow's kernel cache, which deletes
    TF Text's own tokenizer resources; ours are rebuilt or graph-owned."""
    traced = tf.function(lambda s: tokenizer(s).to_tensor())
    dataset = (
        tf.data.Dataset.from_tensor_slices(["Two dogs."])
        .batch(1)
        .map(lambda s: tokenizer(s).to_tensor())
    )
    expected = tokenizer(["Two dogs."]).to_tensor().numpy()
    traced(tf.constant(["Two dogs."]))
    tf.random.set_seed(5)
    np.testing.assert_array_equal(tokenizer(["Two dogs."]).to_tensor().numpy(), expected)
    np.testing.assert_array_equal(traced(tf.constant(["Two dogs."])).numpy(), expected)
    np.testing.assert_array_equal(next(iter(dataset)).numpy(), expected)


def test_special_ids_come_from_the_model():
    other = tokenizer_with_other_ids(ENGLISH * 20, 300)
    assert {name: getattr(other, name) for name in OTHER_IDS} == OTHER_IDS
    assert [other.id_to_piece(OTHER_IDS[k]) for k in ("pad_id", "bos_id", "eos_id")] == [
        "<pad>",
        "<s>",
        "</s>",
    ]
    ids = other(["Two dogs.", "A man."]).to_tensor(OTHER_IDS["pad_id"])
    # BOS in front, EOS then junk after: only the text between survives.
    bos = tf.fill([2, 1], OTHER_IDS["bos_id"])
    eos = tf.fill([2, 1], OTHER_IDS["eos_id"])
    framed = tf.concat([bos, ids, eos, tf.fill([2, 2], 7)], axis=1)
    assert other.detokenize(framed).numpy().tolist() == [b"Two dogs.", b"A man."]


def test_a_missing_file_is_not_trained_on_as_a_sentence(tmp_path):
    (tmp_path / "train.en").write_text("\n".join(ENGLISH * 10) + "\n")
    typo = str(tmp_path / "trian.de")
    with pytest.raises(FileNotFoundError, match="trian.de"):
        train_sentencepiece([str(tmp_path / "train.en"), typo], 300)
    with pytest.raises(FileNotFoundError, match="data.gz"):
        train_sentencepiece(["data.gz"], 300)
    # Sentences, even with dots and no spaces, are sentences.
    assert train_sentencepiece(ENGLISH * 20 + ["U.S.A", "e.g.", "Hello."], 300).vocab_size


def default_layout_model(sentences):
    """A valid model with SentencePiece's own special ids: unk 0, BOS 1,
    EOS 2 and no pad piece."""
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_writer=model,
        vocab_size=300,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    return model.getvalue()


def test_models_that_cannot_work_are_refused_at_construction(tmp_path, tokenizer):
    with pytest.raises(ValueError, match="empty"):
        SentencePieceTokenizer(b"")
    (tmp_path / "cut.model").write_bytes(tokenizer.proto[: len(tokenizer.proto) // 2])
    with pytest.raises(ValueError, match="cut.model: Not a readable SentencePiece model"):
        SentencePieceTokenizer.from_file(tmp_path / "cut.model")
    with pytest.raises(ValueError, match="pad_id=-1, unk_id=0, bos_id=1, eos_id=2"):
        SentencePieceTokenizer(default_layout_model(ENGLISH * 20))


def test_save_replaces_the_file_whole(tmp_path, tokenizer, monkeypatch):
    path = tmp_path / "spm.model"
    path.write_bytes(b"an older model")
    tokenizer.save(path)
    assert path.read_bytes() == tokenizer.proto
    assert os.listdir(tmp_path) == ["spm.model"]  # no staging file left

    def full_disk(*args, **kwargs):
        raise OSError("No space left on device")

    other = train_sentencepiece(GERMAN * 20, 300)
    monkeypatch.setattr(tf.io.gfile, "rename", full_disk)
    with pytest.raises(OSError, match="No space"):
        other.save(path)
    assert path.read_bytes() == tokenizer.proto  # the old file is intact
    assert os.listdir(tmp_path) == ["spm.model"]


def test_sample_tokenize_draws_segmentations_of_the_same_text(tokenizer):
    text = tf.constant(ENGLISH[:2])
    draws = [tokenizer.sample_tokenize(text, alpha=0.3) for _ in range(20)]
    assert len({str(d.to_list()) for d in draws}) > 1
    for draw in draws:
        assert [t.decode() for t in tokenizer.detokenize(draw).numpy()] == ENGLISH[:2]
    # BPE-dropout with probability 1 drops every merge: single characters.
    pieces = [tokenizer.id_to_piece(i) for i in tokenizer.sample_tokenize(text, 1.0).flat_values]
    assert all(len(piece.lstrip("▁")) <= 1 for piece in pieces)
    assert tokenizer.tokenize(text).to_list() == tokenizer.tokenize(text).to_list()
    with pytest.raises(ValueError, match="alpha"):
        tokenizer.sample_tokenize(text, alpha=0.0)
