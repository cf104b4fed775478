"""The stages of a `wmt_ende.py` run up to its trained weights: the run
directory and its settings, the shared SentencePiece vocabulary, the model,
and training (which resumes after a crash)."""

import dataclasses
import json
import math
import os
import sys
import time

import keras
import numpy as np
from wmt_dropout import dropout_by_passes

import keras_transformer as kt
from keras_transformer import training
from keras_transformer.training.checkpoints import write_json_atomically
from keras_transformer_runtime.text import languages

from wmt_budget import after_training_seconds
from wmt_budget import budget_plan
from wmt_budget import training_budget
from wmt_config import STATIC_SHAPES
from wmt_config import model_arguments_of
from wmt_data import word_links
from wmt_synthetic import user_symbols


def start_run(config, mixing_weights=None):
    """Creates the run directory, or checks a rerun's settings against the
    stored ones: a changed model or vocabulary is refused, anything else
    (a larger --train_steps, other evaluation settings) is reported. A
    multilingual run records its corpora's `mixing_weights` with them."""
    os.makedirs(config.model_dir, exist_ok=True)
    path = os.path.join(config.model_dir, "config.json")
    current = config.to_json()
    if mixing_weights:
        current["mixing_weights"] = mixing_weights
    if os.path.exists(path):
        with open(path) as f:
            stored = json.load(f)
        if "target_lang" in stored:  # a run recorded before --target_langs
            stored.setdefault("target_langs", stored.pop("target_lang"))
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
    write_json_atomically(path, current)
    print("configuration:", json.dumps(current, sort_keys=True))
    keras.utils.set_random_seed(config.seed)


def is_marian_directory(path):
    """Whether `path` is a Hugging Face Marian (OPUS-MT) model directory."""
    return os.path.exists(os.path.join(path, "vocab.json")) and os.path.exists(
        os.path.join(path, "source.spm")
    )


def tokenizer_stage(config, train_pairs):
    if config.init_from:
        return _kept_tokenizer(config)
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
    # A multilingual run's tags, and <BT>, are single pieces (sources hold them).
    tags = languages.tags(config.target_codes) if config.multilingual else ()
    tokenizer = kt.tokenization.train_sentencepiece(
        sample,
        config.vocab_size,
        seed=config.seed,
        user_defined_symbols=(*tags, *user_symbols(config)),
    )
    tokenizer.save(path + ".tmp")
    os.replace(path + ".tmp", path)
    print(f"tokenizer: {tokenizer.vocab_size} pieces in {time.time() - start:.0f}s -> {path}")
    return tokenizer


def _kept_tokenizer(config):
    """--init_from's tokenizer, copied into --model_dir (fine-tuning keeps
    the vocabulary of the model it starts from)."""
    source = config.init_from
    if is_marian_directory(source):
        if not is_marian_directory(config.model_dir):
            kt.tokenization.MarianTokenizer.from_directory(source).save(config.model_dir)
        tokenizer = kt.tokenization.MarianTokenizer.from_directory(config.model_dir)
    else:
        path = os.path.join(config.model_dir, "spm.model")
        if not os.path.exists(path):
            spm = os.path.join(source, "spm.model")
            if not os.path.exists(spm):
                sys.exit(
                    f"--init_from {source}: neither a Marian directory (vocab.json, source.spm) "
                    "nor a run's --model_dir (spm.model)."
                )
            kt.tokenization.SentencePieceTokenizer.from_file(spm).save(path)
        tokenizer = kt.tokenization.SentencePieceTokenizer.from_file(path)
    print(f"tokenizer: {source}'s, {tokenizer.vocab_size} pieces (kept for fine-tuning)")
    return tokenizer


