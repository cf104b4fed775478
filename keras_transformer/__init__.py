"""keras_transformer: the Transformer of "Attention Is All You Need" in Keras 3.

Example:

>>> import keras_transformer
>>> model = keras_transformer.Transformer.from_preset("base", vocab_size=37000)
"""

from keras_transformer import decoding
from keras_transformer import export
from keras_transformer import layers
from keras_transformer import models
from keras_transformer import pretrained
from keras_transformer import tokenization
from keras_transformer import training
from keras_transformer._backend import BackendError
from keras_transformer.layers import Decoder
from keras_transformer.layers import DecoderLayer
from keras_transformer.layers import Encoder
from keras_transformer.layers import EncoderLayer
from keras_transformer.layers import FeedForward
from keras_transformer.layers import LearnedPositionalEmbedding
from keras_transformer.layers import MultiHeadAttention
from keras_transformer.layers import PositionalEncoding
from keras_transformer.layers import TokenEmbedding
from keras_transformer.models import Transformer
from keras_transformer.training import LabelSmoothedCrossEntropy
from keras_transformer.training import MaskedAccuracy
from keras_transformer.training import Perplexity
from keras_transformer.training import TokenCount
from keras_transformer.training import TransformerSchedule
from keras_transformer.translator import Translator
from keras_transformer_runtime import AlignedTranslation
from keras_transformer_runtime import DecodingSettings
from keras_transformer_runtime import TargetScore

__version__ = "0.1.0"

# The model, its building blocks in the order of the architecture, the
# training recipe's Keras objects, the translator with its settings and
# results, the error of the TensorFlow-only parts under another backend,
# then the subpackages.
__all__ = [
    "Transformer",
    "TokenEmbedding",
    "PositionalEncoding",
    "LearnedPositionalEmbedding",
    "MultiHeadAttention",
    "FeedForward",
    "EncoderLayer",
    "DecoderLayer",
    "Encoder",
    "Decoder",
    "TransformerSchedule",
    "LabelSmoothedCrossEntropy",
    "MaskedAccuracy",
    "Perplexity",
    "TokenCount",
    "Translator",
    "DecodingSettings",
    "TargetScore",
    "AlignedTranslation",
    "BackendError",
    "decoding",
    "export",
    "layers",
    "models",
    "pretrained",
    "tokenization",
    "training",
]
