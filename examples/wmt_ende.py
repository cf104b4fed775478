"""The paper's WMT14 English->German run, end to end, or any local corpus.

    # The paper's base model on WMT14 (TFDS downloads and prepares the data):
    python examples/wmt_ende.py --preset base --export_dir exports/ende

    # Any parallel corpus, offline (plain or .gz, one sentence a line):
    python examples/wmt_ende.py --preset small --model_dir runs/m30k \\
        --train_src data/multi30k/train.en.gz --train_tgt data/multi30k/train.de.gz \\
        --valid_src data/multi30k/val.en.gz --valid_tgt data/multi30k/val.de.gz \\
        --test_src data/multi30k/test_2016_flickr.en.gz \\
        --test_ref data/multi30k/test_2016_flickr.de.gz

Stages, each skipped when already done in `--model_dir` (rerun the same
command after a crash and it continues; after completion it only reports):
data -> shared SentencePiece vocabulary (`spm.model`) -> training with the
paper's recipe (checkpoints; resumes), scoring validation BLEU and chrF
every checkpoint, keeping the best checkpoints and optionally stopping
early -> the weights to export: the paper's average of the last
checkpoints, the best checkpoint or the average of the best, chosen by
validation BLEU -> beam search on the valid and test sets -> sacreBLEU,
chrF and the paper's tokenized, compound-split BLEU -> attention plots and
the validation curve -> SavedModel for TF Serving -> a summary table.
Every setting is a flag below; a preset sets several at once, and a flag
overrides its preset.
"""

import contextlib
import dataclasses
import json
import math
import os
import socket
import sys
import time

# When the command started: --budget_minutes counts from here, so that the
# seconds spent importing TensorFlow are inside the budget too.
PROCESS_STARTED = time.time()

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_transformer as kt  # noqa: E402
from keras_transformer import training  # noqa: E402

from attention_plots import plot_attention  # noqa: E402
from bleu import bleu_scores  # noqa: E402
from curve_plot import plot_validation_curve  # noqa: E402
from wmt_config import parse_config  # noqa: E402

TFDS_HOST = ("storage.googleapis.com", 443)
# What the stages after training cost, for the time they are reserved
# under --budget_minutes, against a greedy validation evaluation's time per
# sentence (Multi30k, the small preset, 2-core Xeon, bf16: 13.8 ms): beam
# k with the final length limit takes about `beam_cost(k)` times as long
# per sentence (beam 4: 95 ms, 6.9x); before the first evaluation,
# GREEDY_SECONDS_PER_SENTENCE stands in for it. The export and the plots
# take about EXPORT_SECONDS (18 s there).
GREEDY_SECONDS_PER_SENTENCE = 0.02
EXPORT_SECONDS = 45.0
# The most of the time left at the start of training that the stages after
# it may reserve. An early evaluation of a barely trained model (outputs
# that run on to the length limit, the first call's tracing) can predict
# more than the whole budget, which would stop training after one
# evaluation (9-minute budget: step 201 of ~1,000, test BLEU 3.6).
MAX_RESERVE_FRACTION = 0.4


def beam_cost(beam_size):
    """Final-evaluation time per sentence against a greedy validation
    evaluation's (measured: 6.9 at beam 4)."""
    return 1.2 if beam_size == 1 else 1.75 * beam_size


class Stopwatch:
    """The wall time of each stage, and what is left of --budget_minutes."""

    def __init__(self, budget_minutes=None, started=None):
        now = time.time()
        self.started = now if started is None else started
        self.budget = None if budget_minutes is None else 60.0 * budget_minutes
        # Python and TensorFlow's imports, before the first stage.
        self.seconds = {"startup": now - self.started}

    @contextlib.contextmanager
    def stage(self, name):
        start = time.time()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.time() - start

    def left(self):
        """Seconds left of the budget (`None` without one)."""
        if self.budget is None:
            return None
        return self.budget - (time.time() - self.started)


# Stages.


@dataclasses.dataclass
class Data:
    """The training pairs, and the valid and test sets as `(sources,
    references)` lists (`valid` may be `None`)."""

    train: object
    valid: tuple | None
    test: tuple


