"""Fine-tuning a trained `Transformer`: which weights train (freezing,
LoRA), and LoRA's factors merged back before export."""

import dataclasses
import os
import tempfile

from keras_transformer_runtime import validation

# The parts of a `Transformer` that `prepare_fine_tuning` can freeze.
FREEZABLE = ("embeddings", "encoder", "decoder")


@dataclasses.dataclass(frozen=True)
class FineTuningSetup:
    """What `prepare_fine_tuning` did.

    Attributes:
        frozen: the parts frozen, in `FREEZABLE` order.
        lora_rank: the LoRA rank, or `None`.
        lora_layers: how many `Dense` layers got LoRA factors.
        trainable_weights: weights (scalars) that training updates.
        total_weights: all weights, LoRA factors included.
    """

    frozen: tuple
    lora_rank: int | None
    lora_layers: int
    trainable_weights: int
    total_weights: int

    def __str__(self):
        share = self.trainable_weights / max(self.total_weights, 1)
        if self.lora_rank:
            details = f"LoRA rank {self.lora_rank} on {self.lora_layers} layers; every other "
            details += "weight frozen"
        elif self.frozen:
            details = f"frozen: {', '.join(self.frozen)}"
        else:
            details = "every weight trains"
        return (
            f"{self.trainable_weights:,} of {self.total_weights:,} weights train "
            f"({share:.1%}; {details})"
        )


def prepare_fine_tuning(model, freeze=(), lora_rank=None, lora_alpha=None):
    """Chooses which of a trained `Transformer`'s weights fine-tuning
    updates, in place; `train` then trains only those.

    `freeze` names parts whose weights stay as they are: `"embeddings"`
    (the token embeddings, the output projection and the logits' bias: the
    vocabulary's weights), `"encoder"`, `"decoder"`. With `lora_rank`,
    every attention projection and feed-forward `Dense` of the encoder and
    decoder gets Keras's own LoRA (`Dense.enable_lora`: the kernel frozen,
    `kernel + (lora_alpha / lora_rank) A B` computed, A and B trained, B
    starting at zero so the model starts as it was), and only the LoRA
    factors train: `freeze` is then implied for everything else. Before
    export, `merge_lora` folds the factors into the kernels.

    Start training in a new `model_dir` (a fresh optimizer and schedule);
    the model's vocabulary is kept, so the data must be tokenized with the
    model's own tokenizer.

    Args:
        model: a built `Transformer` (trained, or imported with
            `keras_transformer.pretrained.load_marian`).
        freeze: a tuple of parts from `FREEZABLE`, or a comma-separated
            string of them.
        lora_rank: the rank of the LoRA factors (a positive int), or `None`
            for no LoRA.
        lora_alpha: LoRA's scale numerator (default: `lora_rank`, a scale
            of 1).

    Returns:
        A `FineTuningSetup` (its `str` is a one-line report).

    Raises:
        ValueError: an unknown part in `freeze`, a bad `lora_rank` or
            `lora_alpha`, or LoRA enabled twice.

    Example:

    >>> setup = prepare_fine_tuning(model, lora_rank=8)
    >>> print(setup)
    270,336 of 6,824,960 weights train (4.0%; LoRA rank 8 on 48 layers; every other weight frozen)
    >>> train(model, batches, "runs/finetuned", TrainingSettings(train_steps=2000))
    >>> export_saved_model(Translator(merge_lora(model), tokenizer), "exports/finetuned")
    """
    if isinstance(freeze, str):
        freeze = [part.strip() for part in freeze.split(",") if part.strip()]
    parts = tuple(freeze)
    for part in parts:
        validation.check_choice(FREEZABLE, freeze=part)
    validation.check_positive_int(allow_none=True, lora_rank=lora_rank)
    if lora_alpha is not None:
        if lora_rank is None:
            raise ValueError(
                f"`lora_alpha` needs a `lora_rank`. Received: lora_alpha={lora_alpha!r}"
            )
        number = isinstance(lora_alpha, (int, float)) and not isinstance(lora_alpha, bool)
        if not number or lora_alpha <= 0:
            raise ValueError(
                f"`lora_alpha` must be a positive number. Received: lora_alpha={lora_alpha!r}"
            )
    if "embeddings" in parts:
        for layer in _embedding_layers(model):
            layer.trainable = False
        if getattr(model, "logits_bias", None) is not None:
            model.logits_bias.trainable = False
    for part in ("encoder", "decoder"):
        if part in parts:
            getattr(model, part).trainable = False
    denses = []
    if lora_rank is not None:
        denses = lora_targets(model)
        if any(dense.lora_enabled for dense in denses):
            raise ValueError("LoRA is already enabled on this model; prepare it once.")
        for dense in denses:
            dense.enable_lora(lora_rank, lora_alpha=lora_alpha)
        factors = {id(v) for dense in denses for v in (dense.lora_kernel_a, dense.lora_kernel_b)}
        for variable in model.weights:
            if id(variable) not in factors:
                variable.trainable = False
        parts = FREEZABLE
    return FineTuningSetup(
        frozen=tuple(p for p in FREEZABLE if p in parts),
        lora_rank=lora_rank,
        lora_layers=len(denses),
        trainable_weights=_count(model.trainable_weights),
        total_weights=_count(model.weights),
    )


