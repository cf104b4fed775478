"""Text to pieces and ids and back with an export's SentencePiece files,
in Python (the `sentencepiece` package), as the in-graph tokenizers of
`keras_transformer.tokenization` segment it: what the runtimes that take
pieces (CTranslate2) or ids (LiteRT, ONNX) run on the host."""

import json
import os

from keras_transformer_runtime import logs
from keras_transformer_runtime.text.languages import TargetLanguages

# Each tokenizer kind's files, as its in-graph tokenizer writes them
# (`Tokenizer.save_assets`) and an export carries them: a file is named
# `prefix + name` (a CTranslate2 directory: no prefix; beside a LiteRT or
# ONNX model file `PATH`: `PATH.`).
ASSETS = {
    "sentencepiece": {"model": "spm.model"},
    "marian": {"source": "source.spm", "target": "target.spm", "vocab": "vocab.json"},
}


def asset_files(kind, prefix=""):
    """The names of a `kind`'s files, with `prefix`."""
    return [prefix + name for name in ASSETS[kind].values()]


def host_tokenizer(kind, directory, prefix=""):
    """The host tokenizer of `kind` (`HOST_TOKENIZERS`) from its files in
    `directory`, named with `prefix`.

    Raises:
        ValueError: `kind` is not one of `ASSETS`'.
    """
    if kind not in HOST_TOKENIZERS:
        accepted = ", ".join(repr(k) for k in HOST_TOKENIZERS)
        raise ValueError(f"`kind` must be one of {accepted}. Received: kind={kind!r}")
    return HOST_TOKENIZERS[kind].from_assets(directory, prefix)


def import_sentencepiece():
    """`sentencepiece`, at its minimum log level (`logs.sentencepiece_level`:
    no INFO lines unless the native logs are shown)."""
    import sentencepiece

    sentencepiece.set_min_log_level(logs.sentencepiece_level())
    return sentencepiece


class RecentTexts:
    """`function(text)`, computed once for each of the last `size` texts
    (the runners measure a sentence's length when they split a request,
    then tokenize it to translate it: one tokenization serves both). The
    values are kept as tuples and returned as new lists.

    Example:

    >>> pieces = RecentTexts(lambda text: text.split())
    >>> pieces("a b") == pieces("a b") == ["a", "b"]
    True
    """

    def __init__(self, function, size=4096):
        self._function, self._size, self._values = function, size, {}

    def __call__(self, text):
        value = self._values.get(text)
        if value is None:
            value = tuple(self._function(text))
            if len(self._values) >= self._size:
                self._values.clear()
            self._values[text] = value
        return list(value)


class SentencePieces:
    """One SentencePiece model for both sides (`SentencePieceTokenizer`).

    Args:
        model_file: the SentencePiece model (`spm.model`).

    Attributes:
        languages: the `TargetLanguages` whose tags are pieces of the model.

    Example:

    >>> pieces = SentencePieces("ende_ct2/spm.model")
    >>> pieces.text_of_ids(pieces.source_ids("A dog runs.") + [pieces.eos_id])
    'A dog runs.'
    """

    def __init__(self, model_file):
        sentencepiece = import_sentencepiece()
        self.processor = sentencepiece.SentencePieceProcessor(model_file=model_file)
        self.eos_id = self.processor.eos_id()
        self.eos_piece = self.processor.id_to_piece(self.eos_id)
        special = (self.processor.pad_id(), self.processor.bos_id(), self.eos_id)
        self._dropped = frozenset(i for i in special if i >= 0)
        # PAD and BOS: pieces no search may choose (as the graph's mask them).
        never = (self.processor.pad_id(), self.processor.bos_id())
        self.never_generated = tuple(self.processor.id_to_piece(i) for i in never if i >= 0)
        pieces = (self.processor.id_to_piece(i) for i in range(self.processor.get_piece_size()))
        self.languages = TargetLanguages.of_pieces(pieces)
        self._pieces = RecentTexts(lambda text: self.processor.encode(text, out_type=str))
        self._ids = RecentTexts(lambda text: self.processor.encode(text))

    @classmethod
    def from_assets(cls, directory, prefix=""):
        """From the file `SentencePieceTokenizer.save_assets` wrote."""
        return cls(os.path.join(directory, prefix + ASSETS["sentencepiece"]["model"]))

    def source(self, text):
        """The pieces of a source text (tokenized once: `RecentTexts`)."""
        return self._pieces(text)

    target = source

    def source_ids(self, text):
        """The ids of a source text (no EOS; tokenized once)."""
        return self._ids(text)

    def text(self, pieces):
        """The text of output pieces."""
        return self.processor.decode_pieces(pieces)

    def text_of_ids(self, ids):
        """The text of output ids, as `SentencePieceTokenizer.detokenize`
        gives it: cut at the first EOS, without padding, BOS and EOS."""
        kept = [int(i) for i in _before_eos(ids, self.eos_id) if int(i) not in self._dropped]
        return self.processor.decode(kept)

    def pieces_of_ids(self, ids):
        """The pieces of output ids, up to and with the first EOS."""
        return [self.processor.id_to_piece(int(i)) for i in _through_eos(ids, self.eos_id)]


