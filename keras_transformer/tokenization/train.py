"""Training a shared SentencePiece vocabulary (the paper's ~37,000 BPE)."""

import io
import os
import re

import sentencepiece

from keras_transformer import _backend
from keras_transformer.special_ids import SPECIAL_IDS
from keras_transformer.tokenization.sentencepiece_tokenizer import SentencePieceTokenizer
from keras_transformer_runtime import validation
from keras_transformer_runtime.text import files as text_files

MODEL_TYPES = ("bpe", "unigram")


# A string without white space that ends like a file name ("train.en",
# "corpus/train.de.gz") names a file, whether or not it exists.
_FILE_NAME = re.compile(r"\S*(/|\w\.[a-z][a-z0-9]{0,4})")


def _is_path(item):
    """Whether `item` names a file; raises for one that looks like a file
    name but does not exist (a typo must not train as a sentence)."""
    if isinstance(item, os.PathLike):
        return True
    if not isinstance(item, str) or "\n" in item:
        return False
    if os.path.isfile(item):
        return True
    if _FILE_NAME.fullmatch(item):
        raise FileNotFoundError(
            f"No such file: {item!r}. (A string without spaces that ends like a file name "
            "is read as a path, never trained on as a sentence.)"
        )
    return False


def _read_lines(path):
    return text_files.iter_lines(path, errors="replace")


def _sentences(inputs):
    """Every sentence of `inputs`: file paths, strings, or pairs of them."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    for item in inputs:
        if isinstance(item, bytes):
            item = item.decode("utf-8", errors="replace")
        if isinstance(item, (tuple, list)):  # a (source, target) pair
            yield from _sentences(item)
        elif _is_path(item):
            yield from _read_lines(item)
        else:
            yield str(item)


class _Sentences:
    """The sentences of `inputs`, keeping the error that stopped reading
    them: SentencePiece's trainer turns it into a bare `RuntimeError`."""

    def __init__(self, inputs):
        self.error = None
        self._sentences = _sentences(inputs)

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return next(self._sentences)
        except StopIteration:
            raise
        except Exception as error:  # noqa: BLE001 (kept and raised again by the caller)
            self.error = error
            raise


@_backend.tensorflow_only("tokenization.train_sentencepiece", "it returns the TF Text tokenizer")
def train_sentencepiece(
    inputs,
    vocab_size,
    model_type="bpe",
    character_coverage=0.9999,
    input_sentence_size=10_000_000,
    seed=0,
    num_threads=None,
    max_sentence_length=8192,
    user_defined_symbols=(),
):
    """Trains a SentencePiece model and returns its tokenizer.

    One model over everything in `inputs`: give it the source and the
    target side (files, or `(source, target)` pairs) for the paper's shared
    vocabulary. Special ids are fixed: pad 0, unk 1, BOS 2, EOS 3. Byte
    fallback is on, so characters outside the vocabulary become their
    UTF-8 bytes and no input is lost; normalization is the identity, so
    `detokenize(tokenize(s)) == s` for text with single spaces and no
    leading or trailing whitespace.

    Args:
        inputs: file paths (plain or `.gz`, one sentence a line), an
            iterable of strings, or of `(source, target)` string pairs.
        vocab_size: the vocabulary size, special ids and 256 byte pieces
            included (the paper's EN-DE: about 37,000).
        model_type: `"bpe"` (the paper) or `"unigram"`.
        character_coverage: share of characters that get a piece of their
            own; the rest fall back to bytes.
        input_sentence_size: at most this many sentences, sampled, are used
            to train (`0`: all).
        seed: sampling seed, for reproducible vocabularies.
        num_threads: training threads (default: all cores).
        max_sentence_length: longer sentences (in bytes) are skipped.
        user_defined_symbols: strings that are each always one piece,
            wherever they occur in a text: the target-language tags of a
            multilingual model (`languages.tags(["de", "fr"])`, which
            `tokenizer.language_tags` then lists), or a `<BT>` mark.

    Returns:
        A `SentencePieceTokenizer`.

    Example:

    >>> tokenizer = train_sentencepiece(["train.en.gz", "train.de.gz"], 37000)

    One vocabulary for English into German and French, with their tags:

    >>> tokenizer = train_sentencepiece(files, 8000, user_defined_symbols=[">>de<<", ">>fr<<"])
    >>> tokenizer.language_tags
    ('>>de<<', '>>fr<<')
    """
    validation.check_positive_int(vocab_size=vocab_size)
    validation.check_choice(MODEL_TYPES, model_type=model_type)
    symbols = _checked_symbols(user_defined_symbols)
    if vocab_size < 260 + len(symbols):
        raise ValueError(
            "`vocab_size` must leave room for 4 special ids, 256 byte pieces and the "
            f"{len(symbols)} user-defined symbols (at least {260 + len(symbols)}). "
            f"Received: vocab_size={vocab_size}"
        )
    sentencepiece.set_random_generator_seed(seed)
    model = io.BytesIO()
    sentences = _Sentences(inputs)
    try:
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=sentences,
            model_writer=model,
            vocab_size=vocab_size,
            model_type=model_type,
            character_coverage=character_coverage,
            byte_fallback=True,
            normalization_rule_name="identity",
            input_sentence_size=input_sentence_size,
            shuffle_input_sentence=True,
            max_sentence_length=max_sentence_length,
            num_threads=num_threads or os.cpu_count() or 1,
            hard_vocab_limit=False,
            user_defined_symbols=symbols,
            minloglevel=2,
            **SPECIAL_IDS,
        )
    except RuntimeError:
        if sentences.error is not None:  # raised while reading, not by SentencePiece
            raise sentences.error from None
        raise
    return SentencePieceTokenizer(model.getvalue())


def _checked_symbols(user_defined_symbols):
    """`user_defined_symbols` as a list of distinct strings without white
    space, or a `ValueError` naming the one that is not."""
    if isinstance(user_defined_symbols, str):
        raise ValueError(
            "`user_defined_symbols` must be a list of strings, not one string. "
            f"Received: user_defined_symbols={user_defined_symbols!r}"
        )
    symbols = list(user_defined_symbols)
    for symbol in symbols:
        if not isinstance(symbol, str) or not symbol or re.search(r"\s", symbol):
            raise ValueError(
                "Each of `user_defined_symbols` must be a non-empty string without white "
                f"space. Received: {symbol!r} in user_defined_symbols={symbols!r}"
            )
    if len(set(symbols)) < len(symbols):
        raise ValueError(
            f"`user_defined_symbols` must be distinct. Received: user_defined_symbols={symbols!r}"
        )
    return symbols
