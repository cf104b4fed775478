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
paper's recipe (checkpoints; resumes) -> average of the last checkpoints ->
beam search on the valid and test sets -> sacreBLEU and the paper's
tokenized, compound-split BLEU -> attention plots -> SavedModel for TF
Serving -> a summary table. Every setting is a flag below; a preset sets
several at once, and a flag overrides its preset.
"""

import dataclasses
import json
import math
import os
import socket
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_transformer as kt  # noqa: E402
from keras_transformer import training  # noqa: E402

from attention_plots import plot_attention  # noqa: E402
from bleu import bleu_scores  # noqa: E402
from wmt_config import parse_config  # noqa: E402

TFDS_HOST = ("storage.googleapis.com", 443)


# Stages.


@dataclasses.dataclass
class Data:
    """The training pairs, and the valid and test sets as `(sources,
    references)` lists (`valid` may be `None`)."""

    train: object
    valid: tuple | None
    test: tuple


def _as_lists(pairs, limit):
    sources, references = [], []
    for source, reference in pairs.take(limit or -1).as_numpy_iterator():
        sources.append(source.decode("utf-8"))
        references.append(reference.decode("utf-8"))
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
            valid=_as_lists(_tfds_pairs(config, "validation"), limit),
            test=_as_lists(_tfds_pairs(config, "test"), limit),
        )
    valid = None
    if config.valid_src and config.valid_tgt:
        valid = _as_lists(training.text_pairs_from_files(config.valid_src, config.valid_tgt), limit)
    return Data(
        train=training.text_pairs_from_files(config.train_src, config.train_tgt),
        valid=valid,
        test=_as_lists(training.text_pairs_from_files(config.test_src, config.test_ref), limit),
    )


def start_run(config):
    os.makedirs(config.model_dir, exist_ok=True)
    with open(os.path.join(config.model_dir, "config.json"), "w") as f:
        json.dump(config.to_json(), f, indent=2, sort_keys=True)
    print("configuration:", json.dumps(config.to_json(), sort_keys=True))
    keras.utils.set_random_seed(config.seed)


def tokenizer_stage(config, train_pairs):
    path = os.path.join(config.model_dir, "spm.model")
    if os.path.exists(path):
        print(f"tokenizer: {path} (already trained)")
        return kt.tokenization.SentencePieceTokenizer.from_file(path)
    start = time.time()
    sample = (
        (s.decode("utf-8"), t.decode("utf-8"))
        for s, t in train_pairs.take(config.tokenizer_sentences).as_numpy_iterator()
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


def training_stage(config, model, tokenizer, train_pairs):
    """Trains (or resumes); returns what `training_done.json` records."""
    done_marker = os.path.join(config.model_dir, "training_done.json")
    if os.path.exists(done_marker):
        with open(done_marker) as f:
            trained = json.load(f)
        print(f"training: already done ({trained['final_step']} steps)")
        return trained
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
            bos_id=tokenizer.bos_id,
            eos_id=tokenizer.eos_id,
            pad_id=tokenizer.pad_id,
        )

    minutes = config.max_train_minutes
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
        max_seconds=minutes and 60 * minutes,
        verbose=2,
    )
    if result.initial_step:
        print(f"training: resumed from step {result.initial_step}")
    trained = {
        "initial_step": result.initial_step,
        "final_step": result.final_step,
        "seconds": result.seconds,
        "tokens_per_sec": float(np.mean(result.history.get("tokens_per_sec") or [0.0])),
        "out_of_time": result.out_of_time,
    }
    with open(done_marker, "w") as f:
        json.dump(trained, f)
    return trained


def averaging_stage(config, model):
    checkpoints = training.checkpoint_paths(config.model_dir)[-config.average_last :]
    training.average_checkpoints(model, checkpoints)
    names = ", ".join(os.path.basename(c) for c in checkpoints)
    print(f"averaged {len(checkpoints)} checkpoint(s): {names}")
    return checkpoints


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
        with open(os.path.join(config.model_dir, f"hypotheses.{name}.txt"), "w") as f:
            f.write("\n".join(hypotheses[name]) + "\n")
        scores[name] = bleu_scores(hypotheses[name], references)
        print(
            f"{name}: sacreBLEU {scores[name]['sacrebleu']:.2f} ({scores[name]['signature']}); "
            "tokenized compound-split BLEU (the paper's measure) "
            f"{scores[name]['tokenized_compound_split_bleu']:.2f}"
        )
    return scores, hypotheses


def plots_stage(config, model, tokenizer, data, hypotheses):
    if "test" not in hypotheses:
        return []
    paths = plot_attention(
        model, tokenizer, data.test[0][0], hypotheses["test"][0], config.model_dir
    )
    for path in paths:
        print(f"attention plot: {path}")
    return paths


def export_stage(config, translator):
    if not config.export_dir:
        return None
    marker = os.path.join(config.model_dir, "export.json")
    if os.path.exists(marker):
        with open(marker) as f:
            path = json.load(f)["path"]
        print(f"export: {path} (already exported)")
    else:
        path = kt.export.export_saved_model(translator, config.export_dir)
        with open(marker, "w") as f:
            json.dump({"path": path}, f)
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
        ("steps", steps + (" (time budget reached)" if trained.get("out_of_time") else "")),
        ("training wall time", f"{trained.get('seconds', 0) / 60:.1f} min (this run of training)"),
        ("training tokens/s", f"{trained.get('tokens_per_sec', 0):,.0f} target tokens/s"),
        ("checkpoints averaged", str(run["checkpoints_averaged"])),
    ]
    for name, result in scores.items():
        rows.append((f"{name} sacreBLEU", f"{result['sacrebleu']:.2f}"))
        compound_split = result["tokenized_compound_split_bleu"]
        rows.append((f"{name} tokenized compound-split BLEU", f"{compound_split:.2f}"))
    rows.append(("total wall time", f"{run['minutes']:.1f} min"))
    table = "| | |\n| --- | --- |\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)
    print("\n" + table)
    with open(os.path.join(config.model_dir, "summary.md"), "w") as f:
        f.write(table + "\n")
    with open(os.path.join(config.model_dir, "summary.json"), "w") as f:
        json.dump({"config": config.to_json(), **run}, f, indent=2)


def main(argv=None):
    started = time.time()
    config = parse_config(argv, __doc__)
    data = data_stage(config)
    start_run(config)
    tokenizer = tokenizer_stage(config, data.train)
    model = model_stage(config, tokenizer)
    trained = training_stage(config, model, tokenizer, data.train)
    checkpoints = averaging_stage(config, model)
    translator = kt.Translator(
        model,
        tokenizer,
        beam_size=config.beam_size,
        alpha=config.alpha,
        max_extra_length=config.max_extra_length,
    )
    scores, hypotheses = evaluation_stage(config, translator, data)
    plots_stage(config, model, tokenizer, data, hypotheses)
    export_path = export_stage(config, translator)
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
            "checkpoints_averaged": len(checkpoints),
            "minutes": (time.time() - started) / 60,
        },
    )
    return scores


if __name__ == "__main__":
    main()