def model_stage(config, tokenizer):
    """The model, created under the chosen strategy: a new one, or
    --init_from's with its weights, prepared for fine-tuning (--freeze,
    --lora_rank)."""
    if config.init_from:
        with training.get_strategy(config.strategy).scope():
            model = _initial_model(config, tokenizer)
            setup = training.prepare_fine_tuning(
                model, config.freeze or (), config.lora_rank, config.lora_alpha
            )
        print(f"fine-tuning {config.init_from}: {setup}")
        record = {"init_from": config.init_from, **dataclasses.asdict(setup)}
        write_json_atomically(os.path.join(config.model_dir, "fine_tuning.json"), record)
        return model
    with training.get_strategy(config.strategy).scope():
        return _new_model(config, tokenizer, config.model, config.model_arguments())


def _new_model(config, tokenizer, preset, arguments):
    """A new `Transformer` of the model `preset` with `arguments` for
    `tokenizer`'s vocabulary, in the run's dtype policy and seed."""
    return kt.Transformer.from_preset(
        preset,
        vocab_size=tokenizer.vocab_size,
        pad_id=tokenizer.pad_id,
        dtype=training.dtype_policy(config.mixed_precision),
        seed=config.seed,
        **arguments,
    )


def _initial_model(config, tokenizer):
    """--init_from's model and weights: a Marian model imported, or a
    finished run's architecture with the weights it evaluated and exported
    (its `summary.json`)."""
    if is_marian_directory(config.init_from):
        dtype = training.dtype_policy(config.mixed_precision)
        return kt.pretrained.load_marian(config.init_from, dtype=dtype).model
    path = os.path.join(config.init_from, "summary.json")
    if not os.path.exists(path):
        sys.exit(f"--init_from {config.init_from}: no summary.json; the run has not finished.")
    with open(path) as f:
        summary = json.load(f)
    stored = summary["config"]
    model = _new_model(config, tokenizer, stored["model"], model_arguments_of(stored))
    # Where a run keeps checkpoints: the best, the averaging ones of a time
    # budget, the regular rotation.
    folders = ("best", "averaging", "checkpoints")
    names, paths = summary["weights"]["checkpoints"], []
    for name in names:
        found = [
            os.path.join(config.init_from, folder, name)
            for folder in folders
            if os.path.exists(os.path.join(config.init_from, folder, name + ".index"))
        ]
        if not found:
            sys.exit(
                f"--init_from {config.init_from}: the checkpoint {name} of its exported weights "
                f"is in none of {', '.join(folders)}."
            )
        paths.append(found[0])
    training.average_checkpoints(model, paths)
    print(f"weights: {config.init_from}'s {summary['weights']['name']} ({', '.join(names)})")
    return model


def merged_lora_model(config, model, tokenizer, data, sentences=64):
    """The LoRA model merged into the plain architecture
    (`training.merge_lora`), checked: the greedy translations of the first
    `sentences` validation (else test) sources must not change in float32
    (the command stops otherwise); under bf16 or fp16 a few near-ties may
    flip, since the LoRA model adds its update to the rounded kernel at
    every call and the merged kernel is rounded once. The count is printed
    and recorded in `fine_tuning.json`."""
    merged = training.merge_lora(model)
    split = data.valid if data.valid and data.valid[0] else data.test
    sources = list(split[0][:sentences])
    before, after = (
        translator_for(config, m, tokenizer, 1, config.eval_max_extra_length).translate(sources)
        for m in (model, merged)
    )
    same = sum(a == b for a, b in zip(before, after, strict=True))
    print(f"LoRA merged: {same}/{len(sources)} greedy translations unchanged")
    path = os.path.join(config.model_dir, "fine_tuning.json")
    with open(path) as f:
        record = json.load(f)
    record["merged_unchanged"] = f"{same}/{len(sources)} ({merged.dtype_policy.compute_dtype})"
    write_json_atomically(path, record)
    compute_dtype = merged.dtype_policy.compute_dtype
    if same != len(sources):
        if compute_dtype == "float32":
            sys.exit("LoRA merge changed translations in float32: not exporting.")
        print(
            f"  ({compute_dtype}: the merged kernels are rounded once, the LoRA model's at every "
            "call, so near-ties can flip)"
        )
    return merged


