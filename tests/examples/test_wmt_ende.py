"""examples/wmt_ende.py end to end: local files, TFDS (mocked), rerun, kill,
and its command line."""

import dataclasses
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds
import tensorflow_text  # noqa: F401 (registers the SentencePiece op the export runs)

import keras_transformer as kt
from keras_transformer import training
from keras_transformer.training.checkpoints import write_json_atomically
from tests.examples.helpers import EXAMPLES
from tests.examples.helpers import load_example

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design

SCRIPT = os.path.join(EXAMPLES, "wmt_ende.py")
ROOT = os.path.dirname(EXAMPLES)
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
WORDS = dict(
    man="Mann", dog="Hund", woman="Frau", child="Kind", street="Straße", ball="Ball", red="rot",
    blue="blau", runs="läuft", plays="spielt", the="der", a="ein", big="groß", small="klein",
    water="Wasser", park="Park",
)  # fmt: skip


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A small parallel corpus the test generates: word-by-word 'German'."""
    base = tmp_path_factory.mktemp("corpus")
    rng = np.random.default_rng(0)
    paths = {}
    for split, size in (("train", 400), ("valid", 12), ("test", 12)):
        sentences = [list(rng.choice(list(WORDS), rng.integers(3, 9))) for _ in range(size)]
        for lang, words in (("en", lambda s: s), ("de", lambda s: [WORDS[w] for w in s])):
            path = base / f"{split}.{lang}"
            path.write_text("\n".join(" ".join(words(s)) + "." for s in sentences) + "\n")
            paths[f"{split}.{lang}"] = str(path)
    # One reference line is not valid UTF-8.
    lines = (base / "test.de").read_bytes().split(b"\n")
    lines[2] = b"ein \xff Hund."
    (base / "test.de").write_bytes(b"\n".join(lines))
    return paths


# The tiny preset cut to one layer of width 16: what is tested is the run,
# not what the model learns.
MICRO_FLAGS = "--num_layers 1 --d_model 16 --num_heads 2 --d_ff 32"


def local_args(corpus, model_dir, extra=""):
    """The tiny preset, cut to `MICRO_FLAGS`, on the generated corpus, plus
    `extra` flags."""
    files = (
        f"--train_src {corpus['train.en']} --train_tgt {corpus['train.de']} "
        f"--valid_src {corpus['valid.en']} --valid_tgt {corpus['valid.de']} "
        f"--test_src {corpus['test.en']} --test_ref {corpus['test.de']}"
    )
    run = f"--preset tiny {MICRO_FLAGS} --model_dir {model_dir} --vocab_size 300"
    return f"{run} {files} {extra}".split()


def run_script(args, **kwargs):
    return subprocess.run(
        [sys.executable, SCRIPT, *args], capture_output=True, text=True, env=ENV, cwd=ROOT, **kwargs
    )


@pytest.mark.large  # starts a Python process
def test_local_files_end_to_end_then_rerun(corpus, tmp_path):
    model_dir, export_dir = tmp_path / "run", tmp_path / "export"
    extra = f"--export_dir {export_dir} --train_steps 30 --steps_per_checkpoint 10"
    dropout = " --dropout_by_passes 1:0.05,1000:0.2"
    args = local_args(corpus, model_dir, extra + " --budget_minutes 20" + dropout)
    first = run_script(args)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "test: sacreBLEU" in first.stdout and "compound-split BLEU" in first.stdout
    summary = json.loads((model_dir / "summary.json").read_text())
    assert summary["training"]["final_step"] == 30
    assert summary["config"]["train_steps"] == 30 and (model_dir / "config.json").exists()
    assert 0.0 <= summary["results"]["test"]["sacrebleu"] <= 100.0
    assert len((model_dir / "hypotheses.test.txt").read_text().splitlines()) == 12
    assert (model_dir / "attention_cross.png").stat().st_size > 0
    # Validation BLEU at each checkpoint, its curve, and the weights chosen by it.
    evaluations = summary["training"]["evaluations"]
    assert [e["step"] for e in evaluations] == [10, 20, 30]
    assert all(0.0 <= e["val_bleu"] <= 100.0 and "val_chrf" in e for e in evaluations)
    assert (model_dir / "validation_curve.png").stat().st_size > 0
    # Under --budget_minutes: the schedule over the budget (the budget is
    # ample, so it ends at --train_steps), the averaged checkpoints from
    # its last 20%, and each stage's wall time.
    assert summary["training"]["budget"]["total_steps"] == 30
    assert summary["training"]["budget"]["averaging_from"] == 25
    report = (model_dir / "summary.md").read_text()
    assert "warm-up 3 updates, linear decay to zero at 30;" in report
    # The dropout by the passes the 30 updates make, chosen at the first
    # checkpoint after the budget's first estimate (update 15).
    chosen = summary["training"]["dropout"]
    assert chosen["step"] == 20 and "dropout: by the passes over" in first.stdout
    expected = np.interp(chosen["passes"], [1, 1000], [0.05, 0.2])
    assert chosen["rate"] == pytest.approx(expected, abs=1e-3)
    assert f"| dropout by passes | {chosen['rate']} for {chosen['passes']} passes" in report
    stages = summary["stage_seconds"]
    # The export first: the evaluation then knows the time left.
    assert list(stages) == [
        "startup", "data", "vocabulary", "training", "averaging", "export", "evaluation", "plots"
    ]  # fmt: skip
    assert sum(stages.values()) <= 60 * summary["minutes"] <= 20 * 60
    assert stages["startup"] > 0.5  # importing TensorFlow counts against the budget
    assert "wall time by stage" in (model_dir / "summary.md").read_text()
    assert "(budget 20 min: " in (model_dir / "summary.md").read_text()
    assert "min to spare)" in (model_dir / "summary.md").read_text()
    weights = summary["weights"]
    assert weights["candidates"]["average_last"]["checkpoints"] == ["ckpt-28", "ckpt-30"]
    assert {"average_last", "best"} <= set(weights["candidates"])
    averages = [sorted(c["checkpoints"]) for k, c in weights["candidates"].items() if k != "best"]
    assert len(averages) == len({str(a) for a in averages})  # each set of weights once
    assert weights["name"] == max(
        weights["candidates"], key=lambda k: weights["candidates"][k]["val_bleu"]
    )
    assert "validation BLEU" in weights["reason"]
    assert "validation BLEU by step" in (model_dir / "summary.md").read_text()
    assert "chrF" in first.stdout and 0.0 <= summary["results"]["test"]["chrf"] <= 100.0
    # The export reloads and translates without the script.
    serve = tf.saved_model.load(summary["export"]).signatures["serving_default"]
    assert serve(text=tf.constant(["a dog runs."]))["translation"].shape == (1,)

    assert f"{corpus['test.de']}:3: invalid UTF-8 replaced" in first.stderr

    # A rerun only reports, and adds the CTranslate2 export it is asked for.
    ct2 = tmp_path / "ct2"
    again = run_script(args + ["--ctranslate2_dir", str(ct2)])
    assert again.returncode == 0, again.stderr[-3000:]
    assert "training: already done (30 steps)" in again.stdout
    assert "tokenizer: " in again.stdout and "(already trained)" in again.stdout
    assert f"export: {summary['export']} (already exported)" in again.stdout
    assert sorted(os.listdir(export_dir)) == ["1"]
    assert f"CTranslate2 export: {ct2}\n" in again.stdout
    assert f"| kt-translate --model {ct2}\n" in again.stdout
    recorded = json.loads((model_dir / "ctranslate2.json").read_text())
    assert recorded["step"] == 30 and recorded["export_dir"] == os.path.relpath(ct2, model_dir)
    # It reported from its records: no set was translated again.
    assert again.stdout.count("translations of the same weights (recorded)") == 2
    from keras_transformer_runtime import CTranslate2Translator

    [translation] = CTranslate2Translator(ct2).translate(["a dog runs."])
    assert isinstance(translation, str)
    assert (
        f"CTranslate2 export: {ct2} (already exported)"
        in run_script(args + ["--ctranslate2_dir", str(ct2)]).stdout
    )

    # Another model in the same directory is refused before anything runs.
    other = run_script(args + ["--d_model", "32"])
    assert other.returncode != 0 and "d_model: 16 -> 32" in other.stderr
    # More steps continue the run, and export the new weights as a new version.
    more = run_script(args + ["--train_steps", "40", "--ctranslate2_dir", str(ct2)])
    assert more.returncode == 0, more.stderr[-3000:]
    assert "training: continuing from step 30 to 40" in more.stdout
    summary = json.loads((model_dir / "summary.json").read_text())
    assert summary["training"]["final_step"] == 40
    assert sorted(os.listdir(export_dir)) == ["1", "2"]
    # The CTranslate2 export of the former weights is replaced.
    assert f"CTranslate2 export: {ct2}\n" in more.stdout
    assert json.loads((model_dir / "ctranslate2.json").read_text())["step"] == 40
    # The project moved whole: its rerun only reports, and exports nothing new.
    moved = tmp_path / "moved"
    moved.mkdir()
    for part in (model_dir, export_dir, ct2):
        shutil.move(part, moved / part.name)
    where = {str(model_dir): str(moved / "run"), str(export_dir): str(moved / "export")}
    args = [where.get(a, a) for a in args] + ["--train_steps", "40"]
    args += ["--ctranslate2_dir", str(moved / "ct2")]
    rerun = run_script(args)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "(already exported)" in rerun.stdout
    assert rerun.stdout.count("translations of the same weights (recorded)") == 2
    assert sorted(os.listdir(moved / "export")) == ["1", "2"]


@pytest.mark.large  # starts Python processes
def test_fine_tunes_a_finished_run_with_lora_and_a_marian_model_frozen(
    corpus, tmp_path, marian_directory
):
    general = tmp_path / "general"
    first = run_script(local_args(corpus, general, "--train_steps 6 --steps_per_checkpoint 3"))
    assert first.returncode == 0, first.stderr[-3000:]
    tuned, export_dir = tmp_path / "tuned", tmp_path / "export"
    extra = (  # float32: the merged model must translate exactly as the LoRA model
        f"--init_from {general} --lora_rank 2 --train_steps 4 --steps_per_checkpoint 2 "
        "--mixed_precision none"
    )
    run = run_script(local_args(corpus, tuned, f"{extra} --export_dir {export_dir}"))
    assert run.returncode == 0, run.stderr[-3000:]
    record = json.loads((tuned / "fine_tuning.json").read_text())
    assert record["lora_rank"] == 2 and record["init_from"] == str(general)
    assert record["merged_unchanged"] == "12/12 (float32)"  # the valid set's sentences
    assert 0 < record["trainable_weights"] < record["total_weights"] / 2
    assert (tuned / "spm.model").read_bytes() == (general / "spm.model").read_bytes()
    summaries = [json.loads((d / "summary.json").read_text()) for d in (general, tuned)]
    assert summaries[1]["parameters"] == summaries[0]["parameters"]  # LoRA merged
    serve = tf.saved_model.load(summaries[1]["export"]).signatures["serving_default"]
    assert serve(text=tf.constant(["a dog runs."]))["translation"].shape == (1,)
    # The run's settings are kept: another rank in the same directory is refused.
    other = run_script(local_args(corpus, tuned, extra.replace("rank 2", "rank 4")))
    assert other.returncode != 0 and "lora_rank: 2 -> 4" in other.stderr

    marian = tmp_path / "marian"
    extra = f"--init_from {marian_directory} --freeze embeddings,encoder --train_steps 2"
    run = run_script(local_args(corpus, marian, extra))
    assert run.returncode == 0, run.stderr[-3000:]
    assert (marian / "vocab.json").exists() and (marian / "source.spm").exists()
    record = json.loads((marian / "fine_tuning.json").read_text())
    assert record["frozen"] == ["embeddings", "encoder"]


@pytest.mark.large  # starts a Python process
@pytest.mark.skipif(importlib.util.find_spec("eflomal") is None, reason="needs eflomal")
def test_guided_alignment_trains_one_head_on_the_links_it_keeps(corpus, tmp_path):
    """`--guided_alignment` aligns the training pairs once (eflomal), keeps
    the links for a rerun, and trains a model that aligns with one head."""
    model_dir = tmp_path / "guided"
    args = local_args(corpus, model_dir, "--guided_alignment --train_steps 4")
    run = run_script(args + ["--steps_per_checkpoint", "2"])
    assert run.returncode == 0, run.stderr[-3000:]
    assert "word links:" in run.stdout and "over 400 pairs" in run.stdout
    links = (model_dir / "word_links.txt").read_text().splitlines()
    assert len(links) == 400 and sum(len(line.split()) for line in links) > 400
    recorded = json.loads((model_dir / "checkpoints" / "run.json").read_text())["model"]
    assert (recorded["alignment_layer"], recorded["alignment_heads"]) == (-1, 1)
    more = run_script(args + ["--train_steps", "6", "--steps_per_checkpoint", "2"])
    assert more.returncode == 0, more.stderr[-3000:]
    assert "word links:" not in more.stdout  # read back, not aligned again


def test_fine_tuning_flags_need_a_model_to_start_from(tmp_path, capsys):
    config = load_example("wmt_config")
    with pytest.raises(SystemExit):
        config.parse_config(["--lora_rank", "4", "--model_dir", str(tmp_path)])
    assert "give --init_from" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        config.parse_config(["--init_from", str(tmp_path), "--freeze", "encoder,vocabulary"])
    assert "'vocabulary' is not one of embeddings, encoder, decoder" in capsys.readouterr().err


@pytest.mark.large  # starts a Python process
def test_kill_then_rerun_resumes(corpus, tmp_path):
    model_dir = tmp_path / "run"
    args = local_args(corpus, model_dir, "--steps_per_checkpoint 10 --max_eval_sentences 2")
    process = subprocess.Popen(
        [sys.executable, SCRIPT, *args, "--train_steps", "400"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=ENV,
        cwd=ROOT,
    )
    deadline = time.time() + 300
    while not (model_dir / "checkpoints" / "ckpt-20.index").exists():
        assert process.poll() is None and time.time() < deadline
        time.sleep(0.1)
    process.send_signal(signal.SIGKILL)
    process.wait()
    resumed = run_script([*args, "--train_steps", "40"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads((model_dir / "summary.json").read_text())
    assert summary["training"]["initial_step"] >= 20
    assert summary["training"]["final_step"] == 40
    assert f"training: resumed from step {summary['training']['initial_step']}" in resumed.stdout


@pytest.mark.large  # trains, evaluates and exports: a whole run
def test_tfds_path_under_mock_data(tmp_path):
    script = load_example("wmt_ende")
    args = f"--preset tiny {MICRO_FLAGS} --model_dir {tmp_path / 'run'} --vocab_size 300"
    args += " --train_steps 4"
    args += " --steps_per_checkpoint 2 --max_eval_sentences 3 --beam_size 2"
    args += " --static_shapes yes --max_shapes 3"  # as on a GPU
    with tfds.testing.mock_data(num_examples=40):
        results = script.main(args.split())
    assert set(results) == {"valid", "test"}
    assert results["test"]["sentences"] == 3
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["data"] == "tfds:wmt14_translate/de-en" and config["source_lang"] == "en"
    shapes = json.loads((tmp_path / "run" / "training_done.json").read_text())["batch_shapes"]
    assert len(shapes["lengths"]) <= 3 and shapes["lengths"][-1] == 64  # the tiny preset's
    run = json.loads((tmp_path / "run" / "checkpoints" / "run.json").read_text())
    assert run["batch_shapes"] == shapes
    assert (
        f"| batch shapes | {len(shapes['lengths'])} (lengths"
        in (tmp_path / "run" / "summary.md").read_text()
    )


@pytest.mark.large  # trains, evaluates and exports: a whole run
def test_only_the_chief_evaluates_and_exports(tmp_path, monkeypatch):
    script = load_example("wmt_ende")
    monkeypatch.setattr(training, "is_chief", lambda strategy: False)
    args = f"--preset tiny {MICRO_FLAGS} --model_dir {tmp_path / 'run'} --vocab_size 300"
    args += " --train_steps 2"
    args += f" --steps_per_checkpoint 2 --export_dir {tmp_path / 'exports'}"
    with tfds.testing.mock_data(num_examples=40):
        assert script.main(args.split()) == {}
    assert (tmp_path / "run" / "checkpoints" / "ckpt-2.index").exists()  # it trained
    assert not (tmp_path / "exports").exists()
    assert not list((tmp_path / "run").glob("hypotheses.*"))


def test_partial_local_flags_fail_fast(tmp_path, capsys):
    script = load_example("wmt_ende")
    with pytest.raises(SystemExit) as stopped:
        script.main(["--preset", "tiny", "--model_dir", str(tmp_path), "--train_src", "x.en"])
    assert stopped.value.code != 0 and "--train_tgt" in capsys.readouterr().err
    assert not tmp_path.joinpath("config.json").exists()  # nothing was started


def test_no_arguments_offline_stop_at_once_with_the_local_files_advice(tmp_path, monkeypatch):
    def unreachable(*args, **kwargs):
        raise OSError("no network")

    monkeypatch.setattr(socket, "create_connection", unreachable)
    monkeypatch.chdir(tmp_path)
    script = load_example("wmt_ende")
    with pytest.raises(SystemExit, match="--train_src --train_tgt"):
        script.main(["--tfds_data_dir", str(tmp_path / "tfds")])
    assert not (tmp_path / "runs").exists()  # nothing was started


def test_every_setting_is_one_flag_with_its_default():
    config = load_example("wmt_config")
    names = [field.name for field in dataclasses.fields(config.RunConfig)]
    fields = load_example("wmt_fields")
    options = fields.build_parser(config.RunConfig).format_help().split("options:")[1]
    flags = [
        line.split()[0].rstrip(",") for line in options.splitlines() if line.startswith("  --")
    ]
    assert flags == [f"--{name}" for name in names]
    assert " ".join(options.split()).count("(default: ") == len(names)  # unwrapped
    for preset in config.RUN_PRESETS.values():
        assert set(preset) <= set(names)


def test_flags_override_the_preset_which_overrides_the_defaults():
    config = load_example("wmt_config").parse_config(["--preset", "small", "--warmup_steps", "9"])
    assert (config.model, config.vocab_size, config.warmup_steps) == ("small", 4000, 9)
    assert (config.beam_size, config.model_dir) == (4, os.path.join("runs", "small"))
    assert config.model_arguments() == {"dropout": 0.2, "norm_first": True, "max_length": 128}
    config = load_example("wmt_config").parse_config(["--preset", "tiny", "--d_model", "32"])
    assert config.model_arguments() == {"d_model": 32, "max_length": 64}
    # Guided alignment trains one head, unless told how many.
    guided = ["--preset", "tiny", "--guided_alignment"]
    config = load_example("wmt_config").parse_config(guided)
    assert config.model_arguments() == {"max_length": 64, "alignment_heads": 1}
    config = load_example("wmt_config").parse_config([*guided, "--alignment_heads", "2"])
    assert config.model_arguments() == {"max_length": 64, "alignment_heads": 2}


def test_the_small_preset_sets_dropout_by_passes_unless_a_dropout_is_given():
    config, dropout = load_example("wmt_config"), load_example("wmt_dropout")
    small = config.parse_config(["--preset", "small"])
    assert dropout.dropout_points(small) == ((9.0, 0.1), (14.0, 0.2))
    assert small.model_arguments()["dropout"] == 0.2  # until the run knows its passes
    fixed = config.parse_config(["--preset", "small", "--dropout", "0.3"])
    assert dropout.dropout_points(fixed) is None and fixed.model_arguments()["dropout"] == 0.3
    both = ["--preset", "small", "--dropout", "0.3", "--dropout_by_passes", "5:0.3,20:0.1"]
    assert dropout.dropout_points(config.parse_config(both)) == ((5.0, 0.3), (20.0, 0.1))
    off = config.parse_config(["--preset", "small", "--dropout_by_passes", "none"])
    assert dropout.dropout_points(off) is None
    assert dropout.dropout_points(config.parse_config([])) is None  # the paper's base run


@pytest.mark.parametrize("points", ["9-0.1", "9:0.1,x:0.2", "14:0.2,9:0.1", "9:1.5"])
def test_bad_dropout_points_are_a_usage_error(points, capsys):
    config = load_example("wmt_config")
    with pytest.raises(SystemExit):
        config.parse_config(["--dropout_by_passes", points])
    assert "--dropout_by_passes: " in capsys.readouterr().err


def test_the_encoder_and_the_decoder_take_their_own_depths():
    flags = ["--preset", "tiny", "--num_encoder_layers", "3", "--num_decoder_layers", "1"]
    config = load_example("wmt_config").parse_config(flags)
    arguments = config.model_arguments()
    assert arguments == {"max_length": 64, "num_encoder_layers": 3, "num_decoder_layers": 1}
    model = kt.Transformer.from_preset(config.model, vocab_size=50, **arguments)
    assert (len(model.encoder.stack), len(model.decoder.stack)) == (3, 1)


def test_a_translation_never_breaks_a_line_of_the_hypotheses(tmp_path):
    data, results = load_example("wmt_data"), load_example("wmt_evaluation")
    config = load_example("wmt_config").parse_config(["--model_dir", str(tmp_path)])

    class Translator:
        def translate(self, sources, batch_size, progress=None, target_lang=None):
            return ["ein\nHund", "zwei\r\nHunde", "drei"]

    sets = data.Data(train=None, valid=None, test=(["a", "b", "c"], ["x", "y", "z"]))
    results.evaluation_stage(config, Translator(), sets)
    lines = (tmp_path / "hypotheses.test.txt").read_text().split("\n")
    assert lines == ["ein Hund", "zwei Hunde", "drei", ""]


class TimedTranslator:
    """Costs `per_sentence` seconds a sentence on `clock` (the module's
    `time.perf_counter`), translates each sentence as itself, and records
    each call's progress label and sentences."""

    def __init__(self, clock, per_sentence):
        self.clock, self.per_sentence, self.calls = clock, per_sentence, []

    def translate(self, sources, batch_size, progress=None, target_lang=None):
        self.calls.append((progress, list(sources)))
        self.clock[0] += self.per_sentence * len(sources)
        return list(sources)


