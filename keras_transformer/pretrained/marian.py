"""Import Marian (OPUS-MT) translation models saved in Hugging Face's format."""

import dataclasses
import json
import os

import numpy as np

from keras_transformer.models import Transformer
from keras_transformer.pretrained.safetensors import read_safetensors
from keras_transformer.special_ids import NEVER_LOGIT_BIAS
from keras_transformer.tokenization.marian_tokenizer import MarianTokenizer
from keras_transformer_runtime.runners.settings import DecodingSettings

# Hugging Face's activation names and the Keras activation computing each.
ACTIVATIONS = {"swish": "silu", "silu": "silu", "relu": "relu", "gelu": "gelu"}


@dataclasses.dataclass
class PretrainedTranslator:
    """What `load_marian` returns.

    Attributes:
        model: the `Transformer`, weights set.
        tokenizer: its `MarianTokenizer`.
        settings: `DecodingSettings` with the beam size of the model's
            generation config (`num_beams` of `generation_config.json`, or
            of `config.json` in older directories; 1 without either).
    """

    model: Transformer
    tokenizer: MarianTokenizer
    settings: DecodingSettings


def load_marian(directory, dtype=None):
    """Reads a Hugging Face MarianMT directory (an OPUS-MT model) into a
    `Transformer` and a `MarianTokenizer` that give the original's outputs.

    The directory is what `MarianMTModel.save_pretrained` and
    `MarianTokenizer.save_pretrained` write, or what `huggingface_hub`
    downloads: `config.json`, `model.safetensors` (read with NumPy alone)
    or `pytorch_model.bin` (needs PyTorch), `source.spm`, `target.spm` and
    `vocab.json`. Nothing is downloaded.

    The model is the same network: post-norm layers, layer-norm epsilon
    1e-5, the configured activation (`swish` for OPUS-MT), sinusoids laid
    out as all sines then all cosines (`position_encoding=
    "sinusoidal_concatenated"`), embeddings scaled by √d_model if the
    config says so, `final_logits_bias` as the logits' bias, and the
    tying of the config (`share_encoder_decoder_embeddings`,
    `tie_word_embeddings`). One id is added: Marian starts decoding with
    its pad id, which this package's models never attend to, so id
    `vocab_size` (the tokenizer's `bos_id`) is the decoder's start, with
    the start token's embedding and a logit bias of -1e9; the other
    logits are Marian's, id for id.

    Decoding: `settings.beam_size` is the generation config's `num_beams`.
    Greedy search gives Hugging Face's `generate` tokens. Beam search
    ranks finished hypotheses by GNMT's length penalty (`alpha`), Hugging
    Face's by `score / length ** length_penalty`: with `alpha=0` and
    `length_penalty=0` they rank alike, except hypotheses that run to the
    length limit, whose forced EOS Hugging Face scores as certain and the
    searches here by its log-probability; otherwise outputs can differ
    where the penalty decides.

    Args:
        directory: the model's directory.
        dtype: the model's dtype policy (default: Keras's global policy).

    Returns:
        A `PretrainedTranslator` (`model`, `tokenizer`, `settings`).

    Raises:
        ValueError: a file is missing or not a Marian model's, or the model
            has a setting this package cannot express (the message names
            it).

    Example:

    >>> pretrained = load_marian("opus-mt-en-de")
    >>> translator = Translator(pretrained.model, pretrained.tokenizer,
    ...                         pretrained.settings)
    >>> translator.translate(["How are you?"])
    ['Wie geht es dir?']
    """
    directory = os.fspath(directory)
    config = _read_json(directory, "config.json")
    model_type = config.get("model_type")
    if model_type != "marian":
        raise ValueError(
            f"{directory}/config.json describes a {model_type!r} model; load_marian reads "
            "Marian models (model_type 'marian')."
        )
    tokenizer = MarianTokenizer.from_directory(directory)
    weights = _read_weights(directory)
    arguments = _transformer_arguments(config, tokenizer, directory)
    model = Transformer(**arguments, **({"dtype": dtype} if dtype is not None else {}))
    _set_weights(model, weights, config, tokenizer)
    generation = _read_json(directory, "generation_config.json", required=False)
    beams = generation.get("num_beams") or config.get("num_beams") or 1
    settings = DecodingSettings(beam_size=int(beams))
    return PretrainedTranslator(model=model, tokenizer=tokenizer, settings=settings)


