"""The paper's training recipe on a model: `compile_for_training` (loss,
metrics, optimizer, in the distribution strategy's scope), on every Keras
backend."""

import keras

from keras_transformer import _backend
from keras_transformer.models import Transformer
from keras_transformer.special_ids import NEVER_LOGIT_BIAS
from keras_transformer.training.devices import recommended_jit_compile
from keras_transformer.training.losses import LabelSmoothedCrossEntropy
from keras_transformer.training.metrics import MaskedAccuracy
from keras_transformer.training.metrics import Perplexity
from keras_transformer.training.metrics import TokenCount
from keras_transformer.training.schedules import paper_optimizer
from keras_transformer_runtime import validation

JIT_COMPILE = ("auto", True, False)


def output_vocab_size(model):
    """How many ids, the first ones, `model` can output, or None for all:
    trailing ids whose logit bias is `NEVER_LOGIT_BIAS` or lower (an
    imported Marian model's decoder-start id) are never outputs."""
    if not isinstance(model, Transformer) or model.logits_bias is None:
        return None
    never = keras.ops.convert_to_numpy(model.logits_bias) <= NEVER_LOGIT_BIAS
    size = len(never)
    while size and never[size - 1]:
        size -= 1
    return None if size == len(never) else size


LEARNING_RATE_SCHEDULES = ("auto", "paper", "budget")


def compile_for_training(
    model,
    optimizer=None,
    warmup_steps=4000,
    learning_rate_scale=1.0,
    accumulation_steps=1,
    label_smoothing=0.1,
    jit_compile="auto",
    ema_momentum=None,
):
    """Compiles `model` with the paper's loss, metrics and optimizer.

    The loss is `LabelSmoothedCrossEntropy`, smoothed over the ids the
    model can output (`output_vocab_size`); the metrics are
    `MaskedAccuracy`, `Perplexity` and `TokenCount`, all ignoring the
    model's `pad_id`. `train` compiles with this; call it yourself to run
    `fit` or `train_on_batch` with the same setup. It compiles inside the
    model's distribution strategy scope. It runs on every Keras backend
    (`train` itself needs TensorFlow); with `jit_compile="auto"` JAX and
    PyTorch get Keras's own default.

    Args:
        model: a `Transformer` (or any model with `d_model` and `pad_id`).
        optimizer: defaults to `paper_optimizer(model.d_model, ...)`.
        warmup_steps: schedule warm-up, 4000 in the paper.
        learning_rate_scale: schedule scale, 1 in the paper.
        accumulation_steps: micro-batches averaged into each update.
        label_smoothing: ε_ls, 0.1 in the paper.
        jit_compile: `"auto"` (`recommended_jit_compile()`), `True` or
            `False`.
        ema_momentum: keep a moving average of the weights
            (`paper_optimizer`); `None` (the paper) keeps none.

    Returns:
        The model.

    Example:

    >>> model = compile_for_training(Transformer.from_preset("tiny", vocab_size=100))
    >>> model.train_on_batch((source, target_in), target_out)
    """
    validation.check_choice(JIT_COMPILE, jit_compile=jit_compile)
    validation.check_positive_int(accumulation_steps=accumulation_steps)
    if optimizer is None:
        optimizer = paper_optimizer(
            model.d_model, warmup_steps, learning_rate_scale, accumulation_steps, ema_momentum
        )
    pad_id = model.pad_id
    arguments = {
        "optimizer": optimizer,
        "loss": LabelSmoothedCrossEntropy(
            label_smoothing, pad_id=pad_id, smoothed_vocab_size=output_vocab_size(model)
        ),
        "metrics": [MaskedAccuracy(pad_id), Perplexity(pad_id), TokenCount(pad_id)],
    }
    if not _backend.is_tensorflow():  # JAX or PyTorch: Keras's own choice of compilation
        model.compile(**arguments, jit_compile=jit_compile)
        return model
    with model.distribute_strategy.scope():
        model.compile(
            **arguments,
            jit_compile=recommended_jit_compile() if jit_compile == "auto" else jit_compile,
        )
    return model