@pytest.fixture
def evaluation(monkeypatch):
    """wmt_evaluation with a clock that only its translator moves."""
    module, clock = load_example("wmt_evaluation"), [0.0]
    monkeypatch.setattr(module.time, "perf_counter", lambda: clock[0])
    return module, clock


def test_under_a_budget_the_valid_set_is_translated_only_if_it_fits(tmp_path, evaluation):
    """Issue 77, item 19: the test set first, timed; the valid set only if
    the budget has time for it at the test set's speed, and the summary
    says why not. A rerun reports what the run did."""
    results, clock = evaluation
    data = load_example("wmt_data")
    config = load_example("wmt_config").parse_config(["--model_dir", str(tmp_path)])
    sets = data.Data(train=None, valid=(["a"] * 8, ["a"] * 8), test=(["b"] * 4, ["b"] * 4))

    def evaluated(seconds, marker=None):
        translator = TimedTranslator(clock, per_sentence=0.05)
        end = clock[0] + seconds
        scores, hypotheses, left_out = results.evaluation_stage(
            config, translator, sets, marker, seconds_left=lambda: end - clock[0]
        )
        names = [progress.split(" (")[0] for progress, _ in translator.calls]
        return names, scores, hypotheses, left_out

    # The test set takes 0.2 s, and leaves 0.2 s; the valid set needs 0.4 s.
    names, scores, hypotheses, left_out = evaluated(0.4)
    assert names == ["translating test"] and set(scores) == set(hypotheses) == {"test"}
    assert left_out == {
        "valid": "not translated: about 0 s at the test set's 50.0 ms per sentence, 0 s of "
        "the budget left"
    }
    names, scores, _, left_out = evaluated(10.0)
    assert names == ["translating test", "translating valid"] and not left_out
    assert set(scores) == {"test", "valid"}
    marker = {"step": 7}
    evaluated(0.4, marker)
    names, scores, _, rerun = evaluated(10.0, marker)
    assert names == [] and set(scores) == {"test"} and set(rerun) == {"valid"}


