"""The paper's WMT14 English->German run, end to end, or any local corpus.

    # The paper's base model on WMT14 (TFDS downloads and prepares the data):
    python examples/wmt_ende.py --preset base --model_dir runs/base --export_dir exports/ende

    # Any parallel corpus, offline (plain or .gz, one sentence a line):
    python examples/wmt_ende.py --preset small --model_dir runs/m30k \\
        --train_src data/multi30k/train.en.gz --train_tgt data/multi30k/train.de.gz \\
        --valid_src data/multi30k/val.en.gz --valid_tgt data/multi30k/val.de.gz \\
        --test_src data/multi30k/test_2016_flickr.en.gz --test_ref data/multi30k/test_2016_flickr.de.gz

Stages, each skipped when already done in `--model_dir` (rerun the same
command after a crash and it continues; after completion it only reports):
data -> shared SentencePiece vocabulary (`spm.model`) -> Transformer ->
training with the paper's recipe (checkpoints; resumes) -> average of the last
checkpoints -> beam search (4, alpha 0.6, source + 50) on the test set ->
sacreBLEU, plus the paper's tokenized, compound-split BLEU -> attention
plots -> SavedModel for TF Serving -> a summary table.
"""

import argparse
import json
import math
import os
import re
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import sacrebleu  # noqa: E402

import keras_transformer as kt  # noqa: E402
from keras_transformer import training  # noqa: E402
from keras_transformer.export import export_saved_model  # noqa: E402
from keras_transformer.tokenization import SentencePieceTokenizer  # noqa: E402
from keras_transformer.tokenization import train_sentencepiece  # noqa: E402

# Run presets. `model` names a `Transformer` preset; the model keys below
# override it. base/big: the paper (about 25,000 target tokens per update,
# reached by accumulation on fewer than 8 devices; checkpoints averaged).
PRESETS = {
    "base": dict(
        model="base",
        vocab_size=37000,
        batch_tokens=4096,
        update_tokens=25000,
        warmup_steps=4000,
        train_steps=100_000,
        steps_per_checkpoint=1000,
        average_last=5,
    ),
    "big": dict(
        model="big",
        vocab_size=37000,
        batch_tokens=4096,
        update_tokens=25000,
        warmup_steps=4000,
        train_steps=300_000,
        steps_per_checkpoint=1000,
        average_last=20,
    ),
    # Trains in minutes on a CPU (Multi30k-sized corpora).
    "small": dict(
        model="base",
        num_layers=3,
        d_model=256,
        num_heads=4,
        d_ff=1024,
        dropout=0.1,
        vocab_size=8000,
        batch_tokens=4096,
        update_tokens=4096,
        warmup_steps=800,
        learning_rate_scale=1.0,
        train_steps=20_000,
        steps_per_checkpoint=100,
        average_last=5,
        max_length=128,
    ),
    # For tests and smoke runs.
    "tiny": dict(
        model="tiny",
        vocab_size=400,
        batch_tokens=1024,
        update_tokens=1024,
        warmup_steps=100,
        train_steps=40,
        steps_per_checkpoint=20,
        average_last=2,
        max_length=64,
    ),
}
MODEL_KEYS = (
    "num_layers",
    "d_model",
    "num_heads",
    "d_ff",
    "dropout",
    "attention_dropout",
    "relu_dropout",
    "norm_first",
    "position_encoding",
    "max_length",
)
DEFAULTS = dict(
    label_smoothing=0.1,
    learning_rate_scale=1.0,
    beam_size=4,
    alpha=0.6,
    max_extra_length=50,
    max_length=256,
    dropout=None,
    seed=0,
    eval_batch_size=64,
    max_train_minutes=None,
    tokenizer_sentences=2_000_000,
    keep_checkpoints=None,
)