# The --help sections of the flags that are `TrainingSettings` fields.
TRAINING_GROUPS = ("training", "fine-tuning")


def training_settings(config, accumulation, budget, evaluated, dropout_by_passes=None):
    """The run's `TrainingSettings`, built once from its flags: the
    training and fine-tuning flags of the settings' names (--train_steps,
    --label_smoothing, --lora_rank, ...), then `accumulation` micro-batches
    per update, the `budget` clock (or None), the best --average_last
    checkpoints by --keep_best when validation BLEU is `evaluated`, and
    the `DropoutByPasses` of --dropout_by_passes (`dropout_by_passes`)."""
    names = training.TrainingSettings.names()
    same = {
        field.name: getattr(config, field.name)
        for field in dataclasses.fields(config)
        if field.metadata["group"] in TRAINING_GROUPS and field.name in names
    }
    keeps_best = evaluated and config.keep_best != "none"
    best = {}
    if keeps_best:
        best = dict(
            keep_best=config.average_last,
            best_monitor=config.keep_best,
            patience=config.early_stopping_patience,
        )
    return training.TrainingSettings(
        **{**same, "freeze": config.freeze or ()},
        accumulation_steps=accumulation,
        precision=config.mixed_precision,
        budget=budget,
        budget_plan=budget_plan(config),
        dropout_by_passes=dropout_by_passes,
        verbose=2,
        **best,
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


def translator_for(config, model, tokenizer, beam_size, max_extra_length, jit_compile=False):
    """A `Translator` with the run's length penalty."""
    return kt.Translator(
        model,
        tokenizer,
        beam_size=beam_size,
        alpha=config.alpha,
        max_extra_length=max_extra_length,
        jit_compile=jit_compile,
    )


def evaluator_for(config, model, tokenizer, valid, target_lang=None):
    """The validation BLEU evaluator of training, if there is a valid set
    and --eval_every is not 0. Its length limit is tighter than the final
    evaluation's: a half-trained model's run-on hypotheses would otherwise
    cost most of the time (Multi30k, step 647: 13 s instead of 34 s for the
    same BLEU within 0.04), and it uses XLA where that pays (GPUs)."""
    if not valid or not valid[0] or not config.eval_every:
        return None
    translator = translator_for(
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
        target_lang=target_lang,
    )


def training_stage(config, model, tokenizer, data, stopwatch, evaluator):
    """Trains, resumes, or continues to a larger --train_steps, with the
    validation `evaluator` (`evaluator_for`; None for none); returns what
    `training_done.json` records."""
    train_pairs = data.train
    if config.guided_alignment:
        train_pairs = training.with_word_links(train_pairs, word_links(config, train_pairs))
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
            static_shapes=STATIC_SHAPES[config.static_shapes],
            max_shapes=config.max_shapes,
        )

    def later_stages():
        return after_training_seconds(config, evaluator, data)

    budget, callbacks = training_budget(config, stopwatch, later_stages)
    dropout = dropout_by_passes(config, train_pairs, tokenizer, accumulation * replicas)
    settings = training_settings(config, accumulation, budget, evaluator is not None, dropout)
    result = training.train(
        model, train_batches, config.model_dir, settings, evaluator=evaluator, callbacks=callbacks
    )
    if result.initial_step:
        print(f"training: resumed from step {result.initial_step}")
    shapes = result.batch_shapes
    print(f"batches: {shapes}" if shapes else "batches: each padded to its own longest sentence")
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
        "dropout": result.dropout,
        "out_of_time": result.out_of_time,
        "stopped_early": result.stopped_early,
        "train_steps": config.train_steps,
        "patience": config.early_stopping_patience,
        "evaluations": result.evaluations,
        "signatures": evaluator.signatures if evaluator else {},
        "batch_shapes": shapes.to_json() if shapes else None,
    }
    write_json_atomically(done_marker, trained)
    return trained