def test_under_a_budget_the_test_set_ends_where_the_time_does(tmp_path, evaluation):
    """A barely trained model's outputs run on to the length limit and no
    estimate before the end knows it: the test set is translated a few
    batches at a time while the next fits, spread over the whole set, and
    scored on the sentences translated, each with its own reference."""
    results, clock = evaluation
    data = load_example("wmt_data")
    config = load_example("wmt_config").parse_config(
        ["--model_dir", str(tmp_path), "--eval_batch_size", "2"]
    )
    sources = [f"the {i}th sentence of the test set" for i in range(40)]
    references = list(sources)
    sets = data.Data(train=None, valid=None, test=(sources, references))
    translator = TimedTranslator(clock, per_sentence=0.01)  # 80 ms a chunk of 8
    end = clock[0] + 0.25
    scores, hypotheses, left_out = results.evaluation_stage(
        config, translator, sets, {"step": 1}, seconds_left=lambda: end - clock[0]
    )
    # Chunks at 0, 0.08 and 0.16 s; at 0.24 s, 0.01 s is left: no fourth.
    assert [len(chunk) for _, chunk in translator.calls] == [8, 8, 8]
    assert translator.calls[0][0] == "translating test (8 of 40)"
    translated = sorted(int(s.split()[1][:-2]) for _, chunk in translator.calls for s in chunk)
    assert len(set(translated)) == 24
    assert all(any(q * 10 <= i < q * 10 + 10 for i in translated) for q in range(4))  # all parts
    assert hypotheses["test"] == [sources[i] for i in translated]
    assert scores["test"]["sacrebleu"] == pytest.approx(100.0)  # each with its own reference
    assert left_out["test"].startswith("24 of 40 sentences translated and scored")
    lines = (tmp_path / "hypotheses.test.txt").read_text().splitlines()
    assert lines == hypotheses["test"]
    # Without a budget, the whole set in one call (sorted by length as a whole).
    translator = TimedTranslator(clock, per_sentence=0.01)
    scores, hypotheses, left_out = results.evaluation_stage(config, translator, sets)
    assert [len(chunk) for _, chunk in translator.calls] == [40] and not left_out
    assert hypotheses["test"] == sources


