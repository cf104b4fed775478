"""Domain fine-tuning on Multi30k: a general model trained without the
pairs whose source mentions a dog, then fine-tuned on them (all weights,
or LoRA), each scored on the dog test sentences and on the others.

    python benchmarks/fine_tuning.py --data_dir ../shared/data/multi30k

Stages, each run by `examples/wmt_ende.py` in its own process and skipped
when done (rerun the command after a crash): split the corpus
(`WORK/data/`: "general" = the pairs without "dog" in the source,
"domain" = those with it, for train, valid and test), train the general
model (`--general_minutes`), fine-tune it on the domain's training pairs
with each variant (`--init_from`, `--finetune_minutes` each), then
translate both test sets with each exported SavedModel (beam 4) and print
sacreBLEU and the weights each variant trained:

| model | trained weights | domain test BLEU | general test BLEU |

The LoRA row also says how many greedy validation translations the merge
left unchanged (the example checks it before evaluating and exporting the
merged model; its validation BLEU during training is the unmerged one's).
"""

import argparse
import json
import os
import subprocess
import sys

from keras_transformer_runtime.text import files as text_files

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "wmt_ende.py")
SPLITS = {"train": "train", "valid": "val", "test": "test_2016_flickr"}
# name -> the flags of its fine-tuning run (beyond --init_from and the data).
VARIANTS = {
    "full": ["--learning_rate_scale", "0.1"],
    "lora": ["--lora_rank", "8", "--learning_rate_scale", "0.5"],
    "frozen_embeddings_encoder": ["--freeze", "embeddings,encoder", "--learning_rate_scale", "0.1"],
}


def in_domain(source, word):
    return word in source.lower()


def split_stage(data_dir, work, word):
    """Writes WORK/data/{general,domain}.{train,valid,test}.{en,de};
    returns the counts."""
    out = os.path.join(work, "data")
    os.makedirs(out, exist_ok=True)
    counts = {}
    for split, name in SPLITS.items():
        sources = text_files.read_lines(os.path.join(data_dir, f"{name}.en.gz"))
        targets = text_files.read_lines(os.path.join(data_dir, f"{name}.de.gz"))
        for part in ("general", "domain"):
            keep = [(in_domain(s, word)) == (part == "domain") for s in sources]
            for lang, lines in (("en", sources), ("de", targets)):
                chosen = [line for line, k in zip(lines, keep, strict=True) if k]
                path = os.path.join(out, f"{part}.{split}.{lang}")
                with open(path + ".tmp", "w", encoding="utf-8") as f:
                    f.write("\n".join(chosen) + "\n")
                os.replace(path + ".tmp", path)
            counts[f"{part}.{split}"] = sum(keep)
    return counts


def data_flags(work, part):
    d = os.path.join(work, "data")
    flags = []
    for flag, split, lang in (
        ("--train_src", "train", "en"),
        ("--train_tgt", "train", "de"),
        ("--valid_src", "valid", "en"),
        ("--valid_tgt", "valid", "de"),
        ("--test_src", "test", "en"),
        ("--test_ref", "test", "de"),
    ):
        flags += [flag, os.path.join(d, f"{part}.{split}.{lang}")]
    return flags


def run_example(name, flags):
    print(f"== {name}: python examples/wmt_ende.py {' '.join(flags)}", flush=True)
    subprocess.run([sys.executable, EXAMPLE, *flags], check=True)


def translate_with_export(export_dir, sentences, batch_size=64):
    """Translations by the newest version under `export_dir`."""
    import tensorflow as tf

    import keras_transformer  # noqa: F401  (TF Text's ops)
    from keras_transformer.export import resolve_version_dir

    serve = tf.saved_model.load(resolve_version_dir(export_dir)).signatures["serving_default"]
    outputs = []
    for start in range(0, len(sentences), batch_size):
        text = tf.constant(sentences[start : start + batch_size])
        outputs += [t.decode("utf-8") for t in serve(text=text)["translation"].numpy()]
    return outputs


def bleu(hypotheses, references):
    import sacrebleu

    return sacrebleu.corpus_bleu(hypotheses, [references]).score


def fine_tuning_record(model_dir):
    """`(weights trained, the LoRA merge check)`: all weights for a run
    that is not a fine-tuning one."""
    path = os.path.join(model_dir, "fine_tuning.json")
    if os.path.exists(path):
        with open(path) as f:
            record = json.load(f)
        return record["trainable_weights"], record.get("merged_unchanged", "")
    with open(os.path.join(model_dir, "summary.json")) as f:
        return json.load(f)["parameters"], ""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", default=os.path.join("..", "shared", "data", "multi30k"))
    parser.add_argument("--work_dir", default=os.path.join("runs", "fine_tuning"))
    parser.add_argument("--word", default="dog", help="the domain: sources containing it")
    parser.add_argument("--general_minutes", type=float, default=20.0)
    parser.add_argument("--finetune_minutes", type=float, default=4.0)
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=list(VARIANTS))
    args = parser.parse_args()
    work = args.work_dir
    counts = split_stage(args.data_dir, work, args.word)
    print("pairs:", json.dumps(counts))
    general = os.path.join(work, "general")
    run_example(
        "general",
        ["--preset", "small", "--model_dir", general, "--export_dir", general + "_export",
         "--budget_minutes", str(args.general_minutes), *data_flags(work, "general")],
    )  # fmt: skip
    for name in args.variants:
        run_example(
            name,
            ["--preset", "small", "--init_from", general, "--model_dir", os.path.join(work, name),
             "--export_dir", os.path.join(work, name) + "_export",
             "--budget_minutes", str(args.finetune_minutes), *VARIANTS[name],
             *data_flags(work, "domain")],
        )  # fmt: skip
    tests = {
        part: (
            text_files.read_lines(os.path.join(work, "data", f"{part}.test.en")),
            text_files.read_lines(os.path.join(work, "data", f"{part}.test.de")),
        )
        for part in ("domain", "general")
    }
    rows = []
    for name in ["general", *args.variants]:
        model_dir = os.path.join(work, name)
        scores = {
            part: bleu(translate_with_export(model_dir + "_export", sources), references)
            for part, (sources, references) in tests.items()
        }
        rows.append((name, *fine_tuning_record(model_dir), scores["domain"], scores["general"]))
    print(
        f"\ndomain: sources with {args.word!r}; test_2016_flickr: "
        f"{counts['domain.test']} domain, {counts['general.test']} general sentences; beam 4\n"
    )
    print("| model | trained weights | domain test BLEU | general test BLEU | merged = unmerged |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, weights, merged, domain, rest in rows:
        print(f"| {name} | {weights:,} | {domain:.2f} | {rest:.2f} | {merged} |")


if __name__ == "__main__":
    main()
