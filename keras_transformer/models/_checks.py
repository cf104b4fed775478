"""The constructor checks of `Transformer`, on the values it stored."""

from keras_transformer_runtime import validation

TIE_EMBEDDINGS = ("all", "target", "none")
POSITION_ENCODINGS = ("sinusoidal", "learned", "sinusoidal_concatenated")
POSITIVE_INTS = ("vocab_size", "source_vocab_size", "target_vocab_size", "num_layers")
POSITIVE_INTS += ("num_encoder_layers", "num_decoder_layers", "d_model", "num_heads", "d_ff")
POSITIVE_INTS += ("key_dim", "value_dim", "max_length")
RATES = ("dropout", "attention_dropout", "relu_dropout")


def _values(model, names):
    return {name: getattr(model, name) for name in names}


def check_arguments(model):
    """Raises a `ValueError` that names the first bad argument of `model`."""
    if model.source_vocab_size is None or model.target_vocab_size is None:
        raise ValueError(
            "Pass `vocab_size` (shared) or both `source_vocab_size` and "
            f"`target_vocab_size`. Received: vocab_size={model.vocab_size}, "
            f"source_vocab_size={model.source_vocab_size}, "
            f"target_vocab_size={model.target_vocab_size}"
        )
    validation.check_positive_int(allow_none=True, **_values(model, POSITIVE_INTS))
    validation.check_rate(**_values(model, RATES))
    if model.key_dim is None:
        validation.check_divisible("d_model", model.d_model, "num_heads", model.num_heads)
    validation.check_choice(TIE_EMBEDDINGS, tie_embeddings=model.tie_embeddings)
    validation.check_choice(POSITION_ENCODINGS, position_encoding=model.position_encoding)
    if model.tie_embeddings == "all" and model.source_vocab_size != model.target_vocab_size:
        raise ValueError(
            "`tie_embeddings='all'` shares one matrix between source and "
            "target, so their vocabularies must be the same size. Received: "
            f"source_vocab_size={model.source_vocab_size}, "
            f"target_vocab_size={model.target_vocab_size}"
        )
    if not 0 <= model.pad_id < min(model.source_vocab_size, model.target_vocab_size):
        raise ValueError(f"`pad_id` must be a valid token id. Received: pad_id={model.pad_id}")
    _check_alignment(model)


def _check_alignment(model):
    layers = model.num_decoder_layers or model.num_layers
    validation.check_index(layers, "decoder layers", alignment_layer=model.alignment_layer)
    heads = model.alignment_heads
    if heads is not None and (
        isinstance(heads, bool) or not isinstance(heads, int) or not 1 <= heads <= model.num_heads
    ):
        raise ValueError(
            f"`alignment_heads` must be None (every head) or a count of heads from 1 to "
            f"num_heads={model.num_heads}. Received: alignment_heads={heads!r}"
        )