def prepare_fine_tuning_once(model, freeze=(), lora_rank=None, lora_alpha=None):
    """`prepare_fine_tuning`, unless `model` has LoRA factors of
    `lora_rank` already (a caller prepared it to load a LoRA checkpoint):
    then only `freeze` is applied again, which changes nothing.

    Raises:
        ValueError: LoRA factors of another rank.
    """
    enabled = {dense.lora_rank for dense in lora_targets(model) if dense.lora_enabled}
    if lora_rank is None or not enabled:
        return prepare_fine_tuning(model, freeze, lora_rank, lora_alpha)
    if enabled != {lora_rank}:
        raise ValueError(
            f"The model has LoRA factors of rank {sorted(enabled)}, not `lora_rank`. "
            f"Received: lora_rank={lora_rank!r}"
        )
    return prepare_fine_tuning(model, freeze)


def lora_targets(model):
    """The layers LoRA adapts: each attention's query, key, value and
    output projections (Keras's `EinsumDense`, whose LoRA factors are per
    head) and each feed-forward's two `Dense` layers, encoder then
    decoder."""
    denses = []
    for stack in (model.encoder, model.decoder):
        for layer in stack.stack:
            for attention in (layer.self_attention, getattr(layer, "cross_attention", None)):
                if attention is not None:
                    denses += [
                        attention.query_dense,
                        attention.key_dense,
                        attention.value_dense,
                        attention.output_dense,
                    ]
            denses += [layer.feed_forward.inner_dense, layer.feed_forward.output_dense]
    return denses


def merge_lora(model):
    """A copy of `model` with each LoRA-adapted kernel replaced by `kernel
    + (lora_alpha / lora_rank) A B`, without LoRA factors: the same
    outputs, the plain architecture, for export and serving. A model
    without LoRA comes back as a copy too.

    Keras's own weights file does the merge (a LoRA `Dense` saves its
    merged kernel); the copy is built from `model.get_config()`, every
    weight trainable.

    Example:

    >>> merged = merge_lora(model)
    >>> export_saved_model(Translator(merged, tokenizer), "exports/finetuned")
    """
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "merged.weights.h5")
        model.save_weights(path)
        merged = type(model).from_config(model.get_config())
        merged.load_weights(path)
    return merged


def _embedding_layers(model):
    layers = (
        getattr(model, name, None)
        for name in ("source_embedding", "target_embedding", "output_projection")
    )
    return [layer for layer in layers if layer is not None]


def _count(variables):
    total = 0
    for variable in {id(v): v for v in variables}.values():
        size = 1
        for dim in variable.shape:
            size *= dim
        total += size
    return total