def test_an_early_evaluation_cannot_take_the_whole_budget(tmp_path):
    """A pessimistic estimate of the stages after training (an early,
    run-on evaluation) reserves at most MAX_RESERVE_FRACTION of the time
    left, so training keeps the rest."""
    module = load_example("wmt_budget")
    left = 500.0
    most = module.MAX_RESERVE_FRACTION * left
    assert module.capped_reserve(900.0, most) == pytest.approx(0.4 * left)
    assert module.capped_reserve(60.0, most) == 60.0
    # --max_train_minutes ends training 100 s before the budget would: those
    # 100 s are the stages' already, and only the rest is reserved in training.
    assert module.capped_reserve(150.0, most, beyond=100.0) == pytest.approx(50.0)
    assert module.capped_reserve(60.0, most, beyond=100.0) == 0.0


def test_a_rerun_without_an_evaluator_chooses_from_the_recorded_scores(tmp_path, monkeypatch):
    """`--eval_every 0` (or no validation set) on a rerun of a run that
    kept best checkpoints: the choice among the candidates uses the scores
    training recorded instead of crashing on the missing evaluator."""
    data, results = load_example("wmt_data"), load_example("wmt_results")
    config = load_example("wmt_config").parse_config(
        ["--model_dir", str(tmp_path), "--eval_every", "0"]
    )
    candidates = {"average_last": ["c/ckpt-8", "c/ckpt-10"], "best": ["b/ckpt-6"]}
    monkeypatch.setattr(results, "_candidates", lambda config: candidates)
    loaded = []
    monkeypatch.setattr(training, "average_checkpoints", lambda model, paths: loaded.append(paths))
    write_json_atomically(str(tmp_path / "evaluations.json"), [{"step": 6, "val_bleu": 12.5}])
    sets = data.Data(train=None, valid=(["a"], ["b"]), test=None)
    weights = results.weights_stage(config, None, sets, evaluator=None)
    assert weights["name"] == "best" and loaded == [["b/ckpt-6"]]
    assert "training recorded" in weights["reason"] and "best 12.50" in weights["reason"]
    # Nothing recorded: the paper's average.
    write_json_atomically(str(tmp_path / "evaluations.json"), [])
    assert results.weights_stage(config, None, sets, evaluator=None)["name"] == "average_last"


