"""The stages of a `wmt_ende.py` run after training: the weights to
export (an average or the best, by validation BLEU), the final
evaluation, the plots and the SavedModel export."""

import json
import os
import sys

import keras_transformer as kt
from keras_transformer import training
from keras_transformer.training.checkpoints import checkpoint_step
from keras_transformer.training.checkpoints import write_json_atomically

from attention_plots import plot_attention
from curve_plot import plot_validation_curve


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
    step = checkpoint_step(paths[0])
    for evaluation in training.read_evaluations(config.model_dir):
        if evaluation["step"] == step and "val_bleu" in evaluation:
            return {k: v for k, v in evaluation.items() if k.startswith("val_")}
    return None


def _candidate_scores(config, candidates, model, evaluator):
    """Each candidate's validation scores: those training recorded (a
    single checkpoint's), else, with an `evaluator`, scored now as during
    training; candidates without either are left out."""
    scores = {}
    for name, paths in candidates.items():
        recorded = _recorded_score(config, paths)
        if recorded is None and evaluator is not None:
            training.average_checkpoints(model, paths)
            recorded = evaluator.evaluate(step=0)
        if recorded is not None:
            scores[name] = recorded
            if evaluator is not None:
                print(f"weights {name}: validation BLEU {recorded['val_bleu']:.2f}")
    return scores


def chosen_paths(config, weights):
    """The checkpoints of the weights `weights_stage` chose."""
    return _candidates(config)[weights["name"]]


def weights_stage(config, model, data, evaluator):
    """Loads the weights to evaluate and export (--export_weights); with
    `auto`, the candidate with the best validation BLEU, scored by
    training's `evaluator` (its search already traced; a run without one,
    `--eval_every 0` or no validation set, compares the scores training
    recorded). Returns what was chosen and why."""
    candidates = _candidates(config)
    names = {k: [os.path.basename(p) for p in v] for k, v in candidates.items()}
    choice, scores = config.export_weights, {}
    if choice == "auto" and len(candidates) > 1:
        if evaluator is not None:
            evaluator.set_model(model)
            evaluator.verbose = 0
        scores = _candidate_scores(config, candidates, model, evaluator)
    if scores:
        choice = max(scores, key=lambda name: scores[name]["val_bleu"])
        scored_by = (
            f"on {len(evaluator.sources)} sentences (beam {config.eval_beam_size})"
            if evaluator is not None
            else "training recorded (no validation evaluator in this run to score the averages)"
        )
        reason = f"the best validation BLEU {scored_by} of " + ", ".join(
            f"{k} {v['val_bleu']:.2f}" for k, v in scores.items()
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


def plots_stage(config, model, tokenizer, data, hypotheses):
    paths = [plot_validation_curve(training.read_evaluations(config.model_dir), config.model_dir)]
    if "test" in hypotheses:
        source = data.test[0][0]
        target_lang = data.languages_of("test")
        if target_lang:  # the source as the model read it
            source = tokenizer.languages.tagged(source, target_lang[0])
        paths += plot_attention(model, tokenizer, source, hypotheses["test"][0], config.model_dir)
    paths = [path for path in paths if path]
    for path in paths:
        print(f"attention plot: {path}")
    return paths


def export_marker(config, translator, trained, weights):
    """What an export of this run depends on: the weights (the final step
    and the checkpoints), the decoding settings and where it goes."""
    return {
        # Relative to the run: a project directory moved whole keeps its records.
        "export_dir": config.export_dir and _relative(config.export_dir, config.model_dir),
        "step": trained["final_step"],
        "checkpoints": weights["checkpoints"],
        "settings": translator.settings.to_dict(),
    }


def already_exported(marker, recorded, export_dir):
    """The path of the export `recorded` (`export.json`'s content: its
    version in `export_dir`) if it is the export `marker` describes and
    still exists, else `None`."""
    version = recorded.get("version")
    if not version or {k: recorded.get(k) for k in marker} != marker:
        return None
    path = os.path.join(export_dir, version)
    return path if os.path.exists(os.path.join(path, "saved_model.pb")) else None


def _relative(path, model_dir):
    """`path` relative to the run's `model_dir`."""
    return os.path.relpath(os.path.abspath(path), os.path.abspath(model_dir))


def export_stage(config, translator, trained, weights):
    """Exports the chosen weights: the SavedModel into `--export_dir`,
    unless `model_dir/export.json` records an export that still exists of
    the same weights, with the same decoding settings, into the same
    directory; the CTranslate2 export into `--ctranslate2_dir` likewise
    (`ctranslate2_stage`). The SavedModel's path, or `None`."""
    if not (config.export_dir or config.ctranslate2_dir):
        return None
    marker = export_marker(config, translator, trained, weights)
    path = None
    if config.export_dir:
        marker_file = os.path.join(config.model_dir, "export.json")
        recorded = {}
        if os.path.exists(marker_file):
            with open(marker_file) as f:
                recorded = json.load(f)
        path = already_exported(marker, recorded, config.export_dir)
        if path is not None:
            print(f"export: {path} (already exported)")
        else:
            path = kt.export.export_saved_model(translator, config.export_dir)
            version = os.path.relpath(path, config.export_dir)  # "1": the run's own record
            write_json_atomically(marker_file, {"version": version, **marker})
            print(f"export: {path}")
    ctranslate2_stage(config, translator, marker)
    print(f'try it: echo "A man is riding a bike." | {try_it_command(config)}')
    return path


def ctranslate2_stage(config, translator, marker):
    """Writes the int8 CTranslate2 export into `--ctranslate2_dir`, unless
    `model_dir/ctranslate2.json` records one there of the same weights and
    settings (`marker`, the SavedModel's) that still exists; a directory
    of other weights is replaced."""
    if not config.ctranslate2_dir:
        return None
    output = os.path.abspath(config.ctranslate2_dir)
    marker = {**marker, "export_dir": _relative(output, config.model_dir)}
    marker_file = os.path.join(config.model_dir, "ctranslate2.json")
    recorded = {}
    if os.path.exists(marker_file):
        with open(marker_file) as f:
            recorded = json.load(f)
    if recorded == marker and os.path.exists(os.path.join(output, "model.bin")):
        print(f"CTranslate2 export: {config.ctranslate2_dir} (already exported)")
        return config.ctranslate2_dir
    overwrite = recorded.get("export_dir") == marker["export_dir"]  # this run's, other weights
    kt.export.export_ctranslate2(translator, output, quantization="int8", overwrite=overwrite)
    write_json_atomically(marker_file, marker)
    print(f"CTranslate2 export: {config.ctranslate2_dir}")
    return config.ctranslate2_dir


def try_it_command(config):
    """The command that translates with the export, as the run ends by
    printing it (a multilingual model's with its first language)."""
    command = f"kt-translate --model {config.ctranslate2_dir or config.export_dir}"
    if len(config.target_codes) > 1:
        command += f" --target_lang {config.target_codes[0]}"
    return command
