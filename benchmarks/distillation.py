"""Students against their teacher: quality and CTranslate2 int8 speed of
runs of `examples/wmt_ende.py` (a teacher, and students trained on its
translations or on the references).

    python benchmarks/distillation.py --test_src data/multi30k/test_2016_flickr.en.gz \\
        --test_ref data/multi30k/test_2016_flickr.de.gz \\
        --run_dir runs/multi30k --run_dir runs/student_refs --run_dir runs/student_kd

Each `--run_dir` (the first is the teacher) is rebuilt with its exported
weights (`ctranslate2_translation.load_run`), exported to CTranslate2 int8
and translated with its beam size and alpha by our runner: the whole
test set in one call at its fastest `(inter_threads, intra_threads)`
setting, each in a process of its own (`export_rows.fastest` over
`ctranslate2_translation.ct2_settings`), the faster of two passes after a
warm-up. `BLEU` is the run's own test sacreBLEU (its
`summary.json`, the SavedModel's beam search); `int8 BLEU` that of the
CTranslate2 int8 outputs.
"""

import argparse
import json
import os

from ctranslate2_translation import ROWS
from ctranslate2_translation import ct2_settings
from ctranslate2_translation import load_run
from ctranslate2_translation import run_translator
from ctranslate2_translation import worker
from export_rows import fastest
from export_rows import speed
from script_workers import scratch_directory

from keras_transformer_runtime.text import files as text_files

ROW = "ours over CTranslate2 int8"


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run_dir", action="append", help="the teacher first, then students")
    parser.add_argument("--test_src")
    parser.add_argument("--test_ref")
    parser.add_argument("--worker", choices=sorted(ROWS), help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    parser.add_argument("--single", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--inter", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:  # a row of ctranslate2_translation's, run by `fastest`
        return worker(
            args.worker, args.path, args.work, max(args.single, 1), args.threads, args.inter
        )
    if not (args.run_dir and args.test_src and args.test_ref):
        parser.error("--run_dir (at least one), --test_src and --test_ref are required")

    import sacrebleu

    from keras_transformer.export import export_ctranslate2

    sources = text_files.read_lines(args.test_src)
    references = text_files.read_lines(args.test_ref)
    work = scratch_directory("distillation_")
    with open(os.path.join(work, "sources.txt"), "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in sources)
    rows = []
    for number, run_dir in enumerate(args.run_dir):
        model, tokenizer, config = load_run(run_dir)
        path = os.path.join(work, f"ct2_{number}")
        export_ctranslate2(run_translator(model, tokenizer, config), path, quantization="int8")
        result = fastest(ROW, path, work, 1, __file__, ct2_settings(ROW))
        if isinstance(result, str):
            raise SystemExit(f"{run_dir}: {result}")
        with open(os.path.join(run_dir, "summary.json")) as f:
            summary = json.load(f)
        bleu = sacrebleu.corpus_bleu(result["outputs"], [references]).score
        rows.append((run_dir, model.count_params(), summary, bleu, result))
    print(f"{len(sources)} test sentences, CTranslate2 int8, one call, {os.cpu_count()} cores")
    print("| run | weights | BLEU | int8 BLEU | sentences/s | x teacher |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    teacher = rows[0][4]["batch"]
    for run_dir, weights, summary, bleu, result in rows:
        test = summary["results"]["test"]["sacrebleu"]
        print(
            f"| {run_dir} | {weights:,} | {test:.2f} | {bleu:.2f} | {speed(result, 'batch')} | "
            f"{result['batch'] / teacher:.2f} |"
        )
    return rows


if __name__ == "__main__":
    main()