def _read_json(directory, name, required=True):
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        if required:
            raise ValueError(f"{directory} is not a Marian model directory: {path} is missing.")
        return {}
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except ValueError as error:
            raise ValueError(f"{path}: not JSON ({error}).") from None


def _read_weights(directory):
    """`{name: float32 array}` from `model.safetensors`, else
    `pytorch_model.bin` (which needs PyTorch)."""
    path = os.path.join(directory, "model.safetensors")
    if os.path.exists(path):
        return read_safetensors(path)
    path = os.path.join(directory, "pytorch_model.bin")
    if not os.path.exists(path):
        raise ValueError(
            f"{directory} has no weights: neither model.safetensors nor pytorch_model.bin."
        )
    try:
        import torch
    except ImportError:
        raise ImportError(
            f"{path} is a PyTorch file and reading it needs PyTorch "
            "(pip install torch); model.safetensors needs nothing more."
        ) from None
    state = torch.load(path, map_location="cpu", weights_only=True)
    return {name: tensor.float().numpy() for name, tensor in state.items()}


def _transformer_arguments(config, tokenizer, directory):
    """`Transformer` arguments for a Marian config, or a `ValueError`
    naming what the model needs and `Transformer` lacks."""

    def setting(name, default=None):
        value = config.get(name, default)
        if value is None:
            raise ValueError(f"{directory}/config.json has no {name!r}.")
        return value

    mismatches = [
        (a, b)
        for a, b in (
            ("encoder_attention_heads", "decoder_attention_heads"),
            ("encoder_ffn_dim", "decoder_ffn_dim"),
        )
        if setting(a) != setting(b)
    ]
    if mismatches:
        a, b = mismatches[0]
        raise ValueError(
            f"Transformer needs {a} == {b}. Received: {a}={config[a]}, {b}={config[b]}"
        )
    for name in ("normalize_before", "add_final_layer_norm", "normalize_embedding"):
        if config.get(name):
            raise ValueError(
                f"load_marian reads post-norm Marian models without an embedding layer norm. "
                f"Received: {name}={config[name]!r}"
            )
    activation = setting("activation_function", "swish")
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"The activation must be one of {sorted(ACTIVATIONS)}. "
            f"Received: activation_function={activation!r}"
        )
    vocab_size = setting("vocab_size")
    decoder_vocab_size = config.get("decoder_vocab_size") or vocab_size
    marian_vocab = tokenizer.vocab_size - 1  # without the added start id
    if vocab_size != marian_vocab or decoder_vocab_size != marian_vocab:
        raise ValueError(
            f"The model's vocabularies ({vocab_size:,} source, {decoder_vocab_size:,} target ids) "
            f"must be vocab.json's ({marian_vocab:,} pieces); separate source and target "
            "vocabularies are not supported."
        )
    if setting("pad_token_id") != tokenizer.pad_id or setting("eos_token_id") != tokenizer.eos_id:
        raise ValueError(
            "config.json's pad and EOS ids must be vocab.json's. Received: "
            f"pad_token_id={config['pad_token_id']}, eos_token_id={config['eos_token_id']}; "
            f"vocab.json: <pad> {tokenizer.pad_id}, </s> {tokenizer.eos_id}"
        )
    return dict(
        vocab_size=tokenizer.vocab_size,
        num_layers=setting("encoder_layers"),
        num_encoder_layers=setting("encoder_layers"),
        num_decoder_layers=setting("decoder_layers"),
        d_model=setting("d_model"),
        num_heads=setting("encoder_attention_heads"),
        d_ff=setting("encoder_ffn_dim"),
        dropout=float(config.get("dropout", 0.1)),
        attention_dropout=float(config.get("attention_dropout", 0.0)),
        relu_dropout=float(config.get("activation_dropout", 0.0)),
        tie_embeddings=_tying(config),
        norm_first=False,
        position_encoding="sinusoidal_concatenated",
        max_length=int(setting("max_position_embeddings")),
        pad_id=tokenizer.pad_id,
        layer_norm_epsilon=1e-5,
        activation=ACTIVATIONS[activation],
        scale_embeddings=bool(config.get("scale_embedding", False)),
        output_bias=True,
    )


def _tying(config):
    """`Transformer.tie_embeddings` for Marian's two tying settings. With
    an untied output layer, Hugging Face's model keeps separate source and
    target embeddings too, whatever `share_encoder_decoder_embeddings` says
    (`"none"`)."""
    shared = config.get("share_encoder_decoder_embeddings", True)
    tied_output = config.get("tie_word_embeddings", True)
    if tied_output:
        return "all" if shared else "target"
    return "none"


