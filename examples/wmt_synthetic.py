"""Synthetic training data for `wmt_ende.py`, translated by
`keras_transformer_runtime.corpus.pipeline` (Apache Beam, `pip install -e
".[beam]"`) with `--synthetic_workers` local processes:

* back-translation (Sennrich et al., 2016; sampled, Edunov et al., 2018):
  `--backtranslate_with` (a reverse model) translates the target-side
  monolingual text of `--monolingual_tgt` into the source language, by
  beam search or one random draw (`--bt_search`); each synthetic pair
  (its translation, the original line) is mixed with the real pairs,
  `--bt_ratio` synthetic pairs drawn per real one (default: in
  proportion to their numbers), its source marked `<BT>` with `--bt_tag`
  (Caswell et al., 2019; the tag is then one piece of the vocabulary);
* sequence-level distillation (Kim & Rush, 2016): `--distill_from` (the
  teacher) translates the training sources by beam search, and the model
  trains on its translations instead of the references.

A model is a run's `--model_dir` (the export its run wrote), an export
(a SavedModel directory, a CTranslate2 directory, a `.tflite` or `.onnx`
file) or a Hugging Face OPUS-MT directory (exported once into
`--model_dir`). The translations are kept in `--model_dir/backtranslation`
or `--model_dir/distillation` and reused by a rerun (a killed one goes on
where it stopped).
"""

import gzip
import json
import os
import sys

from keras_transformer import training
from keras_transformer.training.mixing import prefixed_sources
from keras_transformer_runtime.runners import loading
from keras_transformer_runtime.text import files as text_files
from keras_transformer_runtime.translate_output import one_line

BT_TAG = "<BT>"
SEARCH = {"beam": "translate", "sample": "sample"}


def export_of(config, path, role):
    """The export to translate with, from `path` (see the module); `role`
    names it in messages and in the OPUS-MT export's directory."""
    record = os.path.join(path, "export.json")
    if os.path.isfile(record):
        with open(record) as f:
            export_dir = json.load(f)["export_dir"]  # relative to the run (or, before, absolute)
        return os.path.normpath(os.path.join(path, export_dir))
    if os.path.isfile(os.path.join(path, "training_done.json")):
        sys.exit(f"--{role}: {path} is a run without an export; rerun it with --export_dir.")
    if os.path.isfile(os.path.join(path, "vocab.json")):
        return _exported_marian(config, path, role)
    try:
        loading.runner_kind(path)
    except ValueError:
        sys.exit(
            f"--{role}: {path} is neither a run's --model_dir, an export (SavedModel, "
            "CTranslate2, .tflite, .onnx) nor an OPUS-MT directory."
        )
    return path


def _exported_marian(config, path, role):
    """An OPUS-MT directory's SavedModel, exported once into the run."""
    import keras_transformer as kt

    target = os.path.join(config.model_dir, f"{role}_export")
    if not os.path.isdir(target):
        pretrained = kt.pretrained.load_marian(path)
        translator = kt.Translator(pretrained.model, pretrained.tokenizer, pretrained.settings)
        kt.export.export_saved_model(translator, target)
    return target


