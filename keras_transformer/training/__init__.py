"""The paper's training recipe: schedule, loss, metrics, data, resumable fit."""

from keras_transformer.training._distribute import is_chief
from keras_transformer.training.batch_shapes import BatchShapes
from keras_transformer.training.best import BestCheckpoints
from keras_transformer.training.best import best_checkpoint_paths
from keras_transformer.training.best import read_evaluations
from keras_transformer.training.bucketing import bucket_boundaries
from keras_transformer.training.budget import BudgetSchedule
from keras_transformer.training.budget import ScheduleFitter
from keras_transformer.training.budget import TimeBudget
from keras_transformer.training.budget import averaging_checkpoint_paths
from keras_transformer.training.budget import read_budget
from keras_transformer.training.checkpoints import IncompatibleRunError
from keras_transformer.training.checkpoints import average_checkpoints
from keras_transformer.training.checkpoints import checkpoint_paths
from keras_transformer.training.checkpoints import checkpoint_step
from keras_transformer.training.checkpoints import write_json_atomically
from keras_transformer.training.compile import LEARNING_RATE_SCHEDULES
from keras_transformer.training.compile import compile_for_training
from keras_transformer.training.data import fit_batch_shapes
from keras_transformer.training.data import make_batches
from keras_transformer.training.devices import MIXED_PRECISION
from keras_transformer.training.devices import STRATEGIES
from keras_transformer.training.devices import cpu_has_native_bf16
from keras_transformer.training.devices import dtype_policy
from keras_transformer.training.devices import get_strategy
from keras_transformer.training.devices import recommended_jit_compile
from keras_transformer.training.devices import recommended_mixed_precision
from keras_transformer.training.evaluation import TranslationEvaluator
from keras_transformer.training.fine_tuning import FREEZABLE
from keras_transformer.training.fine_tuning import FineTuningSetup
from keras_transformer.training.fine_tuning import lora_targets
from keras_transformer.training.fine_tuning import merge_lora
from keras_transformer.training.fine_tuning import prepare_fine_tuning
from keras_transformer.training.losses import LabelSmoothedCrossEntropy
from keras_transformer.training.metrics import MaskedAccuracy
from keras_transformer.training.metrics import Perplexity
from keras_transformer.training.metrics import TokenCount
from keras_transformer.training.schedules import TransformerSchedule
from keras_transformer.training.schedules import adam_optimizer
from keras_transformer.training.schedules import paper_optimizer
from keras_transformer.training.text_pairs import text_pairs_from_files
from keras_transformer.training.text_pairs import text_pairs_from_lists
from keras_transformer.training.text_pairs import text_pairs_from_tfds
from keras_transformer.training.token_pairs import PairCounts
from keras_transformer.training.token_pairs import count_pairs
from keras_transformer.training.trainer import NoTrainingDataError
from keras_transformer.training.trainer import TrainingDivergedError
from keras_transformer.training.trainer import TrainResult
from keras_transformer.training.trainer import train

__all__ = [
    "BatchShapes",
    "BestCheckpoints",
    "BudgetSchedule",
    "FREEZABLE",
    "FineTuningSetup",
    "MIXED_PRECISION",
    "STRATEGIES",
    "IncompatibleRunError",
    "LEARNING_RATE_SCHEDULES",
    "LabelSmoothedCrossEntropy",
    "MaskedAccuracy",
    "NoTrainingDataError",
    "PairCounts",
    "ScheduleFitter",
    "Perplexity",
    "TokenCount",
    "TimeBudget",
    "TrainResult",
    "TrainingDivergedError",
    "TransformerSchedule",
    "TranslationEvaluator",
    "adam_optimizer",
    "average_checkpoints",
    "averaging_checkpoint_paths",
    "best_checkpoint_paths",
    "bucket_boundaries",
    "checkpoint_paths",
    "checkpoint_step",
    "compile_for_training",
    "cpu_has_native_bf16",
    "count_pairs",
    "dtype_policy",
    "fit_batch_shapes",
    "get_strategy",
    "is_chief",
    "lora_targets",
    "make_batches",
    "merge_lora",
    "paper_optimizer",
    "prepare_fine_tuning",
    "read_budget",
    "read_evaluations",
    "recommended_jit_compile",
    "recommended_mixed_precision",
    "text_pairs_from_files",
    "text_pairs_from_lists",
    "text_pairs_from_tfds",
    "train",
    "write_json_atomically",
]