class MarianPieces:
    """Text to pieces and back as a Marian model's tokenizer does
    (`keras_transformer.tokenization.MarianTokenizer`): each side its own
    SentencePiece model, a leading language code such as `>>deu<<` kept as
    one piece, ids from the shared vocabulary; the pieces of the output
    joined, special pieces dropped.

    Args:
        source_file: the source side's SentencePiece model (`source.spm`).
        target_file: the target side's (`target.spm`).
        vocab_file: `vocab.json` (`{piece: id}`), needed for ids and for
            the `languages` (the tags among its pieces) of a multi-target
            model.
    """

    SPECIAL = frozenset({"<pad>", "<unk>", "</s>", "<s>"})

    def __init__(self, source_file, target_file, vocab_file=None):
        sentencepiece = import_sentencepiece()
        self.processors = {
            side: sentencepiece.SentencePieceProcessor(model_file=file)
            for side, file in (("source", source_file), ("target", target_file))
        }
        self.eos_piece = "</s>"
        self._sources = RecentTexts(lambda text: self._pieces("source", text))
        self.never_generated = ()  # PAD and BOS where the vocabulary has them (below)
        self.vocab = None
        self.languages = TargetLanguages(required=False)
        if vocab_file is not None:
            with open(vocab_file, encoding="utf-8") as f:
                self.vocab = json.load(f)
            self.pieces_by_id = {i: piece for piece, i in self.vocab.items()}
            self.eos_id = self.vocab[self.eos_piece]
            self.never_generated = tuple(p for p in ("<pad>", "<s>") if p in self.vocab)
            # OPUS-MT's tools translate a text without a code as it is.
            self.languages = TargetLanguages.of_pieces(self.vocab, required=False)

    @classmethod
    def from_assets(cls, directory, prefix=""):
        """From the files `MarianTokenizer.save_assets` wrote."""
        files = {
            part: os.path.join(directory, prefix + name) for part, name in ASSETS["marian"].items()
        }
        return cls(files["source"], files["target"], files["vocab"])

    def _pieces(self, side, text):
        code = []
        end = text.find("<<") if text.startswith(">>") else -1
        if end != -1:
            code, text = [text[: end + 2]], text[end + 2 :]
        return code + self.processors[side].encode(text, out_type=str)

    def source(self, text):
        """The pieces of a source text (tokenized once: `RecentTexts`)."""
        return self._sources(text)

    def target(self, text):
        """The pieces of a target text."""
        return self._pieces("target", text)

    def source_ids(self, text):
        """The ids of a source text (no EOS); pieces outside the
        vocabulary are `<unk>`'s."""
        unk = self.vocab["<unk>"]
        return [self.vocab.get(piece, unk) for piece in self.source(text)]

    def text(self, pieces):
        """The text of output pieces."""
        joined = "".join(p for p in pieces if p not in self.SPECIAL)
        return joined.replace("\u2581", " ").strip()

    def text_of_ids(self, ids):
        """The text of output ids, as `MarianTokenizer.detokenize` gives it:
        cut at the first EOS; special ids and ids outside the vocabulary
        (the decoder's start) dropped."""
        return self.text(self.pieces_of_ids(_before_eos(ids, self.eos_id)))

    def pieces_of_ids(self, ids):
        """The pieces of output ids, up to and with the first EOS (the
        decoder's start, outside the vocabulary, as `<s>`)."""
        return [self.pieces_by_id.get(int(i), "<s>") for i in _through_eos(ids, self.eos_id)]


def _before_eos(ids, eos_id):
    """`ids` up to their first `eos_id`."""
    ids = list(ids)
    return ids[: ids.index(eos_id)] if eos_id in ids else ids


def _through_eos(ids, eos_id):
    """`ids` up to and with their first `eos_id`."""
    ids = list(ids)
    return ids[: ids.index(eos_id) + 1] if eos_id in ids else ids


# The host tokenizer of each kind an export records.
HOST_TOKENIZERS = {"sentencepiece": SentencePieces, "marian": MarianPieces}