def _with_start_row(matrix, start_id):
    """`matrix` `(vocab, d)` with one more row, a copy of `start_id`'s."""
    return np.concatenate([matrix, matrix[start_id : start_id + 1]], axis=0)


def _set_weights(model, weights, config, tokenizer):
    """Copies Marian's weights into `model` (built by `Transformer`)."""
    weights = {name.removeprefix("model."): value for name, value in weights.items()}
    used = set()

    def take(name):
        if name not in weights:
            raise ValueError(f"The checkpoint has no weight {name!r}.")
        used.add(name)
        return weights[name]

    start_id = int(config.get("decoder_start_token_id", tokenizer.pad_id))
    # Files differ in which copies of tied matrices they hold: each matrix
    # is read from its own name where present, else from the one it is tied to.
    shared = weights.get("shared.weight")
    source = weights.get("encoder.embed_tokens.weight", shared)
    target = weights.get("decoder.embed_tokens.weight", shared)
    if source is None or target is None:
        take("shared.weight")  # raises, naming it
    output = weights.get("lm_head.weight", target)
    used.update({"shared.weight", "encoder.embed_tokens.weight"})
    used.update({"decoder.embed_tokens.weight", "lm_head.weight", "final_logits_bias"})
    _assign(model.source_embedding.embeddings, _with_start_row(source, start_id))
    if model.target_embedding is not None:
        _assign(model.target_embedding.embeddings, _with_start_row(target, start_id))
    if model.output_projection is not None:
        _assign(model.output_projection.embeddings, _with_start_row(output, start_id))
    bias = weights.get("final_logits_bias", np.zeros((1, tokenizer.vocab_size - 1), np.float32))
    _assign(model.logits_bias, np.append(bias.reshape(-1), NEVER_LOGIT_BIAS))
    for i, layer in enumerate(model.encoder.stack):
        prefix = f"encoder.layers.{i}."
        _attention(layer.self_attention, take, prefix + "self_attn.")
        _norm(layer.self_attention_norm, take, prefix + "self_attn_layer_norm.")
        _feed_forward(layer, take, prefix)
    for i, layer in enumerate(model.decoder.stack):
        prefix = f"decoder.layers.{i}."
        _attention(layer.self_attention, take, prefix + "self_attn.")
        _norm(layer.self_attention_norm, take, prefix + "self_attn_layer_norm.")
        _attention(layer.cross_attention, take, prefix + "encoder_attn.")
        _norm(layer.cross_attention_norm, take, prefix + "encoder_attn_layer_norm.")
        _feed_forward(layer, take, prefix)
    unused = sorted(name for name in weights if name not in used and "embed_positions" not in name)
    if unused:
        raise ValueError(
            f"The checkpoint has weights the model has no place for: {unused[:5]}"
            + (" ..." if len(unused) > 5 else "")
        )


def _assign(variable, value):
    if tuple(variable.shape) != value.shape:
        raise ValueError(
            f"A weight of shape {value.shape} does not fit {variable.path} {tuple(variable.shape)}."
        )
    variable.assign(value.astype(np.float32))


def _dense(dense, take, prefix):
    """A PyTorch `Linear` (weight `(out, in)`) into a Keras `Dense`."""
    _assign(dense.kernel, take(prefix + "weight").T)
    _assign(dense.bias, take(prefix + "bias"))


def _attention(attention, take, prefix):
    """PyTorch's `q_proj`... `Linear`s (weight `(heads * depth, d_model)`,
    heads together) into the attention's projections, as matrices."""
    for ours, theirs in (
        (attention.query_dense, "q_proj."),
        (attention.key_dense, "k_proj."),
        (attention.value_dense, "v_proj."),
        (attention.output_dense, "out_proj."),
    ):
        ours.assign_matrix(take(prefix + theirs + "weight").T, take(prefix + theirs + "bias"))


def _norm(norm, take, prefix):
    _assign(norm.gamma, take(prefix + "weight"))
    _assign(norm.beta, take(prefix + "bias"))


def _feed_forward(layer, take, prefix):
    _dense(layer.feed_forward.inner_dense, take, prefix + "fc1.")
    _dense(layer.feed_forward.output_dense, take, prefix + "fc2.")
    _norm(layer.feed_forward_norm, take, prefix + "final_layer_norm.")
