"""SentencePiece training and in-graph tokenization with TF Text."""

from keras_transformer.tokenization.sentencepiece_tokenizer import SentencePieceTokenizer
from keras_transformer.tokenization.train import train_sentencepiece

__all__ = ["SentencePieceTokenizer", "train_sentencepiece"]