def _decode(line, where):
    """A line of bytes as text; invalid UTF-8 is replaced and reported."""
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        print(f"warning: {where}: invalid UTF-8 replaced", file=sys.stderr)
        return line.decode("utf-8", errors="replace")


def _as_lists(pairs, limit, names):
    """The first `limit` pairs as `(sources, references)` lists; `names`
    name the two sides in warnings (file names, or the TFDS split)."""
    sources, references = [], []
    for number, (source, reference) in enumerate(pairs.take(limit or -1).as_numpy_iterator(), 1):
        sources.append(_decode(source, f"{names[0]}:{number}"))
        references.append(_decode(reference, f"{names[1]}:{number}"))
    return sources, references


def _tfds_pairs(config, split):
    """TFDS pairs; downloads when the data is not prepared and the network
    is there, else stops with the local-files advice."""
    keys = (config.source_lang, config.target_lang)
    load = lambda download: training.text_pairs_from_tfds(  # noqa: E731
        config.tfds_name, split, *keys, data_dir=config.tfds_data_dir, download=download
    )
    try:
        return load(download=False)
    except FileNotFoundError:
        try:
            socket.create_connection(TFDS_HOST, timeout=5).close()
        except OSError:
            sys.exit(
                f"TFDS data set {config.tfds_name} is not prepared and the network is "
                "unreachable.\nPass local parallel files instead: --train_src --train_tgt "
                "[--valid_src --valid_tgt] --test_src --test_ref (plain or .gz, one "
                "sentence a line)."
            )
        return load(download=True)


def data_stage(config):
    limit = config.max_eval_sentences
    if config.data_source != "local files":
        return Data(
            train=_tfds_pairs(config, "train"),
            valid=_as_lists(_tfds_pairs(config, "validation"), limit, ("validation",) * 2),
            test=_as_lists(_tfds_pairs(config, "test"), limit, ("test",) * 2),
        )
    valid = None
    if config.valid_src and config.valid_tgt:
        files = (config.valid_src, config.valid_tgt)
        valid = _as_lists(training.text_pairs_from_files(*files), limit, files)
    return Data(
        train=training.text_pairs_from_files(config.train_src, config.train_tgt),
        valid=valid,
        test=_as_lists(
            training.text_pairs_from_files(config.test_src, config.test_ref),
            limit,
            (config.test_src, config.test_ref),
        ),
    )


def _write_json(path, value, **options):
    """Writes JSON through a temporary file and a rename: a crash leaves
    the old file or the new one, never half of one."""
    with open(f"{path}.tmp", "w") as f:
        json.dump(value, f, **options)
    os.replace(f"{path}.tmp", path)


def start_run(config):
    """Creates the run directory, or checks a rerun's settings against the
    stored ones: a changed model or vocabulary is refused, anything else
    (a larger --train_steps, other evaluation settings) is reported."""
    os.makedirs(config.model_dir, exist_ok=True)
    path = os.path.join(config.model_dir, "config.json")
    current = config.to_json()
    if os.path.exists(path):
        with open(path) as f:
            stored = json.load(f)
        changed = [k for k in sorted(current) if stored.get(k, current[k]) != current[k]]
        described = [f"{k}: {stored[k]!r} -> {current[k]!r}" for k in changed]
        frozen_keys = config.frozen_settings()
        frozen = [d for k, d in zip(changed, described, strict=True) if k in frozen_keys]
        if frozen:
            sys.exit(
                f"{config.model_dir} holds a run with another model or vocabulary ("
                + "; ".join(frozen)
                + "). Use the stored settings, or another --model_dir."
            )
        if changed:
            print("settings changed since the last run:", "; ".join(described))
    _write_json(path, current, indent=2, sort_keys=True)
    print("configuration:", json.dumps(current, sort_keys=True))
    keras.utils.set_random_seed(config.seed)


