"""`TranslationEvaluator`: validation BLEU and chrF while training."""

import contextlib
import time

import keras
import numpy as np
import sacrebleu
import tensorflow as tf

from keras_transformer import _backend
from keras_transformer.training._distribute import broadcast_from_chief
from keras_transformer.training._distribute import is_chief
from keras_transformer.training._distribute import read_int
from keras_transformer.training._keras_internals import moving_averages
from keras_transformer.training.checkpoints import all_finite
from keras_transformer_runtime import validation
from keras_transformer_runtime.runners.runner import Runner

# What `TranslationEvaluator` adds to the logs, in this order.
SCORES = ("val_bleu", "val_chrf")


@contextlib.contextmanager
def averaged_weights_in(model):
    """Puts the weights to evaluate into `model` for the duration of the
    block (`checkpoints.averaged_weights`'s): the optimizer's moving
    averages when it keeps them (`use_ema=True`); otherwise the block runs
    on the weights as they are.
    The trained weights are back afterwards, also after an error."""
    averages = moving_averages(getattr(model, "optimizer", None))
    if not averages:
        yield
        return
    trained = [keras.ops.convert_to_numpy(v) for v in model.trainable_variables]
    for variable, average in zip(model.trainable_variables, averages, strict=True):
        variable.assign(average)
    try:
        yield
    finally:
        for variable, value in zip(model.trainable_variables, trained, strict=True):
            variable.assign(value)


class ValidateOnAverages(keras.callbacks.Callback):
    """Runs `fit`'s validation on the optimizer's moving averages of the
    weights (`use_ema=True`), like `keras.callbacks.SwapEMAWeights`, but
    by copying: the trained weights come back bit for bit (Keras's swap by
    additions changes them in the last bits)."""

    def __init__(self):
        super().__init__()
        self._swapped = None

    def on_test_begin(self, logs=None):
        self._swapped = contextlib.ExitStack()
        self._swapped.enter_context(averaged_weights_in(self.model))

    def on_test_end(self, logs=None):
        if self._swapped is not None:
            self._swapped.close()
            self._swapped = None


