"""A SentencePiece tokenizer run by TensorFlow Text ops."""

import base64
import hashlib
import os

import keras
import sentencepiece
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops with TensorFlow)
from tensorflow_text.python.ops.sentencepiece_tokenizer import gen_sentencepiece_tokenizer as _ops

from keras_transformer import _backend
from keras_transformer.tokenizer import Tokenizer
from keras_transformer_runtime.text.tokenizers import ASSETS


@keras.saving.register_keras_serializable(package="keras_transformer")
class SentencePieceTokenizer(Tokenizer):
    """Text to subword ids and back, inside the TensorFlow graph.

    Holds the serialized SentencePiece model (`proto`) itself: nothing is
    read from disk at call time, and a SavedModel of a function that uses
    the tokenizer carries the model as a constant, so the files used to
    build it can be deleted.

    Why a `tf.Module` and not a Keras layer: the tokenizer has no weights,
    no dtype policy and no training behaviour, and it maps strings to
    ragged ids, which Keras layers handle poorly; what it must be is
    trackable by `tf.saved_model.save` (the export saves a `tf.Module`) and
    serializable, which `get_config`/`from_config` (the proto, base64) and
    `save`/`from_file` (a `.model` file) provide.

    Why TF Text's ops and not its `SentencepieceTokenizer` class: that
    class creates the model resource once, eagerly, as a resource owned by
    an op kernel, and TensorFlow deletes it whenever it clears its kernel
    cache, which `tf.random.set_seed` and `keras.utils.set_random_seed` do:
    every tokenizer built before seeding, and every function traced with
    it, then fails with `NotFoundError`. Here each graph (a `tf.function`,
    a `tf.data` map, an exported signature) creates its own resource from
    the proto inside the graph, and eager calls rebuild theirs if needed.

    Special ids are the model's own (`pad_id`, `unk_id`, `bos_id`,
    `eos_id`, read from the proto; `-1` where the model has none);
    `train_sentencepiece` gives pad 0, unk 1, BOS 2, EOS 3
    (`keras_transformer.special_ids`). `tokenize` adds neither BOS nor EOS;
    `detokenize` drops pad, BOS, EOS and everything after the first EOS of
    a dense row.

    Args:
        proto: the serialized SentencePiece model (bytes).
        name: the module's name.

    Example:

    >>> tokenizer = SentencePieceTokenizer.from_file("spm.model")
    >>> ids = tokenizer(["Hello world."])          # RaggedTensor (1, None)
    >>> tokenizer.detokenize(ids).numpy()
    array([b'Hello world.'], dtype=object)
    """

    kind = "sentencepiece"
    samples_segmentations = True

    def __init__(self, proto, name=None):
        _backend.require_tensorflow("SentencePieceTokenizer", "TF Text")
        super().__init__(name=name)
        if isinstance(proto, str):
            raise ValueError(
                "`proto` is the serialized model (bytes); for a file use "
                f"SentencePieceTokenizer.from_file. Received: proto={proto[:60]!r}"
            )
        self.proto = bytes(proto)
        processor = _load(self.proto)
        self.vocab_size = processor.get_piece_size()
        self.pad_id = processor.pad_id()
        self.unk_id = processor.unk_id()
        self.bos_id = processor.bos_id()
        self.eos_id = processor.eos_id()
        _check_special_ids(self)
        self._processor = processor
        self._eager_handle = None

    def _handle(self):
        """The SentencePiece resource: in a graph, created by that graph."""
        if not tf.executing_eagerly():
            return _ops.sentencepiece_op(model=self.proto)
        if self._eager_handle is None:
            self._eager_handle = _ops.sentencepiece_op(model=self.proto)
        return self._eager_handle

    def _run(self, op, *args):
        try:
            return op(self._handle(), *args)
        except tf.errors.NotFoundError:
            if not tf.executing_eagerly():
                raise
            self._eager_handle = None  # deleted by a kernel-cache clear
            return op(self._handle(), *args)

    @classmethod
    def from_file(cls, path, name=None):
        """Loads a `.model` file written by SentencePiece (or `save`).

        Raises:
            ValueError: the file is empty or not a SentencePiece model (the
                message names it), or the model lacks a special piece.
        """
        with tf.io.gfile.GFile(os.fspath(path), "rb") as f:
            proto = f.read()
        try:
            return cls(proto, name=name)
        except ValueError as error:
            raise ValueError(f"{os.fspath(path)}: {error}") from None

    @classmethod
    def from_proto(cls, proto, name=None):
        """Builds from a serialized model."""
        return cls(proto, name=name)

    def save(self, path):
        """Writes the model as a SentencePiece `.model` file, atomically: a
        crash leaves the old file or the new one, never half a model."""
        path = os.fspath(path)
        staging = f"{path}.tmp-{os.getpid()}"
        try:
            with tf.io.gfile.GFile(staging, "wb") as f:
                f.write(self.proto)
            tf.io.gfile.rename(staging, path, overwrite=True)
        finally:
            if tf.io.gfile.exists(staging):
                tf.io.gfile.remove(staging)

    def save_assets(self, directory, prefix=""):
        """Writes the model as `prefix` + `spm.model` in `directory` (what
        the runtime's `SentencePieces` reads); returns its name."""
        name = prefix + ASSETS["sentencepiece"]["model"]
        self.save(os.path.join(os.fspath(directory), name))
        return [name]

    def get_config(self):
        return {"proto": base64.b64encode(self.proto).decode("ascii"), "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(base64.b64decode(config["proto"]), name=config.get("name"))

    @property
    def fingerprint(self):
        """A short hash of the model proto: two tokenizers with the same
        fingerprint map text to the same ids."""
        return hashlib.sha256(self.proto).hexdigest()[:16]

    def id_to_piece(self, token_id):
        """The piece of one id (Python, for inspection)."""
        return self._processor.id_to_piece(int(token_id))

    def piece_to_id(self, piece):
        """The id of one piece (Python, for inspection)."""
        return self._processor.piece_to_id(piece)

    def id_to_string(self, ids):
        """The pieces of int32 `ids` (any shape, in the graph), as strings
        of the same shape; ids outside the vocabulary give `"<unk>"`'s piece.

        Example:

        >>> tokenizer.id_to_string(tokenizer.tokenize(["A dog."]).to_tensor())
        """
        ids = tf.convert_to_tensor(ids, tf.int32)
        ids = tf.where((ids >= 0) & (ids < self.vocab_size), ids, self.unk_id)
        pieces = self._run(_ops.sentencepiece_id_to_string_op, tf.reshape(ids, [-1]))
        return tf.reshape(pieces, tf.shape(ids))

    def tokenize(self, text):
        """Strings `(batch,)` to ragged int32 ids `(batch, None)`; a scalar
        string gives a 1-D tensor."""
        return self._tokenize(text, nbest_size=0, alpha=1.0)

    def sample_tokenize(self, text, alpha):
        """Like `tokenize`, but draws a segmentation at random each call
        (subword regularization, for training only): for a unigram model
        from all segmentations with probabilities smoothed by `alpha`
        (Kudo, 2018; 0.1-0.5 is usual), for a BPE model with merges dropped
        with probability `alpha` (BPE-dropout, Provilkov et al., 2020; 0.1
        is usual). The draws come from SentencePiece's own generator, which
        no TensorFlow seed controls.

        Example:

        >>> tokenizer.sample_tokenize(["A dog runs."], alpha=0.1)
        """
        if not isinstance(alpha, (int, float)) or not 0 < alpha <= 1:
            raise ValueError(f"`alpha` must be in (0, 1]. Received: alpha={alpha!r}")
        return self._tokenize(text, nbest_size=-1, alpha=float(alpha))

    def _tokenize(self, text, nbest_size, alpha):
        text = tf.convert_to_tensor(text, tf.string)
        if text.shape.rank == 0:
            return self._tokenize(text[None], nbest_size, alpha)[0]

        def tokenize(handle, strings):
            values, splits = _ops.sentencepiece_tokenize_op(
                handle,
                strings,
                nbest_size=nbest_size,
                alpha=alpha,
                add_bos=False,
                add_eos=False,
                reverse=False,
                out_type=tf.int32,
                return_nbest=False,
            )
            return tf.RaggedTensor.from_row_splits(values, splits, validate=False)

        return self._run(tokenize, text)

    def tokenize_target(self, text):
        """Target text to ids: `tokenize`, as one model segments both
        sides (a `MarianTokenizer` has one model per side)."""
        return self.tokenize(text)

    def detokenize(self, ids):
        """Ids to strings: ragged `(batch, None)` or dense, padded
        `(batch, length)` (what the searches return); special ids and what
        follows the first EOS are dropped."""
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.convert_to_tensor(ids, tf.int32)
            if ids.shape.rank == 1:
                return self.detokenize(ids[None])[0]
        ids = ids_to_detokenize(ids, self.eos_id, (self.pad_id, self.bos_id, self.eos_id))
        return self._run(
            lambda handle, values, splits: _ops.sentencepiece_detokenize_op(
                handle, values, splits, add_bos=False, add_eos=False, reverse=False
            ),
            ids.flat_values,
            ids.row_splits,
        )


def ids_to_detokenize(ids, eos_id, dropped):
    """The ragged ids `(batch, None)` a detokenizer turns into text: a
    dense, padded `(batch, length)` tensor cut before each row's first
    `eos_id` (a ragged one as it is), without the ids in `dropped`."""
    if not isinstance(ids, tf.RaggedTensor):
        is_eos = tf.cast(tf.equal(ids, eos_id), tf.int32)
        ids = tf.ragged.boolean_mask(ids, tf.equal(tf.cumsum(is_eos, axis=1), 0))
    keep = tf.ones_like(ids, tf.bool)
    for special in dropped:
        keep = tf.logical_and(keep, tf.not_equal(ids, special))
    return tf.ragged.boolean_mask(ids, keep)


def _load(proto):
    """A SentencePiece processor for `proto`, or a `ValueError` that says
    why there is none (SentencePiece accepts empty bytes as an empty model
    and reports a truncated one as an internal error)."""
    if not proto:
        raise ValueError("The SentencePiece model is empty (0 bytes).")
    try:
        processor = sentencepiece.SentencePieceProcessor(model_proto=proto)
    except RuntimeError as error:
        raise ValueError(
            f"Not a readable SentencePiece model ({len(proto)} bytes; truncated or another "
            f"format): {str(error).strip()}"
        ) from None
    if processor.get_piece_size() == 0:
        raise ValueError("The SentencePiece model has no pieces.")
    return processor


def _check_special_ids(tokenizer):
    """Refuses a model without distinct pad, unk, BOS and EOS pieces.

    SentencePiece's defaults have no pad piece (`pad_id=-1`), and id 0 is
    then the unknown piece: padding with 0 would hide unknown words from
    the model. `train_sentencepiece` gives pad 0, unk 1, BOS 2, EOS 3; a
    model trained elsewhere works when it defines all four (the package
    reads them from the tokenizer, and `Transformer(pad_id=...)` takes its
    pad id).
    """
    ids = {
        "pad_id": tokenizer.pad_id,
        "unk_id": tokenizer.unk_id,
        "bos_id": tokenizer.bos_id,
        "eos_id": tokenizer.eos_id,
    }
    layout = ", ".join(f"{name}={value}" for name, value in ids.items())
    if min(ids.values()) < 0 or len(set(ids.values())) < len(ids):
        raise ValueError(
            "The SentencePiece model must define distinct pad, unk, BOS and EOS pieces "
            "(train_sentencepiece gives pad_id=0, unk_id=1, bos_id=2, eos_id=3; "
            f"SentencePiece's own defaults have no pad piece). Received: {layout}"
        )