def parse_args(argv):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--preset", choices=sorted(PRESETS), default="base")
    p.add_argument("--model_dir", required=True, help="checkpoints, tokenizer, logs, results")
    p.add_argument(
        "--export_dir", help="TF Serving base directory for the SavedModel (default: none)"
    )
    data = p.add_argument_group("data (default: TFDS wmt14_translate/de-en)")
    for name in ("train_src", "train_tgt", "valid_src", "valid_tgt", "test_src", "test_ref"):
        data.add_argument(f"--{name}")
    data.add_argument("--tfds_name", default="wmt14_translate/de-en")
    data.add_argument("--tfds_data_dir")
    data.add_argument("--source_lang", default="en")
    data.add_argument("--target_lang", default="de")
    data.add_argument(
        "--max_eval_sentences", type=int, help="evaluate on the first N test sentences"
    )
    run = p.add_argument_group("devices")
    run.add_argument("--strategy", choices=training.trainer.STRATEGIES, default="auto")
    run.add_argument(
        "--mixed_precision", choices=sorted(training.trainer.MIXED_PRECISION), default="none"
    )
    hp = p.add_argument_group("hyper-parameters (default: the preset's)")
    for name in (
        "vocab_size",
        "num_layers",
        "d_model",
        "num_heads",
        "d_ff",
        "max_length",
        "batch_tokens",
        "update_tokens",
        "warmup_steps",
        "train_steps",
        "steps_per_checkpoint",
        "average_last",
        "beam_size",
        "max_extra_length",
        "eval_batch_size",
        "seed",
        "tokenizer_sentences",
        "keep_checkpoints",
    ):
        hp.add_argument(f"--{name}", type=int)
    for name in (
        "dropout",
        "attention_dropout",
        "relu_dropout",
        "label_smoothing",
        "learning_rate_scale",
        "alpha",
        "max_train_minutes",
    ):
        hp.add_argument(f"--{name}", type=float)
    hp.add_argument("--norm_first", type=lambda s: s.lower() in ("1", "true", "yes"))
    hp.add_argument("--position_encoding", choices=["sinusoidal", "learned"])
    return p.parse_args(argv)


def resolve_config(args):
    """Preset, then defaults, then flags: every value in one flat dict."""
    config = {**DEFAULTS, **PRESETS[args.preset]}
    for key, value in vars(args).items():
        if value is not None or key not in config:
            config[key] = value
    local = [config[k] for k in ("train_src", "train_tgt", "test_src", "test_ref")]
    if any(local) and not all(local):
        sys.exit(
            "Local data needs --train_src, --train_tgt, --test_src and --test_ref (and optionally "
            "--valid_src, --valid_tgt)."
        )
    config["data"] = "local files" if all(local) else f"tfds:{config['tfds_name']}"
    config["keep_checkpoints"] = config["keep_checkpoints"] or max(5, config["average_last"])
    return config


# Data.


def tfds_pairs(config, split):
    """TFDS pairs, failing fast (with the local-files alternative) when the
    data is neither prepared nor downloadable."""

    keys = (config["source_lang"], config["target_lang"])
    try:
        return training.text_pairs_from_tfds(
            config["tfds_name"], split, *keys, data_dir=config["tfds_data_dir"], download=False
        )
    except Exception:  # not prepared yet: download only if the network is there
        import socket

        try:
            socket.create_connection(("storage.googleapis.com", 443), timeout=5).close()
        except OSError:
            sys.exit(
                f"TFDS dataset {config['tfds_name']} is not prepared and the network is unreachable.\n"
                "Pass local parallel files instead: --train_src --train_tgt [--valid_src --valid_tgt] "
                "--test_src --test_ref (plain or .gz, one sentence a line)."
            )
        return training.text_pairs_from_tfds(
            config["tfds_name"], split, *keys, data_dir=config["tfds_data_dir"], download=True
        )


def load_data(config):
    """Train/valid pairs datasets and the test (and valid) sentence lists."""

    def as_lists(pairs):
        src, ref = [], []
        for s, t in pairs.as_numpy_iterator():
            src.append(s.decode("utf-8"))
            ref.append(t.decode("utf-8"))
        return src, ref

    limit = config["max_eval_sentences"]
    if config["data"] == "local files":
        train = training.text_pairs_from_files(config["train_src"], config["train_tgt"])
        test = as_lists(
            training.text_pairs_from_files(config["test_src"], config["test_ref"]).take(limit or -1)
        )
        valid = None
        if config["valid_src"] and config["valid_tgt"]:
            valid = as_lists(
                training.text_pairs_from_files(config["valid_src"], config["valid_tgt"]).take(
                    limit or -1
                )
            )
    else:
        train = tfds_pairs(config, "train")
        test = as_lists(tfds_pairs(config, "test").take(limit or -1))
        valid = as_lists(tfds_pairs(config, "validation").take(limit or -1))
    return train, valid, test


