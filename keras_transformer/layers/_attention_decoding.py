"""`MultiHeadAttention`'s methods for decoding: causal self-attention over
a fixed-size key/value cache, and attention over a memory projected once."""

from keras import ops

from keras_transformer.layers._cache import check_cache_keys
from keras_transformer.layers._cache import write_at
from keras_transformer.layers._utils import leading_axes
from keras_transformer.layers._utils import require_built
from keras_transformer.layers._utils import size
from keras_transformer.layers.masking import causal_mask


class AttentionDecoding:
    """The decoding methods of `MultiHeadAttention` (a mixin: it uses the
    layer's projections, `_keys_and_values`, `_project_query`, `_attend`,
    `_probabilities`, `_weighted_values` and `_beyond_paper_attention`).

    They compute the paper's attention over sequences, and refuse by name
    the arguments of Keras's layer that ask for another one
    (`flash_attention` chooses a kernel, not the attention: they run their
    own)."""

    def initial_cache(self, batch_size, length):
        """An empty self-attention cache for `length` positions: zeros
        `{"key": (batch_size, num_heads, length, key_dim), "value": ...}`."""
        shape = (batch_size, self.num_heads, length)
        return {
            "key": ops.zeros(shape + (self.key_dim,), self.compute_dtype),
            "value": ops.zeros(shape + (self.value_dim,), self.compute_dtype),
        }

    def call_with_cache(self, query, cache, index):
        """Causal self-attention of `query` `(batch, steps, features)`, the
        positions `index .. index + steps - 1`, over `cache` (from
        `initial_cache`), with their own keys and values written into it.

        Each position sees the cache up to itself, so feeding a sequence in
        pieces gives `call(x, x, use_causal_mask=True)` of the whole.

        Returns:
            `(output, cache)`: `(batch, steps, output_features)` and the cache with
            these positions written (same shapes).
        """
        check_cache_keys(cache, "cache", ("key", "value"))
        if index is None:
            raise ValueError(
                "`call_with_cache` needs `index`, the position of `query[:, 0]` "
                "in the cache. Received: index=None"
            )
        if not self.built:
            self.build(query.shape, query.shape)
        self._require_own_attention("call_with_cache")
        new = self._keys_and_values(query, query)
        cache = {name: write_at(cache[name], new[name], index) for name in ("key", "value")}
        steps, length = ops.shape(query)[1], ops.shape(cache["key"])[2]
        mask = leading_axes(causal_mask(steps, length, index), 2)  # (1, 1, steps, length)
        return self._attend(self._project_query(query), cache, mask), cache

    def project_memory(self, value, key=None):
        """The memory `call_with_memory` attends to (for a decoder: the
        encoder output, projected once): `{"transposed_key": (batch,
        num_heads, key_dim, key_len), "value": (batch, num_heads, key_len,
        value_dim)}`, the keys transposed so that QKᵀ multiplies them as
        they lie."""
        require_built(self, "project_memory")
        self._require_own_attention("project_memory")
        memory = self._keys_and_values(value, value if key is None else key)
        return {"transposed_key": ops.swapaxes(memory["key"], -1, -2), "value": memory["value"]}

    def call_with_memory(self, query, memory, memory_mask=None, return_attention_scores=False):
        """Attention of `query` `(rows, steps, features)` over `memory` (from
        `project_memory`, batch `sentences`), hiding the memory positions
        where `memory_mask` `(sentences, key_len)` is `False`.

        `rows` may be `sentences` or a multiple of it: rows `i * g .. i * g +
        g - 1` then all attend to sentence `i` (the beams of a sentence in
        a beam search), as `g * steps` queries of one attention, over one
        copy of its keys and values.

        Returns:
            `(rows, steps, output_features)`; with `return_attention_scores`
            (as in `call`), `(output, scores)`, the probabilities `(rows,
            num_heads, steps, key_len)`.
        """
        check_cache_keys(memory, "memory", ("transposed_key", "value"))
        require_built(self, "call_with_memory")
        self._require_own_attention("call_with_memory")
        rows, sentences = query.shape[0], memory["value"].shape[0]
        if rows is not None and sentences is not None and rows % sentences:
            raise ValueError(
                f"`query` must have a multiple of the memory's {sentences} rows (the beams of "
                f"a sentence together). Received: query with {rows} rows"
            )
        steps, features = size(query, 1), query.shape[-1]
        grouped = ops.reshape(query, (size(memory["value"], 0), -1, features))
        mask = None
        if memory_mask is not None:  # (s, 1, 1, k)
            mask = ops.expand_dims(ops.expand_dims(memory_mask, 1), 1)
        scores = self._probabilities(self._project_query(grouped), memory, mask)
        output = self._weighted_values(scores, memory["value"], mask, training=False)
        output = ops.reshape(output, (-1, steps, output.shape[-1]))
        if not return_attention_scores:
            return output
        # (sentences, heads, g * steps, k) -> (rows, heads, steps, k)
        sentences, heads, _, keys = ops.shape(scores)
        scores = ops.reshape(scores, (sentences, heads, -1, steps, keys))
        scores = ops.reshape(ops.transpose(scores, (0, 2, 1, 3, 4)), (-1, heads, steps, keys))
        return output, scores

    def _require_own_attention(self, method):
        """Raises a `ValueError` naming the first argument of Keras's layer
        that `method` (the paper's attention over sequences) cannot honour;
        `call` honours it with Keras's own computation."""
        beyond = self._beyond_paper_attention()
        if beyond is not None:
            name, value = beyond
            raise ValueError(
                f"`{method}` computes the paper's attention over sequences `(batch, length, "
                f"features)`, which `{name}` changes; `call` computes it with Keras's own "
                f"attention. Received: {name}={value!r}"
            )
