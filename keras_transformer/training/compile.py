"""The paper's training recipe on a model: `compile_for_training` (loss,
metrics, optimizer, in the distribution strategy's scope), on every Keras
backend."""

from keras_transformer import _backend
from keras_transformer.training.devices import recommended_jit_compile
from keras_transformer.training.losses import LabelSmoothedCrossEntropy
from keras_transformer.training.metrics import MaskedAccuracy
from keras_transformer.training.metrics import Perplexity
from keras_transformer.training.metrics import TokenCount
from keras_transformer.training.schedules import paper_optimizer
from keras_transformer_runtime import validation

JIT_COMPILE = ("auto", True, False)
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
    model can output (`Transformer.output_vocab_size`); the metrics are
    `MaskedAccuracy`, `Perplexity` and `TokenCount`, all ignoring the
    model's `pad_id`. `train` compiles with this; call it yourself to run
    `fit` or `train_on_batch` with the same setup. It compiles inside the
    model's distribution strategy scope. It runs on every Keras backend
    (`train` itself needs TensorFlow); with `jit_compile="auto"` JAX and
    PyTorch get Keras's own default.

    Args:
        model: a `Transformer` (or any model with `d_model`, `pad_id`,
            `target_vocab_size` and `output_vocab_size`).
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
            label_smoothing, pad_id=pad_id, smoothed_vocab_size=_smoothed_vocab_size(model)
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


def _smoothed_vocab_size(model):
    """The loss's `smoothed_vocab_size`: None (every id) unless the model
    can output fewer ids than it has."""
    size = model.output_vocab_size
    return None if size == model.target_vocab_size else size
