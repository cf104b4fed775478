"""Validation scores of a run (`EvaluationLog`), its best checkpoints by
one of them, and early stopping on it (`BestCheckpoints`).

Beside the regular checkpoints, a run keeps:

    model_dir/evaluations.json         every evaluation: `step` and the
                                       `val_*` logs of that epoch
    model_dir/best/ckpt-<step>.*       the `keep` best-scoring weights
    model_dir/best/scores.json         `monitor`, `mode` and the best
                                       checkpoints, best first

The best checkpoints hold the weights that were scored (the moving
averages with `use_ema=True`), are never deleted by the regular
checkpoints' rotation, and are read by `average_checkpoints` like the
regular ones (`best_checkpoint_paths`).
"""

import glob
import json
import os
import warnings

import keras
import tensorflow as tf

from keras_transformer.training._distribute import is_chief
from keras_transformer.training._distribute import read_int
from keras_transformer.training.checkpoints import average_checkpoints
from keras_transformer.training.checkpoints import remove_checkpoint
from keras_transformer.training.checkpoints import write_json_atomically
from keras_transformer.training.checkpoints import write_weights_on_chief
from keras_transformer_runtime import validation

BEST_DIR = "best"
SCORES_FILE = "scores.json"
EVALUATIONS_FILE = "evaluations.json"


def score_mode(monitor):
    """`"min"` for a loss or a perplexity, `"max"` for anything else
    (BLEU, chrF, accuracy): Keras's `"auto"` mode."""
    return "min" if monitor.endswith("loss") or monitor.endswith("perplexity") else "max"


def _read_json(path, default):
    if not tf.io.gfile.exists(path):
        return default
    with tf.io.gfile.GFile(path) as f:
        return json.load(f)


def read_evaluations(model_dir):
    """Every evaluation of the run in `model_dir`, oldest first: dicts of
    the update `step` and the `val_*` scores logged then.

    Example:

    >>> [(e["step"], e["val_bleu"]) for e in read_evaluations("runs/base")]
    [(1000, 12.3), (2000, 19.8)]
    """
    return _read_json(os.path.join(model_dir, EVALUATIONS_FILE), [])


def best_checkpoint_paths(model_dir):
    """The best checkpoints `train(keep_best=...)` kept in `model_dir`,
    best first (ties: the earlier first).

    Example:

    >>> average_checkpoints(model, best_checkpoint_paths("runs/base")[:5])
    """
    directory = os.path.join(model_dir, BEST_DIR)
    scores = _read_json(os.path.join(directory, SCORES_FILE), {})
    return [os.path.join(directory, entry["name"]) for entry in scores.get("checkpoints", [])]


class EvaluationLog(keras.callbacks.Callback):
    """Appends each epoch's `val_*` logs, with the update `step`, to
    `model_dir/evaluations.json` (`train` runs it; the chief writes).
    `evaluations` holds the run's, across restarts: `start(resumed_step)`
    forgets those past the checkpoint the run resumed from, which the run
    recomputes."""

    def __init__(self, model_dir):
        super().__init__()
        self.model_dir = model_dir
        self.evaluations = []

    def start(self, resumed_step):
        """Reads the run's evaluations up to `resumed_step`."""
        evaluations = read_evaluations(self.model_dir)
        self.evaluations = [e for e in evaluations if e["step"] <= resumed_step]

    def on_epoch_end(self, epoch, logs=None):
        scores = {k: float(v) for k, v in (logs or {}).items() if k.startswith("val_")}
        if not scores:
            return
        self.evaluations.append({"step": read_int(self.model.optimizer.iterations), **scores})
        if is_chief(self.model.distribute_strategy):
            tf.io.gfile.makedirs(self.model_dir)
            write_json_atomically(os.path.join(self.model_dir, EVALUATIONS_FILE), self.evaluations)


MODES = ("auto", "min", "max")