def tokenizer_stage(config, train_pairs):
    path = os.path.join(config.model_dir, "spm.model")
    if os.path.exists(path):
        print(f"tokenizer: {path} (already trained)")
        return kt.tokenization.SentencePieceTokenizer.from_file(path)
    start = time.time()
    batches = train_pairs.take(config.tokenizer_sentences).batch(4096).as_numpy_iterator()
    sample = (
        (s.decode("utf-8", errors="replace"), t.decode("utf-8", errors="replace"))
        for sources, targets in batches  # batched: per pair, reading is the slow part
        for s, t in zip(sources, targets, strict=True)
    )
    tokenizer = kt.tokenization.train_sentencepiece(sample, config.vocab_size, seed=config.seed)
    tokenizer.save(path + ".tmp")
    os.replace(path + ".tmp", path)
    print(f"tokenizer: {tokenizer.vocab_size} pieces in {time.time() - start:.0f}s -> {path}")
    return tokenizer


def model_stage(config, tokenizer):
    """The model, created under the chosen strategy."""
    with training.get_strategy(config.strategy).scope():
        return kt.Transformer.from_preset(
            config.model,
            vocab_size=tokenizer.vocab_size,
            pad_id=tokenizer.pad_id,
            dtype=training.dtype_policy(config.mixed_precision),
            seed=config.seed,
            **config.model_arguments(),
        )


def _finished(trained, config):
    """Whether an earlier run's training (`training_done.json`) is what
    this one asks for: all of --train_steps, or the same --train_steps
    stopped by the time budget or by early stopping with the same
    patience."""
    if trained["final_step"] >= config.train_steps:
        return True
    if trained.get("stopped_early"):
        return trained.get("patience") == config.early_stopping_patience
    return bool(trained.get("out_of_time")) and trained.get("train_steps") == config.train_steps


def _translator(config, model, tokenizer, beam_size, max_extra_length, jit_compile=False):
    """A `Translator` with the run's length penalty."""
    return kt.Translator(
        model,
        tokenizer,
        beam_size=beam_size,
        alpha=config.alpha,
        max_extra_length=max_extra_length,
        jit_compile=jit_compile,
    )


def _evaluator(config, model, tokenizer, valid):
    """The validation BLEU evaluator of training, if there is a valid set
    and --eval_every is not 0. Its length limit is tighter than the final
    evaluation's: a half-trained model's run-on hypotheses would otherwise
    cost most of the time (Multi30k, step 647: 13 s instead of 34 s for the
    same BLEU within 0.04), and it uses XLA where that pays (GPUs)."""
    if not valid or not valid[0] or not config.eval_every:
        return None
    translator = _translator(
        config,
        model,
        tokenizer,
        config.eval_beam_size,
        config.eval_max_extra_length,
        jit_compile=training.recommended_jit_compile(),
    )
    return training.TranslationEvaluator(
        translator,
        *valid,
        every=config.eval_every,
        max_sentences=config.eval_sentences,
        batch_size=config.eval_batch_size,
    )


def _after_training_seconds(config, evaluator, data):
    """The estimated wall time of the stages after training, and of the
    validation evaluation that ends it: scoring the candidate weights (a
    new evaluator traces the search again), beam search on the valid and
    test sets, the plots and the export, from the last validation
    evaluation's time per sentence (a guess before the first)."""
    per_sentence, tracing = GREEDY_SECONDS_PER_SENTENCE, 0.0
    if evaluator is not None and evaluator.history:
        per_sentence = evaluator.history[-1]["seconds"] / max(1, len(evaluator.sources))
        # The first evaluation also traced the search; a new evaluator does again.
        tracing = max(0.0, evaluator.history[0]["seconds"] - evaluator.history[-1]["seconds"])
    sentences = len(data.test[0]) + (len(data.valid[0]) if data.valid else 0)
    seconds = sentences * per_sentence * beam_cost(config.beam_size)
    if evaluator is not None:
        validation = len(evaluator.sources) * per_sentence
        seconds += validation  # the last checkpoint's, when training stops
        if config.export_weights == "auto":
            seconds += tracing + 2 * validation  # two averages scored
    return 1.1 * seconds + (EXPORT_SECONDS if config.export_dir else 10.0)


