"""keras_transformer: the Transformer of "Attention Is All You Need" in Keras 3.

Example:

>>> import keras_transformer
>>> model = keras_transformer.Transformer.from_preset("base", vocab_size=37000)

The model, its layers and its training recipe's Keras objects run on every
Keras backend, with or without TensorFlow; the searches, the tokenizers,
`Translator`, the exports and the pretrained importers need TensorFlow and
are imported when first used (without it, using one raises `BackendError`).
"""

from keras_transformer import _backend
from keras_transformer import layers
from keras_transformer import models
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
from keras_transformer_runtime import AlignedTranslation
from keras_transformer_runtime import DecodingSettings
from keras_transformer_runtime import TargetScore

__version__ = "0.2.0"

# What needs TensorFlow: {name: (module, what in it is TensorFlow)}.
_TENSORFLOW_PARTS = {
    "decoding": ("decoding", "tf.while_loop searches"),
    "export": ("export", "SavedModel and converters"),
    "pretrained": ("pretrained", "the TF Text tokenizers"),
    "tokenization": ("tokenization", "TF Text"),
    "Translator": ("translator", "in-graph tokenizers and searches"),
}
_parts = _backend.TensorFlowParts(__name__, _TENSORFLOW_PARTS)
__getattr__, __dir__ = _parts.get, _parts.names

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
