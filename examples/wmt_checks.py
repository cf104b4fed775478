"""The checks of `wmt_ende.py`'s flags that need the whole `RunConfig`:
values that do not go together, or name what is not there, stop with a
usage error before anything starts (`parse_config` calls `check_flags`)."""

import os

from wmt_corpora import CORPORA
from wmt_dropout import dropout_points

from keras_transformer.training import DropoutByPasses
from keras_transformer.training.fine_tuning import FREEZABLE
from keras_transformer_runtime.text import languages

from wmt_synthetic import check_synthetic_flags


def check_flags(parser, config):
    """Stops through `parser.error` at the first of `config`'s flags
    that is wrong: languages, synthetic data, fine-tuning, local files."""
    try:
        languages.check_codes(config.target_langs)
    except ValueError as error:
        parser.error(f"--target_langs: {error}")
    if config.multilingual and not config.data:
        parser.error(
            f"--target_langs {config.target_langs}: several target languages need a --data corpus "
            f"that has them ({', '.join(CORPORA)})"
        )
    if config.data:
        try:
            CORPORA[config.data].check_languages((config.source_lang, *config.target_codes))
        except ValueError as error:
            parser.error(f"--source_lang/--target_langs: {error}")
    check_synthetic_flags(parser, config)
    try:
        points = dropout_points(config)
        if points is not None:
            DropoutByPasses(1, points)
    except ValueError as error:
        parser.error(f"--dropout_by_passes: {error}")
    if not config.temperature > 0:
        parser.error(f"--temperature must be positive, not {config.temperature}")
    if (config.freeze or config.lora_rank or config.lora_alpha) and not config.init_from:
        parser.error("--freeze, --lora_rank and --lora_alpha fine-tune a model: give --init_from")
    for part in (config.freeze or "").split(","):
        if part.strip() and part.strip() not in FREEZABLE:
            accepted = ", ".join(FREEZABLE)
            parser.error(f"--freeze: {part.strip()!r} is not one of {accepted}")
    if config.init_from and not _a_model_to_start_from(config.init_from):
        parser.error(
            f"--init_from {config.init_from}: neither a Hugging Face Marian (OPUS-MT) directory "
            "(vocab.json, source.spm) nor a finished run's --model_dir (spm.model). Download an "
            "OPUS-MT model with `hf download Helsinki-NLP/opus-mt-en-de --local-dir "
            'opus-mt-en-de` (pip install -e ".[pretrained]"), or train one with this script.'
        )
    if config.lora_rank is not None and config.lora_rank < 1:
        parser.error(f"--lora_rank must be positive, not {config.lora_rank}")
    if any(config.local_files) and not all(config.local_files):
        parser.error(
            "local data needs --train_src, --train_tgt, --test_src and --test_ref "
            "(and optionally --valid_src, --valid_tgt)"
        )


def _a_model_to_start_from(path):
    """Whether `path` holds a model `--init_from` starts from: a Marian
    directory (`vocab.json`, `source.spm`) or a run's (`spm.model`)."""
    marian = all(os.path.exists(os.path.join(path, f)) for f in ("vocab.json", "source.spm"))
    return marian or os.path.exists(os.path.join(path, "spm.model"))
