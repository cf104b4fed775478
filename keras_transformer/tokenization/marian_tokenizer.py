"""The tokenizer of Marian (OPUS-MT) models, run by TensorFlow Text ops."""

import base64
import functools
import hashlib
import json
import os
import shutil
import tempfile

import keras
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops with TensorFlow)
from tensorflow_text.python.ops.sentencepiece_tokenizer import gen_sentencepiece_tokenizer as _ops

from keras_transformer import _backend
from keras_transformer.tokenization.sentencepiece_tokenizer import _load
from keras_transformer.tokenization.sentencepiece_tokenizer import ids_to_detokenize
from keras_transformer.tokenizer import Tokenizer
from keras_transformer_runtime.text.tokenizers import ASSETS

# The files of a Marian tokenizer, as Hugging Face's MarianTokenizer saves
# them; the runtime's `MarianPieces` reads them by the same names.
SOURCE_SPM, TARGET_SPM, VOCAB = ASSETS["marian"].values()
# The pieces every Marian vocabulary has.
PAD, UNK, EOS = "<pad>", "<unk>", "</s>"
# The piece of the id one past the vocabulary: the decoder's start token.
DECODER_START = "<s>"
# A multi-target model's target language, first in the source: ">>deu<<".
LANGUAGE_CODE = r"(?s)^(>>.*?<<)"
WORD_BOUNDARY = "\u2581"


