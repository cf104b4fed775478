"""The paper's training recipe: schedule, loss, metrics, data, resumable fit.

The model's side of it (the loss, the metrics, the schedules, the
optimizer, `compile_for_training`, dtype policies, fine-tuning) runs on
every Keras backend; the data pipeline, `train` and its checkpoints need
TensorFlow, and are imported when first used (`_backend.TensorFlowParts`):
without TensorFlow, using one raises `BackendError`.
"""

from keras_transformer import _backend
from keras_transformer.training.batch_shapes import BatchShapes
from keras_transformer.training.compile import compile_for_training
from keras_transformer.training.devices import dtype_policy
from keras_transformer.training.devices import get_strategy
from keras_transformer.training.devices import recommended_jit_compile
from keras_transformer.training.devices import recommended_mixed_precision
from keras_transformer.training.dropout_by_passes import DropoutByPasses
from keras_transformer.training.fine_tuning import FineTuningSetup
from keras_transformer.training.fine_tuning import merge_lora
from keras_transformer.training.fine_tuning import prepare_fine_tuning
from keras_transformer.training.language_id import LanguageIdentifier
from keras_transformer.training.losses import LabelSmoothedCrossEntropy
from keras_transformer.training.metrics import MaskedAccuracy
from keras_transformer.training.metrics import Perplexity
from keras_transformer.training.metrics import TokenCount
from keras_transformer.training.schedules import BudgetSchedule
from keras_transformer.training.schedules import TransformerSchedule
from keras_transformer.training.schedules import adam_optimizer
from keras_transformer.training.schedules import paper_optimizer
from keras_transformer.training.settings import TrainingSettings
from keras_transformer.training.time_budget import BudgetPlan
from keras_transformer.training.time_budget import TimeBudget

# What needs TensorFlow: {name: (module, what in it is TensorFlow)}.
_TENSORFLOW_PARTS = {
    "is_chief": ("_distribute", "tf.distribute"),
    "BestCheckpoints": ("best", "tf.train checkpoints"),
    "best_checkpoint_paths": ("best", "tf.train checkpoints"),
    "read_evaluations": ("best", "tf.train checkpoints"),
    "averaging_checkpoint_paths": ("averaging", "tf.train checkpoints"),
    "IncompatibleRunError": ("checkpoints", "tf.train checkpoints"),
    "average_checkpoints": ("checkpoints", "tf.train checkpoints"),
    "checkpoint_paths": ("checkpoints", "tf.train checkpoints"),
    "make_batches": ("data", "tf.data and the TF Text tokenizer"),
    "target_tokens_per_pass": ("shape_sample", "tf.data"),
    "TranslationEvaluator": ("evaluation", "the in-graph searches"),
    "mix_corpora": ("multilingual", "tf.data"),
    "MixedCorpora": ("multilingual", "tf.data"),
    "TokenBatches": ("token_batches", "tf.data"),
    "mix_pairs": ("mixing", "tf.data"),
    "text_pairs_from_files": ("text_pairs", "tf.data"),
    "text_pairs_from_lists": ("text_pairs", "tf.data"),
    "text_pairs_from_tfds": ("text_pairs", "tf.data"),
    "NoTrainingDataError": ("run", "tf.distribute, tf.data and tf.train checkpoints"),
    "TrainingDivergedError": ("run", "tf.distribute, tf.data and tf.train checkpoints"),
    "TrainResult": ("run", "tf.distribute, tf.data and tf.train checkpoints"),
    "train": ("trainer", "tf.distribute, tf.data and tf.train checkpoints"),
    "align_words": ("word_links", "tf.data"),
    "with_word_links": ("word_links", "tf.data"),
}
_parts = _backend.TensorFlowParts(__name__, _TENSORFLOW_PARTS)
__getattr__, __dir__ = _parts.get, _parts.names

__all__ = [
    "BatchShapes",
    "BestCheckpoints",
    "BudgetPlan",
    "BudgetSchedule",
    "DropoutByPasses",
    "FineTuningSetup",
    "IncompatibleRunError",
    "LabelSmoothedCrossEntropy",
    "LanguageIdentifier",
    "MaskedAccuracy",
    "MixedCorpora",
    "NoTrainingDataError",
    "Perplexity",
    "TokenCount",
    "TimeBudget",
    "TokenBatches",
    "TrainResult",
    "TrainingSettings",
    "TrainingDivergedError",
    "TransformerSchedule",
    "TranslationEvaluator",
    "adam_optimizer",
    "align_words",
    "average_checkpoints",
    "averaging_checkpoint_paths",
    "best_checkpoint_paths",
    "checkpoint_paths",
    "compile_for_training",
    "dtype_policy",
    "get_strategy",
    "is_chief",
    "make_batches",
    "merge_lora",
    "mix_corpora",
    "mix_pairs",
    "paper_optimizer",
    "prepare_fine_tuning",
    "read_evaluations",
    "recommended_jit_compile",
    "recommended_mixed_precision",
    "target_tokens_per_pass",
    "text_pairs_from_files",
    "text_pairs_from_lists",
    "text_pairs_from_tfds",
    "train",
    "with_word_links",
]