def test_the_export_marker_covers_what_the_export_depends_on(tmp_path, monkeypatch, capsys):
    """A rerun exports again when the export directory, the decoding
    settings or the weights changed, or the recorded version is gone; the
    path it reports exists."""
    results, config_module = load_example("wmt_results"), load_example("wmt_config")
    from keras_transformer_runtime import DecodingSettings

    written = []

    def fake_export(translator, export_dir):
        path = os.path.join(export_dir, str(len(written) + 1))
        os.makedirs(path)
        open(os.path.join(path, "saved_model.pb"), "w").close()
        written.append(path)
        return path

    monkeypatch.setattr(results.kt.export, "export_saved_model", fake_export)

    class Translator:
        def __init__(self, beam_size=4):
            self.settings = DecodingSettings(beam_size=beam_size)

    def export(export_dir, beam_size=4, step=30):
        args = ["--model_dir", str(tmp_path / "run"), "--export_dir", str(export_dir)]
        config = config_module.parse_config(args)
        os.makedirs(config.model_dir, exist_ok=True)
        weights = {"checkpoints": ["ckpt-30"]}
        path = results.export_stage(config, Translator(beam_size), {"final_step": step}, weights)
        assert os.path.exists(path)
        return path, "already exported" in capsys.readouterr().out

    first, _ = export(tmp_path / "a")
    assert export(tmp_path / "a") == (first, True)
    moved, again = export(tmp_path / "b")  # a new --export_dir gets its export
    assert not again and moved.startswith(str(tmp_path / "b"))
    beam, again = export(tmp_path / "b", beam_size=2)  # other decoding settings
    assert not again and beam != moved
    assert export(tmp_path / "b", beam_size=2) == (beam, True)
    os.remove(os.path.join(beam, "saved_model.pb"))  # the version was deleted
    gone, again = export(tmp_path / "b", beam_size=2)
    assert not again and gone != beam
    assert not export(tmp_path / "b", beam_size=2, step=40)[1]  # new weights


