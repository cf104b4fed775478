"""The encoder-decoder Transformer of "Attention Is All You Need"."""

import inspect

import keras
from keras import ops

from keras_transformer.layers._utils import sublayer_seed
from keras_transformer.layers.decoder import Decoder
from keras_transformer.layers.encoder import Encoder
from keras_transformer.layers.learned_positional_embedding import LearnedPositionalEmbedding
from keras_transformer.layers.masking import padding_mask
from keras_transformer.layers.positional_encoding import PositionalEncoding
from keras_transformer.layers.token_embedding import TokenEmbedding
from keras_transformer.models._checks import check_arguments
from keras_transformer.models._former_layout import refuse_former_optimizer_state
from keras_transformer.models._quantization import default_policy
from keras_transformer.models._quantization import quantize_as
from keras_transformer.models._quantization import quantized_policies
from keras_transformer.models.cached_decoding import CachedDecoding
from keras_transformer.models.guided_alignment import GuidedAlignment
from keras_transformer.models.inspected_attention import InspectedAttention
from keras_transformer.models.presets import preset_arguments
from keras_transformer.special_ids import NEVER_LOGIT_BIAS
from keras_transformer.special_ids import PAD_ID


@keras.saving.register_keras_serializable(package="keras_transformer")
class Transformer(CachedDecoding, InspectedAttention, GuidedAlignment, keras.Model):
    """The Transformer (Vaswani et al., 2017) as a Keras model.

    `model((source_ids, target_ids))` embeds both sequences (token
    embedding × √d_model + positions, then dropout), encodes the source,
    decodes the target with causal self-attention and attention over the
    encoder output, and returns next-token logits `(batch, target_len,
    target_vocab_size)` in float32 under any dtype policy. Id `pad_id` (0)
    is padding: pad source tokens are hidden from every attention, so extra
    padding never changes a logit at a real position.

    For generation, `encode` runs the encoder once; `init_cache` prepares
    a fixed-shape cache in two named parts, what a search must reorder with
    its hypotheses and what stays one per sentence (see `init_cache`);
    `decode_step` feeds one or more target tokens at a position and
    returns their logits and the updated cache. Shapes never change, so a
    `tf.while_loop` over `decode_step` traces once.

    Args:
        vocab_size: shared vocabulary size (source = target).
        num_layers: layers N in both the encoder and the decoder.
        d_model: model width.
        num_heads: attention heads h.
        d_ff: feed-forward inner size.
        dropout: P_drop, on every sub-layer output and on the sum of
            embeddings and positions.
        source_vocab_size: source vocabulary size if not `vocab_size`.
        target_vocab_size: target vocabulary size if not `vocab_size`.
        num_encoder_layers: encoder depth if not `num_layers`.
        num_decoder_layers: decoder depth if not `num_layers`.
        key_dim: per-head query/key size d_k (default d_model / h).
        value_dim: per-head value size d_v (default d_k).
        attention_dropout: dropout on attention probabilities.
        relu_dropout: dropout on feed-forward inner activations.
        tie_embeddings: `"all"` (the paper, §3.4): one matrix for the
            source embedding, target embedding and pre-softmax projection,
            which needs a shared vocabulary; `"target"`: the target
            embedding doubles as the projection, the source has its own;
            `"none"`: three matrices.
        norm_first: pre-norm layers (with a final norm) instead of the
            paper's post-norm.
        position_encoding: `"sinusoidal"` (the paper), `"learned"`
            (Table 3, row E) or `"sinusoidal_concatenated"` (the paper's
            sinusoids as all sines, then all cosines, as Marian lays them
            out).
        max_length: the longest sequence the model accepts with learned
            positions, and the default cache length for decoding.
        pad_id: the padding id, 0.
        layer_norm_epsilon: epsilon of every layer normalization.
        activation: the feed-forward activation, ReLU in the paper (any
            Keras activation name, e.g. `"swish"` as OPUS-MT models use).
        scale_embeddings: whether token embeddings are multiplied by
            √d_model (§3.4).
        output_bias: whether a learned bias `(target_vocab_size,)` is added
            to the logits (the `final_logits_bias` of Marian models).
        seed: seed of every dropout (each gets its own, derived from it),
            so that one seed reproduces a training run; `None` uses Keras's
            global random state.
        alignment_layer: the decoder layer whose cross-attention aligns
            output tokens with source tokens (markup placement, the
            alignment outputs of `Translator` and the exports), -1 the last.
        alignment_heads: how many of that layer's heads, the first ones,
            are averaged into the alignment (`None`: all of them). Guided
            alignment training (`GuidedAlignment`) trains their average;
            Garg et al. (2019) train one head.
        **kwargs: base `keras.Model` arguments (`name`, `dtype`...).

    Call arguments:
        inputs: a tuple `(source_ids, target_ids)` of integer tensors
            `(batch, source_len)` and `(batch, target_len)`; in guided
            alignment training, `(source_ids, target_ids, alignment)` with
            the word alignment `(batch, target_len, source_len)` the
            attention is trained towards (`GuidedAlignment`).
        training: whether dropout is active.

    Returns:
        float32 logits `(batch, target_len, target_vocab_size)`.

    Example:

    >>> model = Transformer.from_preset("tiny", vocab_size=100)
    >>> source = keras.ops.array([[5, 6, 7, 2, 0]])
    >>> target = keras.ops.array([[1, 8, 9]])
    >>> model((source, target)).shape
    TensorShape([1, 3, 100])
    """

    def __init__(
        self,
        vocab_size=None,
        num_layers=6,
        d_model=512,
        num_heads=8,
        d_ff=2048,
        dropout=0.1,
        source_vocab_size=None,
        target_vocab_size=None,
        num_encoder_layers=None,
        num_decoder_layers=None,
        key_dim=None,
        value_dim=None,
        attention_dropout=0.0,
        relu_dropout=0.0,
        tie_embeddings="all",
        norm_first=False,
        position_encoding="sinusoidal",
        max_length=1024,
        pad_id=PAD_ID,
        layer_norm_epsilon=1e-6,
        activation="relu",
        scale_embeddings=True,
        output_bias=False,
        seed=None,
        alignment_layer=-1,
        alignment_heads=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.num_layers = num_layers
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_ff = d_ff
        self.dropout = dropout
        self.source_vocab_size = source_vocab_size = source_vocab_size or vocab_size
        self.target_vocab_size = target_vocab_size = target_vocab_size or vocab_size
        self.num_encoder_layers = num_encoder_layers
        self.num_decoder_layers = num_decoder_layers
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.attention_dropout = attention_dropout
        self.relu_dropout = relu_dropout
        self.tie_embeddings = tie_embeddings
        self.norm_first = norm_first
        self.position_encoding = position_encoding
        self.max_length = max_length
        self.pad_id = pad_id
        self.layer_norm_epsilon = layer_norm_epsilon
        self.activation = activation
        self.scale_embeddings = scale_embeddings
        self.output_bias = output_bias
        self.seed = seed
        self.alignment_layer = alignment_layer
        self.alignment_heads = alignment_heads
        check_arguments(self)

        policy = default_policy(self.dtype_policy)
        # A tied matrix is one layer object held by one attribute, so that
        # its weights are tracked (and counted) once.
        self.source_embedding = TokenEmbedding(
            source_vocab_size,
            d_model,
            scale=scale_embeddings,
            dtype=policy,
            name="shared_embedding" if tie_embeddings == "all" else "source_embedding",
        )
        self.target_embedding = None
        if tie_embeddings != "all":
            self.target_embedding = TokenEmbedding(
                target_vocab_size,
                d_model,
                scale=scale_embeddings,
                dtype=policy,
                name="target_embedding",
            )
        self.output_projection = None
        if tie_embeddings == "none":
            self.output_projection = TokenEmbedding(
                target_vocab_size,
                d_model,
                scale=False,
                embeddings_initializer="glorot_uniform",
                dtype=policy,
                name="output_projection",
            )
        if position_encoding != "learned":
            layout = "interleaved" if position_encoding == "sinusoidal" else "concatenated"
            self.source_positions = PositionalEncoding(
                layout=layout, dtype=policy, name="positions"
            )
            self.target_positions = self.source_positions  # no weights
        else:
            self.source_positions = LearnedPositionalEmbedding(
                max_length, dtype=policy, name="source_positions"
            )
            self.target_positions = LearnedPositionalEmbedding(
                max_length, dtype=policy, name="target_positions"
            )
        self.embedding_dropout = keras.layers.Dropout(
            dropout,
            seed=sublayer_seed(seed, "embedding_dropout"),
            dtype=policy,
            name="embedding_dropout",
        )
        self.encoder = self._layer_stack(Encoder, num_encoder_layers or num_layers, "encoder")
        self.decoder = self._layer_stack(Decoder, num_decoder_layers or num_layers, "decoder")
        # Every shape is known from the arguments: build now, so `encode`,
        # `init_cache` and `count_params` work before any call.
        self.build()
        quantize_as(self, self.dtype_policy)  # a quantized model's config

    def set_dropout(self, rate):
        """Sets P_drop of the embeddings and of every residual branch once
        the model is made, e.g. from the passes over the data a time budget
        allows (`training.DropoutByPasses`); as `EncoderLayer.set_dropout`."""
        self.encoder.set_dropout(rate)  # checks `rate`
        self.decoder.set_dropout(rate)
        self.dropout = self.embedding_dropout.rate = rate

    def load_own_variables(self, store):
        super().load_own_variables(store)
        refuse_former_optimizer_state(self, store)

    def get_config(self):
        config = super().get_config()
        config.update({name: getattr(self, name) for name in _arguments(type(self))})
        policies = quantized_policies(self)
        if policies is not None:
            config["dtype"] = policies
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)

    @classmethod
    def from_preset(cls, preset, **overrides):
        """Builds a named configuration, with any constructor argument
        overridden.

        Presets: `"base"` and `"big"` (the paper's), `"small"` (for corpora
        such as Multi30k) and `"tiny"` (for tests); see
        `keras_transformer.models.presets`.

        Args:
            preset: the preset's name.
            **overrides: constructor arguments, e.g. `vocab_size=37000`
                (required unless source/target sizes are given).

        Returns:
            A built `Transformer`.

        Example:

        >>> model = Transformer.from_preset("base", vocab_size=37000, dropout=0.2)
        """
        accepted = set(_arguments(cls)) | {"name", "dtype", "trainable"}
        return cls(**preset_arguments(preset, overrides, accepted))

    def build(self, inputs_shape=None):
        """Creates every weight; called by the constructor."""
        if self.built:
            return
        hidden = (None, None, self.d_model)
        for layer in (self.source_embedding, self.target_embedding, self.output_projection):
            if layer is not None:
                layer.build()
        self.source_positions.build(hidden)
        self.target_positions.build(hidden)
        self.encoder.build(hidden)
        self.decoder.build(hidden, hidden)
        self.logits_bias = None
        if self.output_bias:
            self.logits_bias = self.add_weight(
                name="logits_bias", shape=(self.target_vocab_size,), initializer="zeros"
            )
        self.built = True

    def _layer_stack(self, stack_class, num_layers, name):
        return stack_class(
            num_layers,
            num_heads=self.num_heads,
            d_ff=self.d_ff,
            key_dim=self.key_dim,
            value_dim=self.value_dim,
            dropout=self.dropout,
            attention_dropout=self.attention_dropout,
            relu_dropout=self.relu_dropout,
            norm_first=self.norm_first,
            layer_norm_epsilon=self.layer_norm_epsilon,
            activation=self.activation,
            seed=sublayer_seed(self.seed, name),
            dtype=default_policy(self.dtype_policy),
            name=name,
        )

    # Embedding helpers.

    @property
    def output_vocab_size(self):
        """How many target ids, the first ones, the model can output: all
        `target_vocab_size` of them but trailing ids whose logit bias is
        `NEVER_LOGIT_BIAS` or lower (an imported Marian model's
        decoder-start id). The training loss smooths over these only."""
        if self.logits_bias is None:
            return self.target_vocab_size
        never = ops.convert_to_numpy(self.logits_bias) <= NEVER_LOGIT_BIAS
        size = len(never)
        while size and never[size - 1]:
            size -= 1
        return size

    def _target_embedding(self):
        return self.target_embedding or self.source_embedding

    def _output_projection(self):
        return self.output_projection or self._target_embedding()

    def _embed(self, token_ids, embedding, positions, start_index, training):
        x = embedding(token_ids)
        x = x + positions(x, start_index=start_index)
        return self.embedding_dropout(x, training=training)

    def _logits(self, hidden):
        logits = ops.cast(self._output_projection()(hidden, reverse=True), "float32")
        if self.logits_bias is not None:
            logits = logits + ops.cast(self.logits_bias, "float32")
        return logits

    # The forward pass and its parts.

    def call(self, inputs, training=None):
        source_ids, target_ids, *alignment = inputs
        if alignment:  # guided alignment training (`GuidedAlignment`)
            return self.call_guided(source_ids, target_ids, alignment[0], training)
        source_mask = padding_mask(source_ids, self.pad_id)
        encoder_output = self.encode(source_ids, training=training)
        return self.decode(target_ids, encoder_output, source_mask, training=training)

    def encode(self, source_ids, training=None):
        """Encodes `(batch, source_len)` ids into `(batch, source_len,
        d_model)`; pad positions hold values no query ever attends to."""
        x = self._embed(source_ids, self.source_embedding, self.source_positions, 0, training)
        return self.encoder(
            x, padding_mask=padding_mask(source_ids, self.pad_id), training=training
        )

    def decode(self, target_ids, encoder_output, source_padding_mask, training=None):
        """Logits of every target position, attending over `encoder_output`
        where `source_padding_mask` is `True`."""
        x = self._embed(target_ids, self._target_embedding(), self.target_positions, 0, training)
        x = self.decoder(
            x,
            encoder_output,
            decoder_padding_mask=padding_mask(target_ids, self.pad_id),
            encoder_padding_mask=source_padding_mask,
            training=training,
        )
        return self._logits(x)

    def compute_output_shape(self, inputs_shape):
        source_shape, target_shape, *_ = inputs_shape
        return (*target_shape, self.target_vocab_size)

    def compute_output_spec(self, inputs, training=None):
        shape = self.compute_output_shape(tuple(tuple(x.shape) for x in inputs))
        return keras.KerasTensor(shape, dtype="float32")


def _arguments(cls):
    """The constructor's own arguments, in order: what `get_config` holds
    (each stored under its name) and what `from_preset` may override."""
    return [n for n in inspect.signature(cls.__init__).parameters if n not in ("self", "kwargs")]