def tokenizer_stage(config, train_pairs):
    path = os.path.join(config["model_dir"], "spm.model")
    if os.path.exists(path):
        print(f"tokenizer: {path} (already trained)")
        return SentencePieceTokenizer.from_file(path)
    start = time.time()
    sample = (
        (s.decode("utf-8"), t.decode("utf-8"))
        for s, t in train_pairs.take(config["tokenizer_sentences"]).as_numpy_iterator()
    )
    tokenizer = train_sentencepiece(sample, config["vocab_size"], seed=config["seed"])
    tokenizer.save(path + ".tmp")
    os.replace(path + ".tmp", path)
    print(
        f"tokenizer: trained {tokenizer.vocab_size} pieces in {time.time() - start:.0f}s -> {path}"
    )
    return tokenizer


# Evaluation.


def compound_split_bleu(hypotheses, references):
    """The paper's BLEU: tokenized (13a) text with hyphenated compounds split
    as `a ##AT##-##AT## b` (tensor2tensor's get_ende_bleu.sh)."""
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    tokenize = Tokenizer13a()
    split = lambda s: re.sub(r"(\S)-(\S)", r"\1 ##AT##-##AT## \2", tokenize(s))  # noqa: E731
    return sacrebleu.corpus_bleu(
        [split(h) for h in hypotheses], [[split(r) for r in references]], tokenize="none"
    )


