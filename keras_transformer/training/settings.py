"""`TrainingSettings`: the training recipe, written once.

`train`, `compile_for_training` and `TrainingRun` read it; a run records
it in `model_dir/checkpoints/run.json` (`to_dict`), and a resumed run whose
settings change its variables or what trains is refused (`STRUCTURAL`).
"""

import dataclasses

from keras_transformer.training.devices import MIXED_PRECISION
from keras_transformer.training.devices import dtype_policy
from keras_transformer.training.dropout_by_passes import DropoutByPasses
from keras_transformer.training.fine_tuning import FREEZABLE
from keras_transformer.training.schedules import BudgetSchedule
from keras_transformer.training.schedules import adam_optimizer
from keras_transformer.training.schedules import paper_optimizer
from keras_transformer.training.time_budget import BudgetPlan
from keras_transformer.training.time_budget import TimeBudget
from keras_transformer_runtime import validation

LEARNING_RATE_SCHEDULES = ("auto", "paper", "budget")
JIT_COMPILE = ("auto", True, False)
PRECISIONS = (None, "auto", *MIXED_PRECISION)
VERBOSE = ("auto", 0, 1, 2)

# Settings that shape the variables or what trains: a resumed run may not
# change them (`check_run`).
STRUCTURAL = ("accumulation_steps", "freeze", "lora_rank", "lora_alpha")