@keras.saving.register_keras_serializable(package="keras_transformer")
class MarianTokenizer(Tokenizer):
    """Text to the ids of a Marian model and back, inside the TensorFlow graph.

    Marian (and the OPUS-MT models converted to Hugging Face's format)
    segments the source with one SentencePiece model (`source.spm`) and the
    target with another (`target.spm`), and maps the pieces to ids through
    one `vocab.json` whose ids are not SentencePiece's. This tokenizer does
    the same with TF Text ops and a static lookup table, and holds both
    models and the vocabulary itself, so a SavedModel that uses it is
    self-contained.

    Ids are the vocabulary's, plus one: Marian starts decoding with the pad
    id, which this package's models cannot (they never attend to padding),
    so `bos_id` is `vocab_size - 1`, one past Marian's ids, and an imported
    model's embedding for it is a copy of the pad embedding
    (`keras_transformer.pretrained.load_marian`). `pad_id`, `unk_id` and
    `eos_id` are the vocabulary's `<pad>`, `<unk>` and `</s>`.

    `tokenize` segments text with the source model; a text that starts
    with a language code such as `>>deu<<` (multi-target models) keeps it as
    one token. Pieces missing from the vocabulary become `unk_id`.
    `tokenize_target` does the same with the target model (for training
    targets and prefixes). Unlike Hugging Face's `MarianTokenizer`, the
    text `</s>`, `<unk>` or `<pad>` in a sentence is text, not a special
    id: a request cannot end its own source early.

    `detokenize` drops everything from the first EOS on and the pad,
    unknown, BOS and EOS ids, joins the pieces and turns the word-boundary
    marks into spaces, as `MarianTokenizer.decode(ids,
    skip_special_tokens=True)` does.

    Args:
        source_proto: the serialized source SentencePiece model (bytes).
        target_proto: the serialized target SentencePiece model (bytes).
        vocab: `{piece: id}`, ids `0 .. len(vocab) - 1`, with `<pad>`,
            `<unk>` and `</s>`.
        name: the module's name.

    Example:

    >>> tokenizer = MarianTokenizer.from_directory("opus-mt-en-de")
    >>> ids = tokenizer(["Hello world."])          # RaggedTensor (1, None)
    >>> tokenizer.detokenize(ids).numpy()
    array([b'Hello world.'], dtype=object)
    """

    kind = "marian"

    # OPUS-MT's tools translate a text without a language code as it is.
    language_tag_required = False

    def __init__(self, source_proto, target_proto, vocab, name=None):
        _backend.require_tensorflow("MarianTokenizer", "TF Text")
        super().__init__(name=name)
        self.source_proto = bytes(source_proto)
        self.target_proto = bytes(target_proto)
        _load(self.source_proto), _load(self.target_proto)  # readable, or a ValueError
        vocab = dict(vocab)
        pieces = _pieces_in_id_order(vocab)
        self.pad_id, self.unk_id, self.eos_id = (vocab[p] for p in (PAD, UNK, EOS))
        self.bos_id = len(pieces)
        # A tuple, which `tf.Module` keeps as it is (it wraps lists and dicts).
        self.pieces = (*pieces, DECODER_START if DECODER_START not in vocab else "<start>")
        self.vocab_size = len(self.pieces)
        # Tracked by the module, so a SavedModel that uses it restores it.
        self._piece_to_id = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(pieces), tf.range(self.bos_id, dtype=tf.int32)
            ),
            default_value=self.unk_id,
        )

    # Construction and saving.

    @classmethod
    def from_directory(cls, directory, name=None):
        """Reads `source.spm`, `target.spm` and `vocab.json` from a Hugging
        Face Marian directory (or one `save` wrote).

        Raises:
            ValueError: a file is missing, or not what it should be (the
                message names it), or the model has separate source and
                target vocabularies (`separate_vocabs`), which this
                tokenizer does not support.
        """
        directory = os.fspath(directory)
        config_path = os.path.join(directory, "tokenizer_config.json")
        separate = tf.io.gfile.exists(os.path.join(directory, "target_vocab.json"))
        if tf.io.gfile.exists(config_path):
            with tf.io.gfile.GFile(config_path, "rb") as f:
                try:
                    separate = separate or bool(json.loads(f.read()).get("separate_vocabs"))
                except ValueError as error:
                    raise ValueError(f"{config_path}: not JSON ({error}).") from None
        if separate:
            raise ValueError(
                f"{directory}: the model has separate source and target vocabularies "
                "(separate_vocabs), which MarianTokenizer does not support; it reads models "
                "with one vocab.json."
            )
        files = {}
        for file in (SOURCE_SPM, TARGET_SPM, VOCAB):
            path = os.path.join(directory, file)
            if not tf.io.gfile.exists(path):
                raise ValueError(
                    f"A Marian tokenizer needs {SOURCE_SPM}, {TARGET_SPM} and {VOCAB}; "
                    f"{path} does not exist."
                )
            with tf.io.gfile.GFile(path, "rb") as f:
                files[file] = f.read()
        try:
            vocab = json.loads(files[VOCAB].decode("utf-8"))
        except ValueError as error:
            raise ValueError(f"{os.path.join(directory, VOCAB)}: not JSON ({error}).") from None
        try:
            return cls(files[SOURCE_SPM], files[TARGET_SPM], vocab, name=name)
        except ValueError as error:
            raise ValueError(f"{directory}: {error}") from None

    def get_config(self):
        return {
            "source_proto": base64.b64encode(self.source_proto).decode("ascii"),
            "target_proto": base64.b64encode(self.target_proto).decode("ascii"),
            "vocab": dict(self.vocab),
            "name": self.name,
        }

    @classmethod
    def from_config(cls, config):
        protos = (base64.b64decode(config[key]) for key in ("source_proto", "target_proto"))
        return cls(*protos, config["vocab"], name=config.get("name"))

    def save(self, directory):
        """Writes `source.spm`, `target.spm` and `vocab.json` into
        `directory` (created if needed), each file atomically."""
        self.save_assets(directory)

    def save_assets(self, directory, prefix=""):
        """Writes the three files of `save`, each named `prefix` + its
        name, into `directory` (created if needed), each atomically;
        returns their names."""
        directory = os.fspath(directory)
        os.makedirs(directory, exist_ok=True)
        vocab = json.dumps(self.vocab, ensure_ascii=False, indent=1).encode("utf-8")
        written = []
        for file, data in (
            (SOURCE_SPM, self.source_proto),
            (TARGET_SPM, self.target_proto),
            (VOCAB, vocab),
        ):
            name = prefix + file
            handle, staging = tempfile.mkstemp(dir=directory, prefix=f".{name}.tmp-")
            with os.fdopen(handle, "wb") as f:
                f.write(data)
            shutil.move(staging, os.path.join(directory, name))
            written.append(name)
        return written

    @functools.cached_property
    def vocab(self):
        """`{piece: id}`, as in `vocab.json` (without the start id)."""
        return {piece: i for i, piece in enumerate(self.pieces[:-1])}

    @property
    def fingerprint(self):
        """A short hash of both models and the vocabulary: two tokenizers
        with the same fingerprint map text to the same ids."""
        digest = hashlib.sha256(self.source_proto + b"\0" + self.target_proto + b"\0")
        digest.update("\n".join(self.pieces).encode("utf-8"))
        return digest.hexdigest()[:16]

    # Python helpers, for inspection and exports.

    def id_to_piece(self, token_id):
        """The piece of one id."""
        return self.pieces[int(token_id)]

    def piece_to_id(self, piece):
        """The id of one piece (`unk_id` for a piece not in the vocabulary)."""
        return self.vocab.get(piece, self.unk_id) if piece != self.pieces[-1] else self.bos_id

    # In the graph.

    def id_to_string(self, ids):
        """The pieces of int32 `ids` (any shape), as strings of the same
        shape; ids outside the vocabulary give `<unk>`."""
        ids = tf.convert_to_tensor(ids, tf.int32)
        ids = tf.where((ids >= 0) & (ids < self.vocab_size), ids, self.unk_id)
        return tf.gather(tf.constant(self.pieces), ids)

    def tokenize(self, text):
        """Source strings `(batch,)` to ragged int32 ids `(batch, None)`
        (no EOS); a scalar string gives a 1-D tensor."""
        return self._tokenize(text, self.source_proto)

    def tokenize_target(self, text):
        """Target strings `(batch,)` to ragged int32 ids `(batch, None)`,
        segmented by the target model."""
        return self._tokenize(text, self.target_proto)

    def _tokenize(self, text, proto):
        text = tf.convert_to_tensor(text, tf.string)
        if text.shape.rank == 0:
            return self._tokenize(text[None], proto)[0]
        has_code = tf.strings.regex_full_match(text, LANGUAGE_CODE + ".*")
        code = tf.strings.regex_replace(text, LANGUAGE_CODE + ".*", r"\1")
        text = tf.where(has_code, tf.strings.regex_replace(text, LANGUAGE_CODE, ""), text)
        values, splits = _ops.sentencepiece_tokenize_op(
            _ops.sentencepiece_op(model=proto),
            text,
            nbest_size=0,
            alpha=1.0,
            add_bos=False,
            add_eos=False,
            reverse=False,
            out_type=tf.string,
            return_nbest=False,
        )
        pieces = tf.RaggedTensor.from_row_splits(values, splits, validate=False)
        code = tf.ragged.boolean_mask(code[:, None], has_code[:, None])  # (batch, 0 or 1)
        pieces = tf.concat([code, pieces], axis=1)
        return tf.ragged.map_flat_values(self._piece_to_id.lookup, pieces)

    def detokenize(self, ids):
        """Ids to strings: ragged `(batch, None)` or dense, padded `(batch,
        length)` (what the searches return); see the class for what is
        dropped."""
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.convert_to_tensor(ids, tf.int32)
            if ids.shape.rank == 1:
                return self.detokenize(ids[None])[0]
        dropped = (self.pad_id, self.unk_id, self.bos_id, self.eos_id)
        ids = ids_to_detokenize(ids, self.eos_id, dropped)
        pieces = tf.ragged.map_flat_values(self.id_to_string, ids)
        text = tf.strings.reduce_join(pieces, axis=1)
        text = tf.strings.regex_replace(text, WORD_BOUNDARY, " ")
        return tf.strings.strip(text)


def _pieces_in_id_order(vocab):
    """The pieces of `{piece: id}` as a list indexed by id, or a
    `ValueError` if the ids are not `0 .. n - 1` or a special piece is
    missing."""
    missing = [p for p in (PAD, UNK, EOS) if p not in vocab]
    if missing:
        raise ValueError(
            f"A Marian vocabulary must have the pieces {PAD!r}, {UNK!r} and {EOS!r}. "
            f"Received: a vocabulary of {len(vocab):,} pieces without {missing}"
        )
    pieces = [None] * len(vocab)
    for piece, token_id in vocab.items():
        if not isinstance(token_id, int) or not 0 <= token_id < len(vocab) or pieces[token_id]:
            raise ValueError(
                f"A Marian vocabulary maps its {len(vocab):,} pieces to the ids 0 .. "
                f"{len(vocab) - 1}, once each. Received: {piece!r}: {token_id!r}"
            )
        pieces[token_id] = piece
    return pieces
