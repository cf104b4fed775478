"""Export a trained `Translator` to CTranslate2.

CTranslate2 (https://github.com/OpenNMT/CTranslate2) is a C++ inference
engine for Transformers, fast on CPUs and able to run in int8. It is an
optional extra: `pip install -e ".[ctranslate2]"`.

`export_ctranslate2(translator, output_dir)` maps the model's trained
weights into a `ctranslate2.specs.TransformerSpec` (post-norm or pre-norm,
our interleaved sinusoid table or learned positions, any tying of the
embeddings, embeddings scaled by √d_model) and writes the directory that
`keras_transformer_runtime.CTranslate2Translator` runs, without TensorFlow
(see that module for the layout, and for how its decoding differs from
`Translator`'s); `kt-translate --model
DIR` is its command line.
"""

import json
import os
import shutil

import keras
import numpy as np

from keras_transformer import _backend
from keras_transformer.export.versions import owned_staging_dir
from keras_transformer.export.versions import remove_stale_staging
from keras_transformer.export.versions import swap_in
from keras_transformer.export.versions import unmark
from keras_transformer_runtime.runners.ctranslate2 import SETTINGS_FILE
from keras_transformer_runtime.runners.ctranslate2 import import_ctranslate2

# `None` keeps float32.
QUANTIZATIONS = (
    None,
    "int8",
    "int8_float32",
    "int8_float16",
    "int8_bfloat16",
    "int16",
    "float16",
    "bfloat16",
    "float32",
)


@_backend.tensorflow_only("export.export_ctranslate2", "it converts a Translator")
def export_ctranslate2(translator, output_dir, quantization=None, overwrite=False):
    """Writes `translator`'s model, tokenizer and decoding settings as a
    CTranslate2 model directory.

    The directory is written next to `output_dir` and moved into place
    when complete, so a crash never leaves half a model behind.

    Args:
        translator: a `keras_transformer.Translator` (its `model`, its
            SentencePiece `tokenizer` and its decoding settings are used).
        output_dir: the directory to write; it must not exist, or be
            empty, unless `overwrite`.
        quantization: the weights' type in the export, one of
            `QUANTIZATIONS`: `None` (float32), `"int8"`, `"int8_float32"`,
            `"int8_float16"`, `"int8_bfloat16"`, `"int16"`, `"float16"`,
            `"bfloat16"`, `"float32"`. CTranslate2 can still convert at load
            time (`compute_type`).
        overwrite: replace an existing non-empty `output_dir`.

    Returns:
        `output_dir`.

    Raises:
        ImportError: CTranslate2 is not installed.
        ValueError: a setting CTranslate2 cannot express (the message names
            it), an unknown `quantization`, or a non-empty `output_dir`
            without `overwrite`.

    Example:

    >>> export_ctranslate2(translator, "ende_ct2", quantization="int8")
    >>> keras_transformer_runtime.CTranslate2Translator("ende_ct2").translate(["A dog runs."])
    ['Ein Hund läuft.']
    """
    if quantization not in QUANTIZATIONS:
        raise ValueError(
            f"`quantization` must be one of {QUANTIZATIONS}. "
            f"Received: quantization={quantization!r}"
        )
    output_dir = os.fspath(output_dir)
    if os.path.isdir(output_dir) and os.listdir(output_dir) and not overwrite:
        raise ValueError(
            f"`output_dir` {output_dir!r} exists and is not empty; pass overwrite=True to "
            "replace it."
        )
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
        raise ValueError(f"`output_dir` {output_dir!r} is a file, not a directory.")
    import_ctranslate2()
    spec = transformer_spec(translator.model, translator.tokenizer)
    spec.optimize(quantization=quantization)
    parent = os.path.dirname(os.path.abspath(output_dir))
    os.makedirs(parent, exist_ok=True)
    prefix = f".{os.path.basename(output_dir)}.tmp-"
    remove_stale_staging(parent, prefix)  # of exports that were killed
    staging = owned_staging_dir(parent, prefix)
    try:
        spec.save(staging)
        translator.tokenizer.save_assets(staging)
        settings = {
            **translator.settings.to_dict(),
            "tokenizer": translator.tokenizer.kind,
            "languages": list(translator.languages.codes),
            "quantization": quantization or "float32",
            "source_eos": True,
            # `score` truncates targets as `Translator.score` does.
            "model_max_length": translator.model.max_length,
        }
        with open(os.path.join(staging, SETTINGS_FILE), "w", encoding="utf-8") as f:
            json.dump(settings, f, indent=2, sort_keys=True)
            f.write("\n")
        unmark(staging)
        swap_in(staging, output_dir, aside_prefix=f"{prefix}old-")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return output_dir


