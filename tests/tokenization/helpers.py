"""A SentencePiece tokenizer whose special ids are not the package's."""

import io

import sentencepiece

from keras_transformer.tokenization import SentencePieceTokenizer

# Every special id moved: pad, unk, BOS and EOS are 3, 0, 1 and 2 here
# (the package's defaults are 0, 1, 2 and 3).
OTHER_IDS = {"pad_id": 3, "unk_id": 0, "bos_id": 1, "eos_id": 2}


def tokenizer_with_other_ids(sentences, vocab_size):
    """Trains a model with `OTHER_IDS` through SentencePiece itself."""
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_writer=model,
        vocab_size=vocab_size,
        byte_fallback=True,
        hard_vocab_limit=False,
        minloglevel=2,
        **OTHER_IDS,
    )
    return SentencePieceTokenizer(model.getvalue())
