"""Serializable Keras layers of the Transformer."""

from keras_transformer.layers import _legacy  # noqa: F401 (registers former names)
from keras_transformer.layers.decoder import Decoder
from keras_transformer.layers.decoder_layer import DecoderLayer
from keras_transformer.layers.encoder import Encoder
from keras_transformer.layers.encoder_layer import EncoderLayer
from keras_transformer.layers.feed_forward import FeedForward
from keras_transformer.layers.learned_positional_embedding import LearnedPositionalEmbedding
from keras_transformer.layers.masking import causal_mask
from keras_transformer.layers.masking import padding_mask
from keras_transformer.layers.multi_head_attention import MultiHeadAttention
from keras_transformer.layers.positional_encoding import PositionalEncoding
from keras_transformer.layers.token_embedding import TokenEmbedding

__all__ = [
    "Decoder",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "LearnedPositionalEmbedding",
    "MultiHeadAttention",
    "PositionalEncoding",
    "TokenEmbedding",
    "causal_mask",
    "padding_mask",
]