def capped_reserve(estimate, most, beyond=0.0):
    """The reserve for the stages after training, inside training's time
    limit: `estimate`, but at most `most` seconds, so that training keeps
    the rest of the budget; less `beyond`, the part of the budget that lies
    past training's limit anyway (when --max_train_minutes ends training
    before --budget_minutes would)."""
    return max(0.0, min(estimate, most) - beyond)


def _training_seconds(config, stopwatch):
    """This run's training time limit: --max_train_minutes, and what is
    left of --budget_minutes (the stages after training are reserved
    within `train`)."""
    limits = [60.0 * config.max_train_minutes] if config.max_train_minutes else []
    if stopwatch.budget is not None:
        left = stopwatch.left()
        if left <= 0:
            sys.exit(
                f"--budget_minutes {config.budget_minutes}: no time left for training after "
                f"{stopwatch.budget - left:.0f} s of the stages before it."
            )
        limits.append(left)
    return min(limits) if limits else None


class ReserveForLaterStages(keras.callbacks.Callback):
    """Sets `budget.reserve_seconds` to what the stages after training will
    cost (`estimate()`, capped by `capped_reserve` with `most` and
    `beyond`), now and after every checkpoint interval: each validation
    evaluation says more of what translating costs."""

    def __init__(self, budget, estimate, most, beyond):
        super().__init__()
        self.budget, self.estimate, self.most, self.beyond = budget, estimate, most, beyond
        self.update()

    def update(self):
        self.budget.reserve_seconds = capped_reserve(self.estimate(), self.most, self.beyond)

    def on_epoch_end(self, epoch, logs=None):
        self.update()


def training_budget(config, stopwatch, later_stages):
    """The `TimeBudget` of training and the callbacks that keep its reserve
    (`later_stages()` estimates the seconds of the stages after it): `(None,
    [])` without a time limit, unless the budget schedule is asked for,
    which then ends at --train_steps."""
    limit = _training_seconds(config, stopwatch)
    if limit is None and config.learning_rate_schedule != "budget":
        return None, []
    budget = training.TimeBudget(
        math.inf if limit is None else limit,
        warmup_fraction=config.warmup_fraction,
        averaging_checkpoints=config.average_last,
        averaging_fraction=config.averaging_fraction,
    )
    if stopwatch.budget is None:
        return budget, []
    left = stopwatch.left()
    beyond = max(0.0, left - limit)  # the budget past --max_train_minutes
    return budget, [
        ReserveForLaterStages(budget, later_stages, MAX_RESERVE_FRACTION * left, beyond)
    ]