class BestCheckpoints(keras.callbacks.Callback):
    """Keeps the best checkpoints of a run by a validation score, and stops
    training early when it stops improving: what `train` keeps by
    `TrainingSettings(keep_best=..., best_monitor=..., patience=...)`. Its
    arguments are those of Keras's `EarlyStopping`, and mean the same.

    At the end of every epoch whose logs hold `monitor` (an evaluation),
    the weights are written to `model_dir/best/` if they are among the `keep`
    best so far (evicting the worst), and an evaluation that does not beat
    the best by more than `min_delta` counts as no improvement. After
    `patience` such evaluations in a row training stops
    (`stopped_early`) and, with `restore_best_weights`, the best
    checkpoint's weights are loaded into the model at the end.

    State comes from the run's files, so a resumed run knows its best
    scores and how long it has waited. Only the chief writes; the other
    workers write their weights to a scratch directory (every worker must
    take part in saving) and decide alike from the same scores.

    Args:
        monitor: the validation score to rank by, e.g. `"val_bleu"`,
            `"val_chrf"` (with a `TranslationEvaluator`) or `"val_loss"`
            (with `validation_data`).
        keep: how many best checkpoints to keep (0: none, early stopping
            only).
        patience: evaluations without improvement before stopping, or
            `None` for no early stopping.
        min_delta: the least change that counts as an improvement, `>= 0`.
        mode: `"auto"` (`"min"` for a loss or a perplexity, `"max"` for
            anything else), `"min"` or `"max"`.
        restore_best_weights: load the best checkpoint into the model when
            training stops early.

    Example:

    >>> settings = TrainingSettings(keep_best=5, best_monitor="val_bleu", patience=5)
    >>> result = train(model, batches, "runs/base", settings, evaluator=evaluator)
    >>> result.best_checkpoint
    'runs/base/best/ckpt-42000'
    """

    def __init__(
        self,
        monitor="val_bleu",
        keep=5,
        patience=None,
        min_delta=0.0,
        mode="auto",
        restore_best_weights=False,
    ):
        super().__init__()
        if not isinstance(monitor, str) or not monitor.startswith("val_"):
            raise ValueError(
                "`monitor` must name a validation score, e.g. 'val_bleu', 'val_chrf' or "
                f"'val_loss'. Received: monitor={monitor!r}"
            )
        validation.check_non_negative_int(keep=keep)
        validation.check_positive_int(allow_none=True, patience=patience)
        validation.check_non_negative(min_delta=min_delta)
        validation.check_choice(MODES, mode=mode)
        self.monitor = monitor
        self.mode = score_mode(monitor) if mode == "auto" else mode
        self.keep = keep
        self.patience = patience
        self.min_delta = min_delta
        self.restore_best_weights = restore_best_weights
        self.model_dir = self.directory = None
        self.best_entries = []  # {"step", "score", "name"}, best first
        self.best = None  # the best score in the early-stopping sense
        self.wait = 0
        self.stopped_early = False

    # State.

    @property
    def _chief(self):
        return is_chief(self.model.distribute_strategy)

    def start(self, model_dir, resumed_step):
        """Attaches to the run in `model_dir` (`train` calls it, after
        `set_model`): reads its evaluations and best checkpoints, dropping
        those past `resumed_step`, and removes stray best-checkpoint files
        (a crash between writing them and recording them, or while writing
        them)."""
        self.model_dir = model_dir
        self.directory = os.path.join(model_dir, BEST_DIR)
        self.stopped_early = False
        evaluations = read_evaluations(self.model_dir)
        scores = _read_json(os.path.join(self.directory, SCORES_FILE), {})
        if scores.get("monitor", self.monitor) != self.monitor:
            raise ValueError(
                f"{self.directory} keeps the best checkpoints by {scores['monitor']!r}; this run "
                f"asks for {self.monitor!r}. Use BestCheckpoints({scores['monitor']!r}), or "
                "another model_dir."
            )
        entries = [e for e in scores.get("checkpoints", []) if e["step"] <= resumed_step]
        self.best_entries = [e for e in entries if self._exists(e["name"])]
        for missing in (e for e in entries if e not in self.best_entries):
            warnings.warn(
                f"The best checkpoint {missing['name']} (step {missing['step']}) is missing "
                "and is forgotten.",
                RuntimeWarning,
                stacklevel=2,
            )
        if self._chief:
            self._remove_unlisted_files()
        self.best, self.wait = None, 0
        for evaluation in evaluations:
            if evaluation["step"] <= resumed_step and self.monitor in evaluation:
                self._count(evaluation[self.monitor])

    @property
    def should_stop(self):
        """Whether `patience` evaluations in a row did not improve."""
        return self.patience is not None and self.wait >= self.patience

    def best_path(self):
        """The best checkpoint's prefix, or `None`."""
        if not self.best_entries:
            return None
        return os.path.join(self.directory, self.best_entries[0]["name"])

    def restore_best(self):
        """Loads the best checkpoint's weights into the model, if there is one."""
        path = self.best_path()
        if path is not None:
            average_checkpoints(self.model, [path])
        return path

    def _exists(self, name):
        return tf.io.gfile.exists(os.path.join(self.directory, name) + ".index")

    def _remove_unlisted_files(self):
        listed = {e["name"] for e in self.best_entries}
        for path in glob.glob(os.path.join(self.directory, "ckpt-*")):
            if os.path.isdir(path):  # `ckpt-<step>_temp`: the shards of a save cut short
                tf.io.gfile.rmtree(path)
            elif os.path.basename(path).split(".")[0] not in listed:
                tf.io.gfile.remove(path)

    def _improves(self, score):
        if self.best is None:
            return True
        if self.mode == "max":
            return score - self.min_delta > self.best
        return score + self.min_delta < self.best

    def _count(self, score):
        if self._improves(score):
            self.best, self.wait = score, 0
        else:
            self.wait += 1

    # Callback.

    def on_epoch_end(self, epoch, logs=None):
        if self.monitor not in (logs or {}):
            return
        step = read_int(self.model.optimizer.iterations)
        score = float(logs[self.monitor])
        if self.keep:
            self._keep_if_among_the_best(step, score)
        self._count(score)
        if self.should_stop:
            self.stopped_early = True
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        if self.stopped_early and self.restore_best_weights:
            self.restore_best()

    def _keep_if_among_the_best(self, step, score):
        entry = {"step": step, "score": score, "name": f"ckpt-{step}"}
        sign = -1.0 if self.mode == "max" else 1.0
        ranked = sorted(self.best_entries + [entry], key=lambda e: (sign * e["score"], e["step"]))
        if entry not in ranked[: self.keep]:
            return
        kept = write_weights_on_chief(self.model, self.model_dir, BEST_DIR, entry["name"])
        evicted = ranked[self.keep :]
        self.best_entries = ranked[: self.keep]
        if not kept:
            return
        write_json_atomically(
            os.path.join(self.directory, SCORES_FILE),
            {"monitor": self.monitor, "mode": self.mode, "checkpoints": self.best_entries},
        )
        for old in evicted:
            remove_checkpoint(os.path.join(self.directory, old["name"]))
