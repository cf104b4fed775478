"""The paper's training recipe on a model: `compile_for_training` (loss,
metrics, optimizer, in the distribution strategy's scope), on every Keras
backend."""

from keras_transformer import _backend
from keras_transformer.models.guided_alignment import GuidedAlignment
from keras_transformer.training.devices import recommended_jit_compile
from keras_transformer.training.former_arguments import accepts_former_arguments
from keras_transformer.training.losses import LabelSmoothedCrossEntropy
from keras_transformer.training.metrics import MaskedAccuracy
from keras_transformer.training.metrics import Perplexity
from keras_transformer.training.metrics import TokenCount
from keras_transformer.training.settings import TrainingSettings


@accepts_former_arguments
def compile_for_training(model, settings=None, optimizer=None):
    """Compiles `model` with the paper's loss, metrics and optimizer, as
    `settings` say.

    The loss is `LabelSmoothedCrossEntropy` (`settings.label_smoothing`),
    smoothed over the ids the model can output
    (`Transformer.output_vocab_size`); the metrics are `MaskedAccuracy`,
    `Perplexity` and `TokenCount`, all ignoring the model's `pad_id`.
    `train` compiles with this; call it yourself to run `fit` or
    `train_on_batch` with the same setup. It compiles inside the model's
    distribution strategy scope. It runs on every Keras backend (`train`
    itself needs TensorFlow); with `jit_compile="auto"` JAX and PyTorch
    get Keras's own default.

    Args:
        model: a `Transformer` (or any model with `d_model`, `pad_id`,
            `target_vocab_size` and `output_vocab_size`).
        settings: a `TrainingSettings` (default: the paper's recipe): its
            optimizer (`TrainingSettings.optimizer`), `label_smoothing`,
            `guided_alignment_weight` (a `Transformer`'s, for batches with
            word links) and `jit_compile` are used here.
        optimizer: your own, instead of the settings'.

    Returns:
        The model.

    Example:

    >>> settings = TrainingSettings(label_smoothing=0.1)
    >>> model = compile_for_training(Transformer.from_preset("tiny", vocab_size=100), settings)
    >>> model.train_on_batch((source, target_in), target_out)
    """
    settings = TrainingSettings.of(settings)
    if optimizer is None:
        optimizer, _ = settings.optimizer(model.d_model)
    pad_id = model.pad_id
    arguments = {
        "optimizer": optimizer,
        "loss": LabelSmoothedCrossEntropy(
            settings.label_smoothing,
            pad_id=pad_id,
            smoothed_vocab_size=_smoothed_vocab_size(model),
        ),
        "metrics": [MaskedAccuracy(pad_id), Perplexity(pad_id), TokenCount(pad_id)],
    }
    if isinstance(model, GuidedAlignment):  # a `Transformer`: batches may carry word links
        arguments["guided_alignment_weight"] = settings.guided_alignment_weight
    jit_compile = settings.jit_compile
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
