"""Pretrained translators from other toolkits, imported into this package's
`Transformer` and tokenizers: Marian (OPUS-MT) models in Hugging Face's
format (`load_marian`)."""

from keras_transformer.pretrained.marian import PretrainedTranslator
from keras_transformer.pretrained.marian import load_marian
from keras_transformer.pretrained.safetensors import read_safetensors

__all__ = ["load_marian", "PretrainedTranslator", "read_safetensors"]
