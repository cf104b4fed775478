"""The Transformer model and its presets."""

from keras_transformer.models.guided_alignment import GuidedAlignment
from keras_transformer.models.guided_alignment import guided_alignment_loss
from keras_transformer.models.presets import PRESETS
from keras_transformer.models.transformer import Transformer

__all__ = ["PRESETS", "GuidedAlignment", "Transformer", "guided_alignment_loss"]