def training_stage(config, model, tokenizer, data, stopwatch):
    """Trains, resumes, or continues to a larger --train_steps; returns what
    `training_done.json` records."""
    train_pairs, valid = data.train, data.valid
    done_marker = os.path.join(config.model_dir, "training_done.json")
    if os.path.exists(done_marker):
        with open(done_marker) as f:
            trained = json.load(f)
        if _finished(trained, config):
            print(f"training: already done ({trained['final_step']} steps)")
            return trained
        print(f"training: continuing from step {trained['final_step']} to {config.train_steps}")
    replicas = model.distribute_strategy.num_replicas_in_sync
    accumulation = max(1, math.ceil(config.update_tokens / (config.batch_tokens * replicas)))
    print(
        f"model: {model.count_params():,} weights, {replicas} replica(s), {accumulation} "
        f"micro-batch(es) of {config.batch_tokens} tokens per replica per update"
    )

    def train_batches(input_context):
        return training.make_batches(
            train_pairs,
            tokenizer,
            batch_tokens=config.batch_tokens * replicas,
            max_length=config.max_length,
            input_context=input_context,
            vocab_size=tokenizer.vocab_size,
            sampling_alpha=config.sampling_alpha,
            # Tokenize once (unless every pass samples a new segmentation).
            cache_ids=config.sampling_alpha is None,
            repeat=True,  # no part-filled batches where a pass ends, and (so)
            # buckets by each side's length: neither pads to the other's
        )

    evaluator = _evaluator(config, model, tokenizer, valid)
    best = None
    if evaluator is not None and config.keep_best != "none":
        best = training.BestCheckpoints(
            config.keep_best, keep=config.average_last, patience=config.early_stopping_patience
        )

    def later_stages():
        return _after_training_seconds(config, evaluator, data)

    budget, callbacks = training_budget(config, stopwatch, later_stages)
    result = training.train(
        model,
        train_batches,
        config.model_dir,
        train_steps=config.train_steps,
        steps_per_checkpoint=config.steps_per_checkpoint,
        keep_checkpoints=config.keep_checkpoints,
        warmup_steps=config.warmup_steps,
        learning_rate_scale=config.learning_rate_scale,
        accumulation_steps=accumulation,
        label_smoothing=config.label_smoothing,
        ema_momentum=config.ema_momentum,
        learning_rate_schedule=config.learning_rate_schedule,
        budget=budget,
        evaluator=evaluator,
        best=best,
        tokenizer=tokenizer,
        callbacks=callbacks,
        verbose=2,
    )
    if result.initial_step:
        print(f"training: resumed from step {result.initial_step}")
    evaluation_seconds = sum(e["seconds"] for e in evaluator.history) if evaluator else 0.0
    # Target tokens over the wall time of training without its evaluations
    # (checkpoints, tracing and the input pipeline included).
    tokens = float(np.sum(result.history.get("tokens") or [0.0]))
    trained = {
        "initial_step": result.initial_step,
        "final_step": result.final_step,
        "seconds": result.seconds,
        "evaluation_seconds": evaluation_seconds,
        "tokens_per_sec": tokens / max(result.seconds - evaluation_seconds, 1e-9),
        "budget": result.budget,
        "out_of_time": result.out_of_time,
        "stopped_early": result.stopped_early,
        "train_steps": config.train_steps,
        "patience": config.early_stopping_patience,
        "evaluations": result.evaluations,
        "signatures": evaluator.signatures if evaluator else {},
    }
    _write_json(done_marker, trained)
    return trained


def _candidates(config):
    """The weights the run can export, by name: checkpoint paths to average.
    The average comes from the last part of a time budget (never from its
    warm-up), or else from the last checkpoints; sets of the same
    checkpoints appear once."""
    candidates = {"average_last": training.averaging_checkpoint_paths(
        config.model_dir, config.average_last
    )}  # fmt: skip
    best = training.best_checkpoint_paths(config.model_dir)
    if best:
        candidates["best"] = best[:1]
        if len(best) > 1:
            candidates["average_best"] = best[: config.average_last]
    unique = {}
    for name, paths in candidates.items():
        if sorted(paths) not in [sorted(p) for p in unique.values()]:
            unique[name] = paths
    return unique


def _recorded_score(config, paths):
    """The validation scores training recorded for the weights of a single
    checkpoint (the same evaluation, so not repeated), or `None`."""
    if len(paths) != 1:
        return None
    step = training.checkpoint_step(paths[0])
    for evaluation in training.read_evaluations(config.model_dir):
        if evaluation["step"] == step and "val_bleu" in evaluation:
            return {k: v for k, v in evaluation.items() if k.startswith("val_")}
    return None


def weights_stage(config, model, tokenizer, data):
    """Loads the weights to evaluate and export (--export_weights); with
    `auto`, the candidate with the best validation BLEU, scored as during
    training. Returns what was chosen and why."""
    candidates = _candidates(config)
    names = {k: [os.path.basename(p) for p in v] for k, v in candidates.items()}
    choice, scores = config.export_weights, {}
    if choice == "auto" and len(candidates) > 1:
        evaluator = _evaluator(config, model, tokenizer, data.valid)
        evaluator.set_model(model)
        evaluator.verbose = 0
        for name, paths in candidates.items():
            recorded = _recorded_score(config, paths)
            if recorded is None:
                training.average_checkpoints(model, paths)
                recorded = evaluator.evaluate(step=0)
            scores[name] = recorded
            print(f"weights {name}: validation BLEU {scores[name]['val_bleu']:.2f}")
        choice = max(scores, key=lambda name: scores[name]["val_bleu"])
        sentences = len(evaluator.sources)
        reason = (
            f"the best validation BLEU on {sentences} sentences (beam {config.eval_beam_size}) of "
            + ", ".join(f"{k} {v['val_bleu']:.2f}" for k, v in scores.items())
        )
    elif choice == "auto":
        choice, reason = "average_last", "no validation scores: the paper's average"
    elif choice not in candidates:
        sys.exit(
            f"--export_weights {choice}: the run has no best checkpoints (they need a "
            "validation set and --keep_best). Use --export_weights average_last."
        )
    else:
        reason = "--export_weights"
    training.average_checkpoints(model, candidates[choice])
    print(f"weights: {choice} of {', '.join(names[choice])} ({reason})")
    return {
        "name": choice,
        "checkpoints": names[choice],
        "reason": reason,
        "candidates": {k: {"checkpoints": v, **scores.get(k, {})} for k, v in names.items()},
    }


