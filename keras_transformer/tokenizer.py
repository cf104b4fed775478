"""`Tokenizer`: what every tokenizer of the package is, in the graph."""

import re

import numpy as np
import tensorflow as tf

from keras_transformer import special_ids
from keras_transformer_runtime.text import languages

WORD_MARK = "\u2581"  # SentencePiece's mark of a word's first piece
_WORD_CHARACTER = re.compile(r"\w")
_BYTE_PIECE = re.compile(r"<0x[0-9A-F]{2}>")


class Tokenizer(tf.Module):
    """Text to ids and back inside the TensorFlow graph: the type that
    `make_batches`, `Translator` and the exports take.

    A subclass sets its special ids and vocabulary size (the attributes
    below) and implements `tokenize`, `detokenize` and `id_to_string`; the
    rest has defaults that a subclass overrides where it can do more: a
    target side of its own (`tokenize_target`), sampled segmentations
    (`sample_tokenize`, with `samples_segmentations`), pieces for
    inspection (`id_to_piece`), files for exports (`kind`,
    `save_assets`), and a `fingerprint`.

    Attributes:
        kind: the name exports record, by which the runtime loads the
            files `save_assets` writes (`keras_transformer_runtime.
            tokenizers.HOST_TOKENIZERS`); `None` for a tokenizer that
            exports cannot carry.
        vocab_size: the number of ids (`None`: not known; the model's).
        pad_id, unk_id, bos_id, eos_id: the special ids (`-1`: none);
            the defaults are `keras_transformer.special_ids`'.
        samples_segmentations: whether `sample_tokenize` draws
            segmentations (subword regularization).

    Example:

    >>> class Letters(Tokenizer):
    ...     def tokenize(self, text):
    ...         return tf.strings.unicode_decode(text, "UTF-8") % 50 + 4
    >>> Letters().tokenize(["ab"])
    <tf.RaggedTensor [[47, 48]]>
    """

    kind = None
    vocab_size = None
    pad_id, unk_id = special_ids.PAD_ID, -1
    bos_id, eos_id = special_ids.BOS_ID, special_ids.EOS_ID
    samples_segmentations = False
    # Whether a multilingual model's text must name its language
    # (`TargetLanguages.required`).
    language_tag_required = True

    def tokenize(self, text):
        """Strings `(batch,)` to ragged int32 ids `(batch, None)`, without
        BOS or EOS (the source side)."""
        raise NotImplementedError(f"{type(self).__name__} does not define `tokenize`.")

    def __call__(self, text):
        return self.tokenize(text)

    def tokenize_target(self, text):
        """Target strings to ids, as `tokenize` (for a tokenizer with one
        model for both sides)."""
        return self.tokenize(text)

    def sample_tokenize(self, text, alpha):
        """`tokenize` with a segmentation drawn at random (subword
        regularization, smoothed by `alpha`), where the tokenizer can."""
        raise NotImplementedError(
            f"{type(self).__name__} does not sample segmentations (samples_segmentations=False)."
        )

    def detokenize(self, ids):
        """Padded ids `(batch, length)` to strings `(batch,)`: up to the
        first EOS, without the special ids."""
        raise NotImplementedError(f"{type(self).__name__} does not define `detokenize`.")

    def id_to_string(self, ids):
        """The pieces of int32 `ids` (any shape, in the graph), as strings
        of the same shape."""
        raise NotImplementedError(f"{type(self).__name__} does not define `id_to_string`.")

    def id_to_piece(self, token_id):
        """The piece of one id (Python), or `None` where the tokenizer has
        no pieces to show."""
        return None

    @property
    def languages(self):
        """The `TargetLanguages` whose tags (`>>fr<<`) are pieces of the
        vocabulary: what a multilingual model translates into (empty for
        one language pair, and for a tokenizer without pieces)."""
        if "_languages" not in self.__dict__:
            count = self.vocab_size or 0
            pieces = (self.id_to_piece(i) for i in range(count))
            required = self.language_tag_required
            self._languages = languages.TargetLanguages.of_pieces(pieces, required)
        return self._languages

    @property
    def language_tags(self):
        """The target-language tags in the vocabulary, such as
        `(">>cs<<", ">>de<<", ">>fr<<")`; `()` for one language pair."""
        return tuple(languages.tags(self.languages.codes))

    @property
    def fingerprint(self):
        """A short hash of what maps text to ids (two tokenizers with the
        same fingerprint give the same ids), or `None` where unknown."""
        return None

    def get_config(self):
        """What rebuilds this tokenizer (its class's `from_config`), for
        Keras to serialize it with a run (`train` keeps its batches' tokenizer); `None`
        for a tokenizer that cannot be rebuilt so."""
        return None

    @tf.autograph.experimental.do_not_convert  # Python over the pieces, once
    def space_marks(self, size):
        """NumPy bool `(size,)`: the ids whose pieces begin with
        SentencePiece's "▁", the first piece of each whitespace-separated
        word (how word links count words, `training.word_links`); ids past
        the vocabulary are not. `None` for a tokenizer without pieces or
        without "▁" in them."""
        count = min(size, self.vocab_size or size)
        marked = [(self.id_to_piece(i) or "")[:1] == WORD_MARK for i in range(count)]
        if not any(marked):
            return None
        return np.concatenate([np.array(marked, bool), np.zeros([size - count], bool)])

    @tf.autograph.experimental.do_not_convert  # Python over the pieces, once
    def word_starts(self, size):
        """NumPy bool `(size,)`: the ids whose pieces begin a word
        (SentencePiece's "▁") or a non-word character (punctuation, the
        special pieces; not byte pieces, which may be inside a word),
        after which a constraint phrase counts as met
        (`beam_search(word_starts=)`); ids past the vocabulary are not.
        `None` for a tokenizer without pieces or without "▁" in them
        (another convention of word starts), where a phrase counts
        wherever it occurs."""
        count = min(size, self.vocab_size or size)
        pieces = [self.id_to_piece(i) for i in range(count)]
        if not any(piece is not None and piece[:1] == WORD_MARK for piece in pieces):
            return None
        starts = np.zeros([size], bool)
        for i, piece in enumerate(pieces):
            starts[i] = piece[:1] == WORD_MARK or not (
                _WORD_CHARACTER.match(piece) or _BYTE_PIECE.fullmatch(piece)
            )
        return starts

    @tf.autograph.experimental.do_not_convert  # Python over the pieces, once
    def spellings(self, size):
        """What each id below `size` writes, as the pieces of a
        translation join before detokenization turns "▁" into spaces: a
        list of `bytes`, the piece's UTF-8 (a byte piece: its byte; the
        special ids and ids past the vocabulary: `b""`). A text is written
        by every run of ids whose spellings join into it, which is how
        `banned=` phrases are banned. `None` for a tokenizer without
        pieces, whose phrases are banned as the ids it segments them into.

        Example:

        >>> tokenizer.spellings(8)[4:6]
        [b'\xe2\x96\x81a', b'.']
        """
        count = min(size, self.vocab_size or size)
        pieces = [self.id_to_piece(i) for i in range(count)]
        if all(piece is None for piece in pieces):
            return None
        special = {self.pad_id, self.unk_id, self.bos_id, self.eos_id}
        texts = [b""] * size
        for i, piece in enumerate(pieces):
            if i in special or piece is None:
                continue
            byte = _BYTE_PIECE.fullmatch(piece)
            texts[i] = bytes([int(piece[3:5], 16)]) if byte else piece.encode("utf-8")
        return texts

    def save_assets(self, directory, prefix=""):
        """Writes the files from which the runtime's host tokenizer of
        `kind` segments as this one does, each named `prefix` + its name
        in `keras_transformer_runtime.text.tokenizers.ASSETS`; returns the
        names written."""
        raise NotImplementedError(f"{type(self).__name__} has no files for exports (kind=None).")