def transformer_spec(model, tokenizer):
    """The `ctranslate2.specs.TransformerSpec` of a `Transformer` and its
    SentencePiece tokenizer, weights set and vocabularies registered.

    The vocabularies are the tokenizer's pieces; the model's embedding rows
    beyond them (a model vocabulary padded to a round size) are left out,
    which is what `Translator` does by forbidding them.
    """
    from ctranslate2.specs import common_spec
    from ctranslate2.specs import transformer_spec as ct2

    _check_expressible(model)
    spec = ct2.TransformerSpec.from_config(
        (len(model.encoder.stack), len(model.decoder.stack)),
        model.num_heads,
        pre_norm=bool(model.norm_first),
        activation=_activation(model, common_spec.Activation),
        # Alignments as `Translator` takes them: the mean of the model's
        # alignment heads, the first ones, of its alignment layer.
        alignment_layer=model.alignment_layer,
        alignment_heads=model.alignment_heads or model.num_heads,
    )
    vocab = tokenizer.vocab_size
    # The model's own resolution of `tie_embeddings` into matrices.
    for layer_spec, embedding in (
        (spec.encoder.embeddings[0], model.source_embedding),
        (spec.decoder.embeddings, model._target_embedding()),
        (spec.decoder.projection, model._output_projection()),
    ):
        layer_spec.weight = _value(embedding.embeddings)[:vocab]
    spec.encoder.scale_embeddings = spec.decoder.scale_embeddings = bool(model.scale_embeddings)
    spec.decoder.projection.bias = (
        np.zeros(vocab, np.float32)
        if model.logits_bias is None
        else _value(model.logits_bias)[:vocab]
    )
    source_positions, target_positions = _position_tables(model)
    spec.encoder.position_encodings.encodings = source_positions
    spec.decoder.position_encodings.encodings = target_positions
    for layer_spec, layer in zip(spec.encoder.layer, model.encoder.stack, strict=True):
        _self_attention(layer_spec.self_attention, layer)
        _feed_forward(layer_spec.ffn, layer)
    for layer_spec, layer in zip(spec.decoder.layer, model.decoder.stack, strict=True):
        _self_attention(layer_spec.self_attention, layer)
        _cross_attention(layer_spec.attention, layer)
        _feed_forward(layer_spec.ffn, layer)
    if model.norm_first:
        _norm(spec.encoder.layer_norm, model.encoder.final_norm)
        _norm(spec.decoder.layer_norm, model.decoder.final_norm)

    pieces = _pieces(tokenizer)
    spec.register_source_vocabulary(pieces)
    spec.register_target_vocabulary(pieces)
    config = spec.config
    config.unk_token = pieces[tokenizer.unk_id]
    config.bos_token = config.decoder_start_token = pieces[tokenizer.bos_id]
    config.eos_token = pieces[tokenizer.eos_id]
    config.add_source_eos = True
    config.layer_norm_epsilon = float(model.layer_norm_epsilon)
    spec.validate()
    return spec


# Keras activation names and the CTranslate2 activation each computes.
ACTIVATIONS = {"relu": "RELU", "swish": "SWISH", "silu": "SWISH", "gelu": "GELU"}


def _activation(model, activations):
    name = keras.activations.serialize(keras.activations.get(model.activation))
    name = name if isinstance(name, str) else str(name)
    if name not in ACTIVATIONS:
        raise ValueError(
            f"CTranslate2 computes the feed-forward activations {sorted(ACTIVATIONS)}. "
            f"Received: activation={model.activation!r}"
        )
    return getattr(activations, ACTIVATIONS[name])


