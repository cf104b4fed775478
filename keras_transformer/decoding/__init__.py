"""In-graph greedy search, beam search and sampling over a next-token
function and a cache: a `SearchRequest` (what to decode) and a
`SearchStrategy` (`GreedySearch`, `Sampling`, `BeamSearch`,
`ConstrainedBeamSearch`: how), one module per strategy around one shared
loop (`loop`); `greedy_search`, `sample` and `beam_search` are the same as
functions, and `strategies.from_settings` chooses a translator's.

All of them know nothing of the model. They call

    logits, cache = tokens_to_logits(token_ids, cache, index)

with `token_ids` `(rows, 1)` int32 (the token at position `index`) and
`index` a scalar int32; it returns float32 `logits` `(rows, vocab)` for
position `index + 1` and the updated cache. The cache is a dict of two
parts (what `Transformer.init_cache` returns), each a nest of tensors with
the batch as their first axis:

* `"per_hypothesis"`: the state of one output prefix (for a Transformer,
  the self-attention keys and values). Beam search repeats it `beam_size`
  times per sentence (the beams of a sentence on consecutive rows) and
  reorders it whenever it reorders its hypotheses.
* `"per_sentence"`: what depends on the source only (the encoder keys and
  values, the source mask). It keeps one row per sentence and is never
  reordered; `tokens_to_logits` lets the rows of a sentence share it.

Greedy search and sampling pass the cache through unchanged. Everything
runs in `tf.while_loop`s, so the searches trace once per input signature,
run under `tf.function(jit_compile=True)`, and export in a SavedModel
(`loop`). Outside XLA, the rows of a sentence that is done leave the
loop's state (the cache's rows with them: every tensor of the cache has
the batch first), so that later steps decode only the sentences still
going; under XLA, which compiles fixed shapes, they stay. The outputs are
the same either way. Given `resize_cache` (for a Transformer,
`model.resize_cache`), they run `CACHE_SEGMENTS` loops, each over a
quarter of the steps with a cache just long enough for them: a step's
cost grows with the cache it attends to, writes and (beam search)
reorders, and most outputs end long before the buffer does.

Outputs never include BOS; a hypothesis ends with EOS and is padded with
`pad_id` after it. The output buffer holds `max_length` tokens; every
sentence may also have its own, smaller limit (`length_limits`, e.g. its
source length + 50); when it is reached, only EOS may follow.
"""

from keras_transformer.decoding.banned import BannedPhrases
from keras_transformer.decoding.beam_search import BeamSearch
from keras_transformer.decoding.constrained_beam_search import ConstrainedBeamSearch
from keras_transformer.decoding.controls import OutputControls
from keras_transformer.decoding.functions import beam_search
from keras_transformer.decoding.functions import greedy_search
from keras_transformer.decoding.functions import sample
from keras_transformer.decoding.greedy import GreedySearch
from keras_transformer.decoding.sampling import Sampling
from keras_transformer.decoding.search import AlignedOutputs
from keras_transformer.decoding.search import SearchRequest
from keras_transformer.decoding.search import SearchStrategy
from keras_transformer_runtime.runners.results import length_penalty

__all__ = [
    "AlignedOutputs",
    "BannedPhrases",
    "BeamSearch",
    "ConstrainedBeamSearch",
    "GreedySearch",
    "OutputControls",
    "Sampling",
    "SearchRequest",
    "SearchStrategy",
    "beam_search",
    "greedy_search",
    "length_penalty",
    "sample",
]