def attention_plots(model, tokenizer, source, hypothesis, model_dir):
    """PNGs of the last layer's heads: encoder self-attention and
    encoder-decoder attention for one sentence (cf. the paper's Figs. 3-5)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("attention plots: skipped (pip install matplotlib)")
        return []
    source_ids = tokenizer([source])[0].numpy().tolist() + [3]
    target_ids = [2] + tokenizer([hypothesis])[0].numpy().tolist()
    scores = model.attention_scores(np.array([source_ids]), np.array([target_ids]))
    pieces = lambda ids: [tokenizer.id_to_piece(i) for i in ids]  # noqa: E731
    paths = []
    for kind, rows, cols in (
        ("encoder", pieces(source_ids), pieces(source_ids)),
        ("cross", pieces(target_ids), pieces(source_ids)),
    ):
        weights = np.asarray(scores[kind][-1][0])  # (heads, rows, cols)
        heads = weights.shape[0]
        columns = min(heads, 4)
        fig, axes = plt.subplots(
            math.ceil(heads / columns),
            columns,
            squeeze=False,
            figsize=(4 * columns, 4 * math.ceil(heads / columns)),
        )
        for h, ax in enumerate(axes.flat):
            if h >= heads:
                ax.axis("off")
                continue
            ax.imshow(weights[h], cmap="viridis", vmin=0, vmax=1)
            ax.set_title(f"head {h}")
            ax.set_xticks(range(len(cols)), cols, rotation=90, fontsize=6)
            ax.set_yticks(range(len(rows)), rows, fontsize=6)
        fig.suptitle(
            f"last layer, {'encoder self-attention' if kind == 'encoder' else 'encoder-decoder attention'}"
        )
        fig.tight_layout()
        path = os.path.join(model_dir, f"attention_{kind}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def main(argv=None):
    started = time.time()
    config = resolve_config(parse_args(argv))
    model_dir = config["model_dir"]
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
    print("configuration:", json.dumps(config, sort_keys=True))
    keras.utils.set_random_seed(config["seed"])

    train_pairs, valid, (test_src, test_ref) = load_data(config)
    tokenizer = tokenizer_stage(config, train_pairs)

    strategy = training.get_strategy(config["strategy"])
    replicas = strategy.num_replicas_in_sync
    accumulation = max(1, math.ceil(config["update_tokens"] / (config["batch_tokens"] * replicas)))
    with strategy.scope():
        model = kt.Transformer.from_preset(
            config["model"],
            vocab_size=tokenizer.vocab_size,
            dtype=training.dtype_policy(config["mixed_precision"]),
            **{k: config[k] for k in MODEL_KEYS if config.get(k) is not None},
        )
    print(
        f"model: {model.count_params():,} weights, {replicas} replica(s), {accumulation} micro-batch(es) "
        f"of {config['batch_tokens']} tokens per replica per update"
    )

    def train_batches(input_context):
        return training.make_batches(
            train_pairs,
            tokenizer,
            batch_tokens=config["batch_tokens"] * replicas,
            max_length=config["max_length"],
            input_context=input_context,
            vocab_size=tokenizer.vocab_size,
        )

    done_marker = os.path.join(model_dir, "training_done.json")
    if os.path.exists(done_marker):
        with open(done_marker) as f:
            trained = json.load(f)
        print(f"training: already done ({trained['final_step']} steps)")
    else:
        result = training.train(
            model,
            train_batches,
            model_dir,
            train_steps=config["train_steps"],
            steps_per_checkpoint=config["steps_per_checkpoint"],
            keep_checkpoints=config["keep_checkpoints"],
            warmup_steps=config["warmup_steps"],
            learning_rate_scale=config["learning_rate_scale"],
            accumulation_steps=accumulation,
            label_smoothing=config["label_smoothing"],
            max_seconds=config["max_train_minutes"] and 60 * config["max_train_minutes"],
            verbose=2,
        )
        if result.initial_step:
            print(f"training: resumed from step {result.initial_step}")
        history = result.history.get("tokens_per_sec") or [0.0]
        trained = {
            "initial_step": result.initial_step,
            "final_step": result.final_step,
            "seconds": result.seconds,
            "tokens_per_sec": float(np.mean(history)),
            "out_of_time": result.out_of_time,
        }
        with open(done_marker, "w") as f:
            json.dump(trained, f)

    checkpoints = training.checkpoint_paths(model_dir)[-config["average_last"] :]
    training.average_checkpoints(model, checkpoints)
    print(
        f"averaged {len(checkpoints)} checkpoint(s): {', '.join(os.path.basename(c) for c in checkpoints)}"
    )

    translator = kt.Translator(
        model,
        tokenizer,
        beam_size=config["beam_size"],
        alpha=config["alpha"],
        max_extra_length=config["max_extra_length"],
    )
    results = {}
    for name, (sources, references) in (("valid", valid), ("test", (test_src, test_ref))):
        if not sources:
            continue
        hypotheses = translator.translate(
            sources, config["eval_batch_size"], progress=f"translating {name}"
        )
        with open(os.path.join(model_dir, f"hypotheses.{name}.txt"), "w") as f:
            f.write("\n".join(hypotheses) + "\n")
        bleu = sacrebleu.metrics.BLEU()
        score = bleu.corpus_score(hypotheses, [references])
        results[name] = {
            "sacrebleu": score.score,
            "signature": str(bleu.get_signature()),
            "tokenized_compound_split_bleu": compound_split_bleu(hypotheses, references).score,
            "sentences": len(sources),
        }
        print(
            f"{name}: sacreBLEU {score.score:.2f} ({bleu.get_signature()}); "
            f"tokenized compound-split BLEU (the paper's measure) {results[name]['tokenized_compound_split_bleu']:.2f}"
        )
        if name == "test":
            plots = attention_plots(model, tokenizer, sources[0], hypotheses[0], model_dir)
            for path in plots:
                print(f"attention plot: {path}")

    export_path = None
    if config["export_dir"]:
        marker = os.path.join(model_dir, "export.json")
        if os.path.exists(marker):
            with open(marker) as f:
                export_path = json.load(f)["path"]
            print(f"export: {export_path} (already exported)")
        else:
            export_path = export_saved_model(translator, config["export_dir"])
            with open(marker, "w") as f:
                json.dump({"path": export_path}, f)
            print(f"export: {export_path}")
        print(
            f'try it: echo "A man is riding a bike." | python -m keras_transformer.translate '
            f"--export_dir {config['export_dir']}"
        )

    rows = [
        ("data", config["data"]),
        ("test / valid sentences", f"{len(test_src)} / {len(valid[0]) if valid else 0}"),
        ("vocabulary", f"{tokenizer.vocab_size:,} shared SentencePiece pieces"),
        ("parameters", f"{model.count_params():,}"),
        (
            "steps",
            f"{trained['final_step']:,}"
            + (" (time budget reached)" if trained.get("out_of_time") else ""),
        ),
        ("training wall time", f"{trained.get('seconds', 0) / 60:.1f} min (this run of training)"),
        ("training tokens/s", f"{trained.get('tokens_per_sec', 0):,.0f} target tokens/s"),
        ("checkpoints averaged", str(len(checkpoints))),
    ]
    for name, result in results.items():
        rows.append((f"{name} sacreBLEU", f"{result['sacrebleu']:.2f}"))
        rows.append(
            (
                f"{name} tokenized compound-split BLEU",
                f"{result['tokenized_compound_split_bleu']:.2f}",
            )
        )
    rows.append(("total wall time", f"{(time.time() - started) / 60:.1f} min"))
    table = "| | |\n| --- | --- |\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)
    print("\n" + table)
    with open(os.path.join(model_dir, "summary.md"), "w") as f:
        f.write(table + "\n")
    with open(os.path.join(model_dir, "summary.json"), "w") as f:
        json.dump(
            {"config": config, "training": trained, "results": results, "export": export_path},
            f,
            indent=2,
        )
    return results


if __name__ == "__main__":
    main()