def test_the_summary_shows_the_budgets_margin():
    report = load_example("wmt_report")
    config = load_example("wmt_config").parse_config(["--budget_minutes", "30"])
    assert report.budget_margin(config, {"minutes": 29.25}) == " (budget 30 min: 0.8 min to spare)"
    assert report.budget_margin(config, {"minutes": 30.2}) == " (budget 30 min: over by 0.2 min)"
    unbounded = load_example("wmt_config").parse_config([])
    assert report.budget_margin(unbounded, {"minutes": 5.0}) == ""


def test_the_averages_are_scored_by_trainings_own_evaluator(tmp_path, monkeypatch):
    """The weights stage scores the averaged checkpoints with the evaluator
    training used (its search traced already), never a new one: a second
    evaluator traced the search again, 5-10 s of a 5-minute budget."""
    data, results = load_example("wmt_data"), load_example("wmt_results")
    config = load_example("wmt_config").parse_config(["--model_dir", str(tmp_path)])
    candidates = {
        "average_last": ["c/ckpt-8", "c/ckpt-10"],
        "average_best": ["b/ckpt-6", "c/ckpt-8"],
    }
    monkeypatch.setattr(results, "_candidates", lambda config: candidates)
    loaded = []
    monkeypatch.setattr(training, "average_checkpoints", lambda model, paths: loaded.append(paths))
    bleu = {"c/ckpt-8": 3.0, "b/ckpt-6": 4.0}  # by the first checkpoint of the average loaded

    class TrainingEvaluator:
        sources, verbose, model = ["a"], 2, None

        def set_model(self, model):
            self.model = model

        def evaluate(self, step):
            return {"val_bleu": bleu[loaded[-1][0]]}

    model, evaluator = object(), TrainingEvaluator()
    sets = data.Data(train=None, valid=(["a"], ["b"]), test=None)
    weights = results.weights_stage(config, model, sets, evaluator)
    assert weights["name"] == "average_best" and "average_last 3.00" in weights["reason"]
    assert loaded == [*candidates.values(), candidates["average_best"]]
    assert (evaluator.model, evaluator.verbose) == (model, 0)


