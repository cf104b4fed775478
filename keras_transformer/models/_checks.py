"""The constructor checks of `Transformer`, on the values it stored."""

from keras_transformer import _validation

TIE_EMBEDDINGS = ("all", "target", "none")
POSITION_ENCODINGS = ("sinusoidal", "learned")


def check_arguments(model):
    """Raises a `ValueError` that names the first bad argument of `model`."""
    if model.source_vocab_size is None or model.target_vocab_size is None:
        raise ValueError(
            "Pass `vocab_size` (shared) or both `source_vocab_size` and "
            f"`target_vocab_size`. Received: vocab_size={model.vocab_size}, "
            f"source_vocab_size={model.source_vocab_size}, "
            f"target_vocab_size={model.target_vocab_size}"
        )
    for name in (
        "vocab_size",
        "source_vocab_size",
        "target_vocab_size",
        "num_layers",
        "num_encoder_layers",
        "num_decoder_layers",
        "d_model",
        "num_heads",
        "d_ff",
        "key_dim",
        "value_dim",
        "max_length",
    ):
        _validation.check_positive_int(name, getattr(model, name), allow_none=True)
    for name in ("dropout", "attention_dropout", "relu_dropout"):
        _validation.check_rate(name, getattr(model, name))
    if model.key_dim is None:
        _validation.check_divisible("d_model", model.d_model, "num_heads", model.num_heads)
    _validation.check_choice("tie_embeddings", model.tie_embeddings, TIE_EMBEDDINGS)
    _validation.check_choice("position_encoding", model.position_encoding, POSITION_ENCODINGS)
    if model.tie_embeddings == "all" and model.source_vocab_size != model.target_vocab_size:
        raise ValueError(
            "`tie_embeddings='all'` shares one matrix between source and "
            "target, so their vocabularies must be the same size. Received: "
            f"source_vocab_size={model.source_vocab_size}, "
            f"target_vocab_size={model.target_vocab_size}"
        )
    if not 0 <= model.pad_id < min(model.source_vocab_size, model.target_vocab_size):
        raise ValueError(f"`pad_id` must be a valid token id. Received: pad_id={model.pad_id}")
