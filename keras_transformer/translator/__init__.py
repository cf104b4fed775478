"""`Translator`: raw strings in, translations out, with tokenization and
the searches in the graph (`ModelSearch` runs the searches in token ids)."""

from keras_transformer.translator.graph import TranslatorGraph
from keras_transformer.translator.model_search import ModelSearch
from keras_transformer.translator.request import TranslationRequest
from keras_transformer.translator.runs import record_choice
from keras_transformer.translator.translator import Translator

__all__ = ["ModelSearch", "TranslationRequest", "Translator", "TranslatorGraph", "record_choice"]