def test_the_export_is_reserved_from_this_machines_tracing():
    """A machine that traces slowly (the first validation evaluation's
    extra time) gets a larger reserve for the export than the constant."""
    module, data = load_example("wmt_budget"), load_example("wmt_data")
    config = load_example("wmt_config").parse_config(["--export_dir", "x", "--beam_size", "1"])
    sets = data.Data(train=None, valid=None, test=(["a"] * 10, ["b"] * 10))

    def reserve(first_seconds):
        history = [{"seconds": first_seconds}, {"seconds": 1.0}]
        evaluator = type("Evaluator", (), {"history": history, "sources": ["s"] * 100})()
        return module.after_training_seconds(config, evaluator, sets)

    fast, slow = reserve(1.0 + 2.0), reserve(1.0 + 20.0)  # tracing 2 s, then 20 s
    # The slow machine's export: 6 tracings of 20 s instead of the 45 s floor;
    # nothing else (the averages are scored by training's evaluator, traced).
    expected = module.EXPORT_TRACINGS * 20.0 - module.EXPORT_SECONDS
    assert slow - fast == pytest.approx(expected)


def test_a_missing_model_to_start_from_says_how_to_get_one(tmp_path, capsys):
    config = load_example("wmt_config")
    with pytest.raises(SystemExit):
        config.parse_config(["--init_from", str(tmp_path / "opus-mt-en-de")])
    err = capsys.readouterr().err
    assert "neither a Hugging Face Marian (OPUS-MT) directory" in err and "hf download" in err