class TranslationEvaluator(keras.callbacks.Callback):
    """Translates a validation set during training and adds its sacreBLEU
    (`val_bleu`) and chrF (`val_chrf`) to the epoch logs, where the
    progress bar, TensorBoard, the best checkpoints and early stopping
    (`TrainingSettings.keep_best`) read them.

    An evaluation runs at the end of an epoch (a checkpoint interval of
    `train`) once `every` updates have passed since the last one, and when
    training stops. It translates with `translator`, which must wrap the
    model being trained, so it reads the current weights (the optimizer's
    moving averages instead when it keeps them, `use_ema=True`; called
    outside training, `evaluate` scores the weights as they are); a model
    with NaN or infinite weights is not evaluated. Scores are sacrebleu's
    own `BLEU` and `CHRF` on detokenized text.

    Under a multi-worker strategy only the chief translates and writes;
    the other workers wait and receive its scores, so every worker takes
    the same early-stopping decision. With `log_dir`, the chief also
    writes `bleu` and `chrf` scalars by update step and a table of the
    first `examples` translations (TensorBoard's Text tab).

    Args:
        translator: a `keras_transformer.Translator` of the trained model.
            Greedy search (`beam_size=1`) and a tight length limit
            (`max_extra_length=10`) keep evaluations cheap: the run-on
            outputs of a half-trained model otherwise cost most of the time.
        sources: the validation source sentences.
        references: one reference translation per source sentence.
        every: updates between evaluations; `None` evaluates at every
            epoch end. `train` sets it to `steps_per_checkpoint` when
            unset.
        max_sentences: the first this many sentences are translated.
        batch_size: sentences per translation batch.
        examples: translations shown in TensorBoard at each evaluation.
        log_dir: TensorBoard directory for the scalars and examples (`train`
            sets `model_dir/logs/evaluation` when unset).
        verbose: print a line with the scores at each evaluation, and a
            progress line while translating.
        target_lang: for a multilingual model, each source's target
            language (a list, one per source) or one for all: `val_bleu`
            and `val_chrf` are then the means of each language's scores,
            `max_sentences` is shared equally between the languages (the
            first of each), and `history` has each language's scores too
            (`val_bleu_fr`, ...).

    Attributes:
        history: one dict per evaluation of this run, with the update
            `step`, `val_bleu`, `val_chrf` and the `seconds` it took.
        signatures: sacreBLEU's signatures of both scores, by log name.

    Example:

    >>> translator = Translator(model, tokenizer, beam_size=1, max_extra_length=10)
    >>> evaluator = TranslationEvaluator(translator, valid_sources, valid_references)
    >>> settings = TrainingSettings(keep_best=5, best_monitor="val_bleu")
    >>> train(model, batches, "runs/base", settings, evaluator=evaluator)
    """

    def __init__(
        self,
        translator,
        sources,
        references,
        every=None,
        max_sentences=1000,
        batch_size=64,
        examples=3,
        log_dir=None,
        verbose=1,
        target_lang=None,
    ):
        _backend.require_tensorflow("training.TranslationEvaluator", "it runs a Translator")
        validation.check_positive_int(allow_none=True, every=every)
        validation.check_positive_int(max_sentences=max_sentences, batch_size=batch_size)
        validation.check_non_negative_int(examples=examples)
        if not isinstance(translator, Runner):
            raise ValueError(
                "`translator` must be a keras_transformer_runtime.Runner with "
                "`translate(sentences, batch_size)`, as keras_transformer.Translator is. "
                f"Received: translator={translator!r}"
            )
        sources, references = list(sources), list(references)
        if not sources or len(sources) != len(references):
            raise ValueError(
                "`sources` and `references` must be non-empty and of the same length. "
                f"Received: {len(sources)} sources and {len(references)} references"
            )
        super().__init__()
        self.translator = translator
        self.target_lang = _target_langs(target_lang, len(sources))
        kept = _kept_rows(self.target_lang, len(sources), max_sentences)
        self.sources = [sources[i] for i in kept]
        self.references = [references[i] for i in kept]
        if self.target_lang is not None:
            self.target_lang = [self.target_lang[i] for i in kept]
        self.every = every
        self.batch_size = batch_size
        self.examples = examples
        self.log_dir = log_dir
        self.verbose = verbose
        self.history = []
        self.signatures = {}
        self._last_step = None
        self._writer = None
        self._training = False

    def set_model(self, model):
        translated = self.translator.model
        if translated is not None and translated is not model:
            raise ValueError(
                "The evaluator's translator must wrap the model being trained, so that it "
                "translates with the current weights. Build it with Translator(model, ...)."
            )
        super().set_model(model)

    def on_train_begin(self, logs=None):
        self._last_step = read_int(self.model.optimizer.iterations)
        self._training = True

    def on_epoch_end(self, epoch, logs=None):
        step = read_int(self.model.optimizer.iterations)
        if not self._due(step) or not all_finite(self.model.trainable_weights):
            return
        self._last_step = step
        scores = self.evaluate(step)
        if logs is not None:
            logs.update(scores)

    def on_train_end(self, logs=None):
        self._training = False
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _due(self, step):
        if step == self._last_step:
            return False  # nothing trained since the last evaluation
        if self.every is None or self.model.stop_training:
            return True
        return step // self.every > self._last_step // self.every

    def evaluate(self, step):
        """Translates the validation sentences and scores them now, with
        the model's weights as they are (during training: the moving
        averages if the optimizer keeps them).

        Returns:
            `{"val_bleu": ..., "val_chrf": ...}`, the same on every worker;
            a multilingual evaluation adds each language's on the chief
            (`val_bleu_fr`, ...), which the epoch logs then show.
        """
        start = time.perf_counter()
        strategy = self.model.distribute_strategy
        values = [0.0] * len(SCORES)
        if is_chief(strategy):
            progress = f"evaluating at step {step}" if self.verbose else None
            training = self._training
            with averaged_weights_in(self.model) if training else contextlib.nullcontext():
                # `target_lang` only where asked for: any runner's `translate` works.
                options = {} if self.target_lang is None else {"target_lang": self.target_lang}
                hypotheses = self.translator.translate(
                    self.sources, self.batch_size, progress, **options
                )
            values, by_language = self._score(hypotheses)
            self._write_summaries(step, values, hypotheses)
        else:
            by_language = {}
        values = broadcast_from_chief(strategy, values)
        scores = dict(zip(SCORES, values, strict=True))
        seconds = time.perf_counter() - start
        self.history.append({"step": step, **scores, **by_language, "seconds": seconds})
        if self.verbose:
            each = "".join(
                f"; {name[len('val_bleu_') :]} {value:.2f}"
                for name, value in by_language.items()
                if name.startswith("val_bleu_")
            )
            mean = "mean " if by_language else ""
            print(
                f"step {step}: validation BLEU {mean}{scores['val_bleu']:.2f}{each}, chrF "
                f"{mean}{scores['val_chrf']:.2f} ({len(self.sources)} sentences, {seconds:.1f}s)"
            )
        return {**scores, **by_language}

    def _score(self, hypotheses):
        """`(values, by_language)`: the scores of `SCORES` (each the mean of
        the languages' for a multilingual evaluation), and each language's,
        by name (`{}` for one language)."""
        if self.target_lang is None:
            return self._scores_of(hypotheses, self.references), {}
        by_language = {}
        for code in dict.fromkeys(self.target_lang):
            rows = [i for i, lang in enumerate(self.target_lang) if lang == code]
            found = self._scores_of(
                [hypotheses[i] for i in rows], [self.references[i] for i in rows]
            )
            by_language.update({f"{name}_{code}": v for name, v in zip(SCORES, found, strict=True)})
        values = [
            float(np.mean([v for k, v in by_language.items() if k[: len(name) + 1] == name + "_"]))
            for name in SCORES
        ]
        return values, by_language

    def _scores_of(self, hypotheses, references):
        metrics = {"val_bleu": sacrebleu.BLEU(), "val_chrf": sacrebleu.CHRF()}
        values = [metrics[name].corpus_score(hypotheses, [references]).score for name in SCORES]
        self.signatures = {name: str(metric.get_signature()) for name, metric in metrics.items()}
        return values

    def _write_summaries(self, step, values, hypotheses):
        if not self.log_dir:
            return
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(self.log_dir)
        shown = zip(self.sources, self.references, hypotheses, strict=True)
        rows = [f"| {_cell(s)} | {_cell(r)} | {_cell(h)} |" for s, r, h in shown][: self.examples]
        with self._writer.as_default(step=step):
            tf.summary.scalar("bleu", values[0])
            tf.summary.scalar("chrf", values[1])
            if rows:
                header = "| source | reference | translation |\n| --- | --- | --- |\n"
                tf.summary.text("translations", header + "\n".join(rows))
        self._writer.flush()


def _target_langs(target_lang, count):
    """`target_lang` as a list of one language per source, or `None`."""
    if target_lang is None:
        return None
    if isinstance(target_lang, str):
        return [target_lang] * count
    target_lang = list(target_lang)
    if len(target_lang) != count:
        raise ValueError(
            "`target_lang` must be one language, or a list of one per source. "
            f"Received: {len(target_lang)} languages for {count} sources"
        )
    return target_lang


def _kept_rows(target_lang, count, max_sentences):
    """The rows of `count` evaluated: the first `max_sentences`, or with
    several languages, the first `max_sentences / languages` of each (at
    least one)."""
    if target_lang is None or len(set(target_lang)) == 1:
        return list(range(min(count, max_sentences)))
    share = max(1, max_sentences // len(set(target_lang)))
    taken, kept = {}, []
    for row, code in enumerate(target_lang):
        if taken.get(code, 0) < share:
            taken[code] = taken.get(code, 0) + 1
            kept.append(row)
    return kept


def _cell(text):
    """`text` as one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")
