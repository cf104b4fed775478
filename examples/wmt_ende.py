"""The paper's WMT14 English->German run, end to end, or any local corpus.

    # A translator on a CPU: Multi30k (downloaded into data/multi30k once),
    # the small preset, 30 minutes, then a SavedModel in exports/multi30k:
    python examples/wmt_ende.py --data multi30k

    # The paper's base model on WMT14 (TFDS downloads and prepares the data;
    # a run for GPUs):
    python examples/wmt_ende.py --preset base --export_dir exports/ende

    # Any parallel corpus, offline (plain or .gz, one sentence a line):
    python examples/wmt_ende.py --preset small --model_dir runs/mine \\
        --train_src train.en --train_tgt train.de --valid_src valid.en \\
        --valid_tgt valid.de --test_src test.en --test_ref test.de

    # Back-translate German text with a reverse (de->en) run, train on both;
    # or train on a teacher's translations (Apache Beam: pip install "./runtime[beam]"):
    python examples/wmt_ende.py --data multi30k --monolingual_tgt 'mono/*.de.gz' \\
        --backtranslate_with runs/deen [--bt_search sample] [--bt_tag]
    python examples/wmt_ende.py --data multi30k --model tiny --distill_from runs/multi30k

    # Fine-tune a trained model (a run's --model_dir, or an OPUS-MT model
    # directory) on your own corpus, keeping its vocabulary; LoRA optional:
    python examples/wmt_ende.py --preset small --init_from opus-mt-en-de \\
        --model_dir runs/tuned --lora_rank 8 --train_src ... (as above)

Stages, each skipped when already done in `--model_dir` (rerun the same
command after a crash and it continues; after completion it only reports):
data -> synthetic data, if asked (`wmt_synthetic`; outside the budget) ->
shared SentencePiece vocabulary (`spm.model`) -> training with the
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
import os
import shutil
import time

# When the command started: --budget_minutes counts from here, so that the
# seconds spent importing TensorFlow are inside the budget too.
PROCESS_STARTED = time.time()

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from keras_transformer_runtime import logs  # noqa: E402

# The native libraries' lines (TensorFlow's start-up, a CPU machine's CUDA
# probe, SentencePiece's INFO lines) off stderr from here on, TensorFlow's
# import included; --verbose keeps them.
logs.filter_native_logs()

import keras_transformer as kt  # noqa: E402
from keras_transformer import training  # noqa: E402

from wmt_budget import PLOTS_AND_SUMMARY_SECONDS  # noqa: E402
from wmt_budget import Stopwatch  # noqa: E402
from wmt_config import parse_config  # noqa: E402
from wmt_data import data_stage  # noqa: E402
from wmt_evaluation import evaluation_stage  # noqa: E402
from wmt_evaluation import weights_marker  # noqa: E402
from wmt_report import summary_stage  # noqa: E402
from wmt_results import chosen_paths  # noqa: E402
from wmt_results import export_stage  # noqa: E402
from wmt_results import plots_stage  # noqa: E402
from wmt_results import weights_stage  # noqa: E402
from wmt_stages import evaluator_for  # noqa: E402
from wmt_stages import merged_lora_model  # noqa: E402
from wmt_stages import model_stage  # noqa: E402
from wmt_stages import start_run  # noqa: E402
from wmt_stages import tokenizer_stage  # noqa: E402
from wmt_stages import training_stage  # noqa: E402
from wmt_stages import translator_for  # noqa: E402
from wmt_synthetic import synthetic_stage  # noqa: E402


@contextlib.contextmanager
def nothing_left_unless_trained(model_dir):
    """Runs its block; if it fails before the run saved a checkpoint
    (`model_dir/checkpoints/`), removes what it wrote into `model_dir`
    (the directory itself, if it made it): its `config.json` and
    vocabulary would refuse the corrected rerun's settings."""
    existed = os.path.isdir(model_dir)
    before = set(os.listdir(model_dir)) if existed else set()
    try:
        yield
    except BaseException:
        checkpoints = os.path.join(model_dir, "checkpoints")
        if not (os.path.isdir(checkpoints) and os.listdir(checkpoints)):
            if not existed:
                shutil.rmtree(model_dir, ignore_errors=True)
            for name in set(os.listdir(model_dir)) - before if existed else ():
                path = os.path.join(model_dir, name)
                shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
        raise


def main(argv=None, started=None):
    """Runs the command; `started` (default: now) is when its budget began."""
    config = parse_config(argv, __doc__)
    stopwatch = Stopwatch(config.budget_minutes, started)
    with stopwatch.stage("data"):
        data = data_stage(config)
    with nothing_left_unless_trained(config.model_dir):
        start_run(config, data.mixing_weights)
        # Synthetic data is made once, before the budgeted run (its own time).
        if config.monolingual_tgt or config.distill_from:
            with stopwatch.stage("synthetic data", outside_budget=True):
                data = synthetic_stage(config, data)
        with stopwatch.stage("vocabulary"):
            tokenizer = tokenizer_stage(config, data.train)
        model = model_stage(config, tokenizer)
        # One validation evaluator for training and for choosing the weights
        # after it: its search is traced once.
        evaluator = evaluator_for(config, model, tokenizer, data.valid, data.languages_of("valid"))
        with stopwatch.stage("training"):
            trained = training_stage(config, model, tokenizer, data, stopwatch, evaluator)
    if not training.is_chief(model.distribute_strategy):
        print("training done; the chief evaluates and exports")
        return {}
    with stopwatch.stage("averaging"):
        weights = weights_stage(config, model, data, evaluator)
        if config.lora_rank:
            model = merged_lora_model(config, model, tokenizer, data)
    translator = translator_for(config, model, tokenizer, config.beam_size, config.max_extra_length)
    # What `Translator.from_run(model_dir)` loads: these weights and settings.
    kt.translator.record_choice(
        config.model_dir, translator, chosen_paths(config, weights), weights["reason"]
    )
    # The export first: under a budget, the evaluation then knows what is
    # left for it, and translates the valid set only if it fits.
    with stopwatch.stage("export"):
        export_path = export_stage(config, translator, trained, weights)
    seconds_left = None
    if stopwatch.budget is not None:
        seconds_left = lambda: stopwatch.left() - PLOTS_AND_SUMMARY_SECONDS  # noqa: E731
    with stopwatch.stage("evaluation"):
        scores, hypotheses, left_out = evaluation_stage(
            config, translator, data, weights_marker(translator, trained, weights), seconds_left
        )
    with stopwatch.stage("plots"):
        plots_stage(config, model, tokenizer, data, hypotheses)
    summary_stage(
        config,
        {
            "training": trained,
            "results": scores,
            "left_out": left_out,
            "export": export_path,
            "training_pairs": data.described,
            "test_sentences": len(data.test[0]),
            "valid_sentences": len(data.valid[0]) if data.valid else 0,
            "vocabulary": tokenizer.vocab_size,
            "parameters": model.count_params(),
            "precision": model.dtype_policy.name,
            "weights": weights,
            "stage_seconds": stopwatch.seconds,
            "minutes": stopwatch.elapsed() / 60,
        },
    )
    return scores


if __name__ == "__main__":
    main(started=PROCESS_STARTED)