@pytest.mark.large  # builds a run's vocabulary
def test_a_run_that_fails_before_training_leaves_nothing_that_refuses_its_rerun(corpus, tmp_path):
    """A fine-tuning run whose start failed left its config.json, and the
    corrected rerun into the same --model_dir was refused."""
    example = load_example("wmt_ende")
    model_dir = tmp_path / "run"

    # A vocabulary too small for its special and byte pieces: the vocabulary stage refuses it.
    def args(extra=""):
        flags = f"--train_steps 2 --steps_per_checkpoint 2 {extra}"
        return [*local_args(corpus, model_dir, flags), "--export_dir", ""]

    with pytest.raises(ValueError, match="must leave room"):
        example.main(args("--vocab_size 12"))
    assert not model_dir.exists()
    model_dir.mkdir()
    (model_dir / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="must leave room"):
        example.main(args("--vocab_size 12"))
    assert os.listdir(model_dir) == ["notes.txt"]
    # The corrected rerun (another vocabulary size, a frozen setting) runs.
    example.main(args())
    assert (model_dir / "config.json").exists()


def test_a_short_budget_says_at_its_start_how_far_past_it_the_run_may_go():
    """Issue 77, item 19: a 3-minute run took 4.4 minutes, saying so only
    in its summary. Under 5 minutes the fixed stages cannot fit, and the
    first line of training says how far past the budget they may go; a
    longer budget reserves for them and says how long training gets."""
    module = load_example("wmt_budget")
    short = module.Stopwatch(3, started=time.time() - 20)
    line = module.budget_outlook(short, 240.0, module.MAX_RESERVE_FRACTION * short.left())
    # 160 s left, at most 64 s of it reserved: 176 s of the 240 fall outside.
    assert "about 240 s after it" in line and "1.6 min to train" in line
    assert re.search(r"up to 2\.9 min past the budget", line), line
    ample = module.Stopwatch(30, started=time.time() - 20)
    line = module.budget_outlook(ample, 240.0, module.MAX_RESERVE_FRACTION * ample.left())
    assert "past the budget" not in line and "25.7 min to train" in line