def evaluation_stage(config, translator, data):
    """Translates the valid and test sets; returns `(scores, hypotheses)`,
    both keyed by set name."""
    scores, hypotheses = {}, {}
    for name, split in (("valid", data.valid), ("test", data.test)):
        if not split or not split[0]:
            continue
        sources, references = split
        hypotheses[name] = translator.translate(
            sources, config.eval_batch_size, progress=f"translating {name}"
        )
        # One line per sentence, whatever a translation holds.
        lines = [" ".join(h.splitlines()) for h in hypotheses[name]]
        with open(os.path.join(config.model_dir, f"hypotheses.{name}.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
        scores[name] = bleu_scores(hypotheses[name], references)
        result = scores[name]
        print(
            f"{name}: sacreBLEU {result['sacrebleu']:.2f} ({result['signature']}); chrF "
            f"{result['chrf']:.2f} ({result['chrf_signature']}); tokenized compound-split BLEU "
            f"(the paper's measure) {result['tokenized_compound_split_bleu']:.2f}"
        )
    return scores, hypotheses


def plots_stage(config, model, tokenizer, data, hypotheses):
    paths = [plot_validation_curve(training.read_evaluations(config.model_dir), config.model_dir)]
    if "test" in hypotheses:
        paths += plot_attention(
            model, tokenizer, data.test[0][0], hypotheses["test"][0], config.model_dir
        )
    paths = [path for path in paths if path]
    for path in paths:
        print(f"attention plot: {path}")
    return paths


def export_stage(config, translator, trained, weights):
    """Exports the chosen weights, unless the export of these weights (the
    same checkpoints) exists."""
    if not config.export_dir:
        return None
    marker = os.path.join(config.model_dir, "export.json")
    exported = {}
    if os.path.exists(marker):
        with open(marker) as f:
            exported = json.load(f)
    same = exported.get("step", trained["final_step"]) == trained["final_step"]
    if (
        exported
        and same
        and exported.get("checkpoints", weights["checkpoints"]) == weights["checkpoints"]
    ):
        path = exported["path"]
        print(f"export: {path} (already exported)")
    else:
        path = kt.export.export_saved_model(translator, config.export_dir)
        step, checkpoints = trained["final_step"], weights["checkpoints"]
        _write_json(marker, {"path": path, "step": step, "checkpoints": checkpoints})
        print(f"export: {path}")
    print(
        'try it: echo "A man is riding a bike." | python -m keras_transformer.translate '
        f"--export_dir {config.export_dir}"
    )
    return path


def summary_stage(config, run):
    """Prints the summary table and writes `summary.md` and `summary.json`."""
    trained, scores = run["training"], run["results"]
    steps = f"{trained['final_step']:,}"
    rows = [
        ("data", config.data_source),
        ("test / valid sentences", f"{run['test_sentences']} / {run['valid_sentences']}"),
        ("vocabulary", f"{run['vocabulary']:,} shared SentencePiece pieces"),
        ("parameters", f"{run['parameters']:,}"),
        ("precision", run.get("precision", "float32")),
        ("steps", steps + (" (time budget reached)" if trained.get("out_of_time") else "")),
        ("training wall time", f"{trained.get('seconds', 0) / 60:.1f} min (this run of training)"),
        ("training tokens/s", f"{trained.get('tokens_per_sec', 0):,.0f} target tokens/s"),
    ]
    evaluations = [e for e in trained.get("evaluations", []) if "val_bleu" in e]
    if evaluations:
        evaluation_seconds = trained.get("evaluation_seconds", 0.0)
        share = evaluation_seconds / max(trained.get("seconds", 0.0) - evaluation_seconds, 1e-9)
        curve = ", ".join(f"{e['step']}: {e['val_bleu']:.1f}" for e in evaluations)
        rows += [
            ("validation BLEU by step", curve),
            ("evaluation time", f"{evaluation_seconds:.0f} s, {100 * share:.1f}% of training"),
        ]
    budget = trained.get("budget")
    if budget:
        rows.append(
            (
                "schedule over the budget",
                f"warm-up {budget['warmup_steps']:,} updates, linear decay to zero at "
                f"{budget['total_steps']:,}; averaging window from update "
                f"{budget['averaging_from']:,}",
            )
        )
    if trained.get("stopped_early"):
        rows.append(("early stopping", f"stopped at step {trained['final_step']:,}"))
    weights = run["weights"]
    rows.append(("exported weights", f"{weights['name']}: {', '.join(weights['checkpoints'])}"))
    rows.append(("chosen because", weights["reason"]))
    for name, result in scores.items():
        rows.append((f"{name} sacreBLEU", f"{result['sacrebleu']:.2f}"))
        rows.append((f"{name} chrF", f"{result['chrf']:.2f}"))
        compound_split = result["tokenized_compound_split_bleu"]
        rows.append((f"{name} tokenized compound-split BLEU", f"{compound_split:.2f}"))
    stages = run.get("stage_seconds", {})
    if stages:
        by_stage = ", ".join(f"{name} {seconds / 60:.1f}" for name, seconds in stages.items())
        rows.append(("wall time by stage (min)", by_stage))
    budget_minutes = config.budget_minutes
    within = f" (budget {budget_minutes:g} min)" if budget_minutes else ""
    rows.append(("total wall time", f"{run['minutes']:.1f} min" + within))
    table = "| | |\n| --- | --- |\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)
    print("\n" + table)
    with open(os.path.join(config.model_dir, "summary.md"), "w") as f:
        f.write(table + "\n")
    summary = {"config": config.to_json(), **run}
    _write_json(os.path.join(config.model_dir, "summary.json"), summary, indent=2)


def main(argv=None, started=None):
    """Runs the command; `started` (default: now) is when its budget began."""
    config = parse_config(argv, __doc__)
    stopwatch = Stopwatch(config.budget_minutes, started)
    with stopwatch.stage("data"):
        data = data_stage(config)
        start_run(config)
    with stopwatch.stage("vocabulary"):
        tokenizer = tokenizer_stage(config, data.train)
    model = model_stage(config, tokenizer)
    with stopwatch.stage("training"):
        trained = training_stage(config, model, tokenizer, data, stopwatch)
    if not training.is_chief(model.distribute_strategy):
        print("training done; the chief evaluates and exports")
        return {}
    with stopwatch.stage("averaging"):
        weights = weights_stage(config, model, tokenizer, data)
    translator = _translator(config, model, tokenizer, config.beam_size, config.max_extra_length)
    with stopwatch.stage("evaluation"):
        scores, hypotheses = evaluation_stage(config, translator, data)
    with stopwatch.stage("plots"):
        plots_stage(config, model, tokenizer, data, hypotheses)
    with stopwatch.stage("export"):
        export_path = export_stage(config, translator, trained, weights)
    summary_stage(
        config,
        {
            "training": trained,
            "results": scores,
            "export": export_path,
            "test_sentences": len(data.test[0]),
            "valid_sentences": len(data.valid[0]) if data.valid else 0,
            "vocabulary": tokenizer.vocab_size,
            "parameters": model.count_params(),
            "precision": model.dtype_policy.name,
            "weights": weights,
            "stage_seconds": stopwatch.seconds,
            "minutes": (time.time() - stopwatch.started) / 60,
        },
    )
    return scores


if __name__ == "__main__":
    main(started=PROCESS_STARTED)