def _check_expressible(model):
    """Raises a `ValueError` naming the settings if `model`'s attention
    heads have a shape CTranslate2's `TransformerSpec` cannot express (its
    heads are `d_model / num_heads` wide for queries, keys and values)."""
    d_model, heads = model.d_model, model.num_heads
    head_dim = d_model // heads
    key_dim = model.key_dim or head_dim
    value_dim = model.value_dim or key_dim
    if d_model % heads or key_dim != head_dim or value_dim != head_dim:
        raise ValueError(
            "CTranslate2 needs key_dim == value_dim == d_model / num_heads. Received: "
            f"d_model={d_model}, num_heads={heads}, key_dim={model.key_dim}, "
            f"value_dim={model.value_dim}"
        )


def _value(variable):
    return np.asarray(keras.ops.convert_to_numpy(variable), np.float32)


def _linear(spec, weights):
    """A `(matrix, bias)` pair, the matrix Keras's `(in, out)`, as
    CTranslate2's linear `(out, in)`."""
    matrix, bias = weights
    spec.weight = np.asarray(matrix, np.float32).T.copy()
    spec.bias = np.asarray(bias, np.float32)


def _fused(spec, weights):
    """Several `(matrix, bias)` pairs of one input as one CTranslate2 linear."""
    spec.weight = np.concatenate([np.asarray(m, np.float32).T for m, _ in weights], axis=0)
    spec.bias = np.concatenate([np.asarray(b, np.float32) for _, b in weights], axis=0)


def _dense(dense):
    """A Keras `Dense`'s `(matrix, bias)`."""
    return _value(dense.kernel), _value(dense.bias)


def _projection(projection):
    """An attention projection's `(matrix, bias)`: Keras's `(d_model, heads,
    depth)` kernel as `(d_model, heads * depth)` (heads together, as
    CTranslate2 splits them), `(heads, depth, d_model)` as `(heads * depth,
    d_model)`."""
    return projection.matrix(), projection.flat_bias()


def _norm(spec, norm):
    spec.gamma = _value(norm.gamma)
    spec.beta = _value(norm.beta)


def _self_attention(spec, layer):
    attention = layer.self_attention
    projections = (attention.query_dense, attention.key_dense, attention.value_dense)
    _fused(spec.linear[0], [_projection(p) for p in projections])
    _linear(spec.linear[1], _projection(attention.output_dense))
    _norm(spec.layer_norm, layer.self_attention_norm)


def _cross_attention(spec, layer):
    attention = layer.cross_attention
    _linear(spec.linear[0], _projection(attention.query_dense))
    _fused(spec.linear[1], [_projection(p) for p in (attention.key_dense, attention.value_dense)])
    _linear(spec.linear[2], _projection(attention.output_dense))
    _norm(spec.layer_norm, layer.cross_attention_norm)


def _feed_forward(spec, layer):
    _linear(spec.linear_0, _dense(layer.feed_forward.inner_dense))
    _linear(spec.linear_1, _dense(layer.feed_forward.output_dense))
    _norm(spec.layer_norm, layer.feed_forward_norm)


def _position_tables(model):
    """`(source, target)` position tables `(max_length, d_model)`: the
    learned ones, or the sinusoid table our `PositionalEncoding` computes
    (in its layout, not CTranslate2's built-in one)."""
    if model.position_encoding == "learned":
        return _value(model.source_positions.embeddings), _value(model.target_positions.embeddings)
    # The model's own layer, in float32 whatever the model's dtype policy.
    config = {**model.source_positions.get_config(), "dtype": "float32"}
    encoding = type(model.source_positions).from_config(config)
    zeros = keras.ops.zeros((1, model.max_length, model.d_model), "float32")
    table = _value(encoding(zeros)[0])
    return table, table


def _pieces(tokenizer):
    """The tokenizer's pieces in id order."""
    return [tokenizer.id_to_piece(i) for i in range(tokenizer.vocab_size)]