@dataclasses.dataclass(frozen=True)
class TrainingSettings:
    """How a model is trained: the paper's recipe by default. Checked when
    made: a bad value raises a `ValueError` that names it and ends with
    `Received: name=value`.

    Attributes:
        train_steps: optimizer updates of the whole run (across restarts).
        steps_per_checkpoint: updates between checkpoints (and validation
            runs, and by default evaluations).
        keep_checkpoints: recent checkpoints kept.
        learning_rate_schedule: `"paper"`: `TransformerSchedule` (warm-up
            `warmup_steps`, then the inverse square root); `"budget"`: a
            `BudgetSchedule` of the same peak that warms up for a part of
            the updates (at most `warmup_steps`) and decays to zero at the
            run's end (`train_steps`, or under a `budget` the updates it
            allows, re-estimated as training runs); `"auto"`: the budget
            schedule under a `budget`, the paper's otherwise.
        warmup_steps: the schedule's warm-up, 4000 in the paper.
        learning_rate_scale: the schedule's scale, 1 in the paper.
        label_smoothing: ε_ls, 0.1 in the paper.
        guided_alignment_weight: λ of the guided alignment loss, for
            batches that carry word links (`with_word_links`): 0.05, as
            Garg et al. (2019).
        accumulation_steps: micro-batches averaged into each update (the
            paper's ~25,000 tokens per update on fewer devices).
        precision: the model's dtype policy: `None` (the model's own, as
            built), or `"none"`, `"bf16"`, `"fp16"`, `"auto"`
            (`dtype_policy`), checked against the model: build it with
            `dtype=settings.dtype_policy()`.
        jit_compile: compile the step with XLA: `"auto"`
            (`recommended_jit_compile()`), `True` or `False`.
        budget: a `TimeBudget`, the run's clock: training stops (and
            checkpoints) at the first update past it; `None`: no limit.
        budget_plan: a `BudgetPlan`: the budget schedule's warm-up and
            decay, and the checkpoints kept for averaging.
        dropout_by_passes: a `DropoutByPasses`: the model's P_drop set
            from the passes over the data the run makes (under a `budget`,
            once its estimate settles); `None`: the model's own.
        keep_best: the best checkpoints by `best_monitor` kept in
            `model_dir/best/` (0: none).
        best_monitor: the validation score that ranks them, and that early
            stopping watches: `"val_bleu"`, `"val_chrf"` (with an evaluator)
            or `"val_loss"` (with validation data).
        patience: evaluations without improvement before training stops
            early; `None`: never.
        min_delta: the least change of `best_monitor` that improves.
        restore_best_weights: load the best checkpoint into the model when
            training stops early.
        evaluate_every: updates between evaluations of the evaluator
            (`None`: the evaluator's `every`, else each checkpoint); a
            multiple of `steps_per_checkpoint`.
        validation_steps: batches of the validation data per evaluation
            (`None`: all).
        ema_momentum: keep a moving average of the weights, evaluated and
            exported; `None` (the paper) keeps none.
        freeze: parts of the model that do not train (`FREEZABLE`), for
            fine-tuning (`prepare_fine_tuning`).
        lora_rank: train LoRA factors of this rank instead of the weights;
            `None`: no LoRA.
        lora_alpha: LoRA's scale numerator (`None`: `lora_rank`).
        tensorboard: write TensorBoard logs to `model_dir/logs`.
        verbose: `model.fit`'s verbosity: `"auto"`, 0, 1 or 2.

    Example:

    >>> settings = TrainingSettings(train_steps=100_000, keep_best=5, patience=5)
    >>> result = train(model, batches, "runs/base", settings, evaluator=evaluator)
    >>> settings.replace(train_steps=200_000).train_steps
    200000
    """

    train_steps: int = 100_000
    steps_per_checkpoint: int = 1000
    keep_checkpoints: int = 5
    learning_rate_schedule: str = "auto"
    warmup_steps: int = 4000
    learning_rate_scale: float = 1.0
    label_smoothing: float = 0.1
    guided_alignment_weight: float = 0.05
    accumulation_steps: int = 1
    precision: str | None = None
    jit_compile: object = "auto"
    budget: TimeBudget | None = None
    budget_plan: BudgetPlan = BudgetPlan()
    dropout_by_passes: DropoutByPasses | None = None
    keep_best: int = 0
    best_monitor: str = "val_bleu"
    patience: int | None = None
    min_delta: float = 0.0
    restore_best_weights: bool = False
    evaluate_every: int | None = None
    validation_steps: int | None = None
    ema_momentum: float | None = None
    freeze: tuple = ()
    lora_rank: int | None = None
    lora_alpha: float | None = None
    tensorboard: bool = True
    verbose: object = "auto"

    def __post_init__(self):
        validation.check_positive_int(
            train_steps=self.train_steps,
            steps_per_checkpoint=self.steps_per_checkpoint,
            keep_checkpoints=self.keep_checkpoints,
            warmup_steps=self.warmup_steps,
            accumulation_steps=self.accumulation_steps,
        )
        validation.check_positive_int(
            allow_none=True,
            patience=self.patience,
            evaluate_every=self.evaluate_every,
            validation_steps=self.validation_steps,
            lora_rank=self.lora_rank,
        )
        validation.check_non_negative_int(keep_best=self.keep_best)
        validation.check_choice(
            LEARNING_RATE_SCHEDULES, learning_rate_schedule=self.learning_rate_schedule
        )
        validation.check_choice(JIT_COMPILE, jit_compile=self.jit_compile)
        validation.check_choice(PRECISIONS, precision=self.precision)
        validation.check_choice(VERBOSE, verbose=self.verbose)
        self._check_number("learning_rate_scale", "a positive number", lambda v: v > 0)
        self._check_number("label_smoothing", "in [0, 1)", lambda v: 0 <= v < 1)
        self._check_number("guided_alignment_weight", "a number >= 0", lambda v: v >= 0)
        self._check_number("min_delta", "a number >= 0", lambda v: v >= 0)
        if self.ema_momentum is not None:
            self._check_number("ema_momentum", "in (0, 1), or None", lambda v: 0 < v < 1)
        if self.lora_alpha is not None:
            self._check_number("lora_alpha", "a positive number, or None", lambda v: v > 0)
            if self.lora_rank is None:
                raise ValueError(
                    f"`lora_alpha` needs a `lora_rank`. Received: lora_alpha={self.lora_alpha!r}"
                )
        if self.budget is not None and not isinstance(self.budget, TimeBudget):
            raise ValueError(
                "`budget` must be a keras_transformer.training.TimeBudget or None. "
                f"Received: budget={self.budget!r}"
            )
        if not isinstance(self.budget_plan, BudgetPlan):
            raise ValueError(
                "`budget_plan` must be a keras_transformer.training.BudgetPlan. "
                f"Received: budget_plan={self.budget_plan!r}"
            )
        if self.dropout_by_passes is not None and not isinstance(
            self.dropout_by_passes, DropoutByPasses
        ):
            raise ValueError(
                "`dropout_by_passes` must be a keras_transformer.training.DropoutByPasses or "
                f"None. Received: dropout_by_passes={self.dropout_by_passes!r}"
            )
        if not isinstance(self.best_monitor, str) or not self.best_monitor.startswith("val_"):
            raise ValueError(
                "`best_monitor` must name a validation score, e.g. 'val_bleu', 'val_chrf' or "
                f"'val_loss'. Received: best_monitor={self.best_monitor!r}"
            )
        for name in ("restore_best_weights", "tensorboard"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(
                    f"`{name}` must be True or False. Received: {name}={getattr(self, name)!r}"
                )
        freeze = self.freeze
        if isinstance(freeze, str):
            freeze = [part.strip() for part in freeze.split(",") if part.strip()]
        for part in freeze:
            validation.check_choice(FREEZABLE, freeze=part)
        object.__setattr__(self, "freeze", tuple(p for p in FREEZABLE if p in freeze))
        if self.evaluate_every is not None:
            validation.check_divisible(
                "evaluate_every",
                self.evaluate_every,
                "steps_per_checkpoint",
                self.steps_per_checkpoint,
            )
        for name in (
            "learning_rate_scale",
            "label_smoothing",
            "guided_alignment_weight",
            "min_delta",
        ):
            object.__setattr__(self, name, float(getattr(self, name)))

    def _check_number(self, name, accepted, accepts):
        value = getattr(self, name)
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or not accepts(value):
            raise ValueError(f"`{name}` must be {accepted}. Received: {name}={value!r}")

    @classmethod
    def of(cls, settings):
        """`settings` checked: the defaults for `None`.

        Raises:
            ValueError: `settings` of another type.
        """
        if settings is None:
            return cls()
        if not isinstance(settings, cls):
            raise ValueError(
                "`settings` must be a keras_transformer.training.TrainingSettings (or None for "
                f"the defaults). Received: settings={settings!r}"
            )
        return settings

    @classmethod
    def names(cls):
        """The settings' names, in order."""
        return tuple(field.name for field in dataclasses.fields(cls))

    def replace(self, **changes):
        """These settings with `changes` (checked likewise).

        Raises:
            ValueError: a name that is not a setting; the message lists them.
        """
        validation.check_known("training", self.names(), **changes)
        return dataclasses.replace(self, **changes)

    def to_dict(self):
        """The settings as plain values, for `run.json`: the budget as its
        seconds (`None` without one), the plan as a dict."""
        values = {name: getattr(self, name) for name in self.names()}
        values["budget"] = None if self.budget is None else self.budget.seconds
        values["budget_plan"] = dataclasses.asdict(self.budget_plan)
        plan = self.dropout_by_passes
        values["dropout_by_passes"] = None if plan is None else dataclasses.asdict(plan)
        values["freeze"] = list(self.freeze)
        return values

    def dtype_policy(self):
        """The Keras dtype policy to build the model with (`dtype_policy`
        of `precision`); `None` when `precision` is the model's own."""
        return None if self.precision is None else dtype_policy(self.precision)

    def optimizer(self, d_model):
        """The recipe's optimizer for a model of width `d_model`, and the
        `BudgetSchedule` it follows (else `None`): Adam over the budget
        schedule for `learning_rate_schedule="budget"` (or `"auto"` under a
        `budget`), shaped by `budget_plan`, of the paper schedule's peak
        and at most its warm-up; else `paper_optimizer`.

        Example:

        >>> optimizer, schedule = TrainingSettings(learning_rate_schedule="budget").optimizer(512)
        >>> schedule.total_steps
        100000
        """
        name = self.learning_rate_schedule
        if name == "paper" or (name == "auto" and self.budget is None):
            paper = paper_optimizer(
                d_model,
                self.warmup_steps,
                self.learning_rate_scale,
                self.accumulation_steps,
                self.ema_momentum,
            )
            return paper, None
        plan = self.budget_plan
        schedule = BudgetSchedule(
            # The paper schedule's peak, reached after at most its warm-up.
            self.learning_rate_scale * (d_model * self.warmup_steps) ** -0.5,
            self.train_steps,
            warmup_fraction=plan.warmup_fraction,
            max_warmup_steps=self.warmup_steps,
            decay=plan.decay,
            accumulation_steps=self.accumulation_steps,
        )
        return adam_optimizer(schedule, self.accumulation_steps, self.ema_momentum), schedule

    @property
    def fine_tunes(self):
        """Whether the settings freeze parts of the model or train LoRA."""
        return bool(self.freeze) or self.lora_rank is not None

    @property
    def keeps_best(self):
        """Whether the run keeps best checkpoints or stops early."""
        return self.keep_best > 0 or self.patience is not None