def translated(config, export, files, name, search):
    """`files` translated by `export` into `--model_dir/NAME` (kept from
    an earlier run); the summary."""
    from keras_transformer_runtime.corpus import pipeline as corpus
    from keras_transformer_runtime.corpus.shards import CorpusJob

    output = os.path.join(config.model_dir, name)
    done = os.path.join(output, corpus.SUMMARY)
    if os.path.exists(done):
        with open(done) as f:
            summary = json.load(f)
        print(f"{name}: already translated ({summary['lines']:,} lines)")
        return summary
    workers = config.synthetic_workers or os.cpu_count() or 1
    print(f"{name}: translating {', '.join(files)} with {export} ({search}, {workers} workers)")
    summary = corpus.translate_corpus(
        files,
        output,
        export,
        CorpusJob(mode=SEARCH[search], seed=config.seed),
        workers=workers,
        threads=max(1, (os.cpu_count() or 1) // workers),
    )
    print(
        f"{name}: {summary['translated']:,} lines in {summary['seconds']:.0f}s "
        f"({summary['sentences_per_second']:.1f}/s), {summary['errors']:,} errors"
    )
    return summary


def pair_files(config, name, source_is_translation):
    """The translated lines of `--model_dir/NAME` as parallel `.gz` files
    (`(source, target)` paths), in the inputs' order; the source is the
    translation for back-translation, the original for distillation."""
    from keras_transformer_runtime.corpus import pipeline as corpus

    directory = os.path.join(config.model_dir, name)
    paths = tuple(os.path.join(directory, f"pairs.{side}.gz") for side in ("src", "tgt"))
    if all(os.path.exists(p) for p in paths):
        return paths
    temporary = [p + ".tmp" for p in paths]
    with gzip.open(temporary[0], "wt") as sources, gzip.open(temporary[1], "wt") as targets:
        for record in corpus.read_records(directory, kinds=("translations",)):
            pair = (record["translation"], record["source"])
            pair = pair if source_is_translation else pair[::-1]
            sources.write(one_line(pair[0]) + "\n")
            targets.write(one_line(pair[1]) + "\n")
    for path, done in zip(temporary, paths, strict=True):
        os.replace(path, done)
    return paths


def user_symbols(config):
    """The vocabulary's extra pieces the synthetic data needs."""
    return (BT_TAG,) if config.monolingual_tgt and config.bt_tag else ()


def synthetic_stage(config, data):
    """`data` with its training pairs from the synthetic-data settings
    (see the module): the same `data` when none is set."""
    if config.distill_from:
        export = export_of(config, config.distill_from, "distill_from")
        translated(config, export, [config.train_src], "distillation", "beam")
        sources, targets = pair_files(config, "distillation", source_is_translation=False)
        data.described = (
            f"{text_files.count_lines(targets):,} pairs: {config.distill_from}'s translations "
            "of the training sources"
        )
        print(f"distillation: training on {data.described}")
        data.train = training.text_pairs_from_files(sources, targets)
    if config.monolingual_tgt:
        export = export_of(config, config.backtranslate_with, "backtranslate_with")
        patterns = [p.strip() for p in config.monolingual_tgt.split(",") if p.strip()]
        translated(config, export, patterns, "backtranslation", config.bt_search)
        data.train, data.described = _with_backtranslations(config, data.train)
    return data


def _with_backtranslations(config, real):
    """The real pairs and the back-translated ones, mixed, and what they
    are (for the summary)."""
    sources, targets = pair_files(config, "backtranslation", source_is_translation=True)
    synthetic = training.text_pairs_from_files(sources, targets)
    if config.bt_tag:
        synthetic = prefixed_sources(synthetic, BT_TAG)
    sizes = {
        "real": text_files.count_lines(config.train_tgt),
        "synthetic": text_files.count_lines(targets),
    }
    ratio = config.bt_ratio if config.bt_ratio is not None else sizes["synthetic"] / sizes["real"]
    weights = {"real": 1 / (1 + ratio), "synthetic": ratio / (1 + ratio)}
    tagged = f" (starting with {BT_TAG})" if config.bt_tag else ""
    described = (
        f"{sizes['real']:,} real and {sizes['synthetic']:,} back-translated pairs{tagged}, "
        f"drawn {weights['real']:.3f} / {weights['synthetic']:.3f}"
    )
    print(f"back-translation: {described}")
    mixed = training.mix_pairs(
        {"real": real, "synthetic": synthetic},
        weights,
        sum(sizes.values()),
        seed=None,  # draws afresh in a resumed run
    )
    return mixed, described


def check_synthetic_flags(parser, config):
    """Stops with a usage error for synthetic-data flags that do not go
    together (`parse_config` calls it)."""
    if bool(config.monolingual_tgt) != bool(config.backtranslate_with):
        parser.error("--monolingual_tgt and --backtranslate_with go together")
    if (config.bt_tag or config.bt_ratio is not None) and not config.monolingual_tgt:
        parser.error("--bt_tag and --bt_ratio go with --monolingual_tgt")
    if config.multilingual and (config.monolingual_tgt or config.distill_from):
        parser.error("synthetic data is made for one target language, not several")
    if config.bt_ratio is not None and not config.bt_ratio > 0:
        parser.error(f"--bt_ratio must be positive, not {config.bt_ratio}")
    if config.synthetic_workers is not None and config.synthetic_workers < 1:
        parser.error(f"--synthetic_workers must be positive, not {config.synthetic_workers}")
    if (config.monolingual_tgt or config.distill_from) and config.uses_tfds:
        parser.error("synthetic data needs local files or --data, not TFDS")
