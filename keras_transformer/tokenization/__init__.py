"""SentencePiece training and in-graph tokenization with TF Text."""

from keras_transformer.tokenization.marian_tokenizer import MarianTokenizer
from keras_transformer.tokenization.sentencepiece_tokenizer import SentencePieceTokenizer
from keras_transformer.tokenization.train import train_sentencepiece

__all__ = ["SentencePieceTokenizer", "MarianTokenizer", "train_sentencepiece"]
