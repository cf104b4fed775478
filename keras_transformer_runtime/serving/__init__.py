"""The parts of an HTTP server over any runner: the dynamic `Batcher`."""

from keras_transformer_runtime.serving.batcher import Batcher
from keras_transformer_runtime.serving.batcher import Translation

__all__ = ["Batcher", "Translation"]
