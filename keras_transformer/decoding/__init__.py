"""In-graph greedy search, beam search and sampling over any next-token function."""

from keras_transformer.decoding.controls import OutputControls
from keras_transformer.decoding.search import beam_search
from keras_transformer.decoding.search import greedy_search
from keras_transformer.decoding.search import sample
from keras_transformer_runtime.results import length_penalty

__all__ = ["OutputControls", "beam_search", "greedy_search", "length_penalty", "sample"]
