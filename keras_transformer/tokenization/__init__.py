"""SentencePiece training and in-graph tokenization with TF Text: the
`Tokenizer` type (`keras_transformer.tokenizer`) and its two kinds."""

from keras_transformer.tokenization.marian_tokenizer import MarianTokenizer
from keras_transformer.tokenization.sentencepiece_tokenizer import SentencePieceTokenizer
from keras_transformer.tokenization.train import train_sentencepiece
from keras_transformer.tokenizer import Tokenizer

__all__ = ["MarianTokenizer", "SentencePieceTokenizer", "Tokenizer", "train_sentencepiece"]
