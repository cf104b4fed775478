"""In-graph greedy and beam search over any next-token function."""

from keras_transformer.decoding.search import beam_search
from keras_transformer.decoding.search import greedy_search
from keras_transformer.decoding.search import length_penalty

__all__ = ["beam_search", "greedy_search", "length_penalty"]
