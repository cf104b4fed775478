"""A trained run's directory back as a `Translator` (`Translator.from_run`):
the model its checkpoints record, the tokenizer `train` kept beside them,
and the weights and decoding settings the run chose (`record_choice`)."""

import json
import os

from keras_transformer.models.transformer import Transformer
from keras_transformer.tokenization import MarianTokenizer
from keras_transformer.tokenization import SentencePieceTokenizer
from keras_transformer.training import averaging
from keras_transformer.training import checkpoints
from keras_transformer.training import records

# What the run chose for translating: its weights and decoding settings.
CHOICE_FILE = "translator.json"
# How many of the last checkpoints a run without a recorded choice averages
# (the paper's base models average the last 5).
AVERAGED_CHECKPOINTS = 5


def record_choice(model_dir, translator, checkpoint_paths, reason=""):
    """Records in `model_dir/translator.json` what `Translator.from_run`
    loads: the checkpoints whose average to translate with (stored
    relative to `model_dir`, so that the run may move), `translator`'s
    decoding settings and its model's dtype policy (a model that computed
    in bfloat16 translates the same only in it), with the `reason`.

    Example:

    >>> paths = best_checkpoint_paths("runs/m30k")[:5]
    >>> record_choice("runs/m30k", Translator(model, tokenizer), paths, "best 5")
    """
    if not checkpoint_paths:
        raise ValueError("`checkpoint_paths` must name at least one checkpoint. Received: []")
    model_dir = os.fspath(model_dir)
    relative = [os.path.relpath(os.fspath(path), model_dir) for path in checkpoint_paths]
    record = {
        "checkpoints": relative,
        "settings": translator.settings.to_dict(),
        "dtype_policy": translator.model.dtype_policy.name,
        "reason": reason,
    }
    checkpoints.write_json_atomically(os.path.join(model_dir, CHOICE_FILE), record)


def run_record(model_dir):
    """`model_dir`'s run record (`checkpoints/run.json`, which `train`
    writes: the model's architecture under `"model"`); a `ValueError` for a
    directory that is no run."""
    if not os.path.isdir(os.fspath(model_dir)):
        raise ValueError(
            f"`model_dir` must be a training run's directory. Received: model_dir={model_dir!r} "
            "(no such directory)"
        )
    run = records.read_run(model_dir)
    if run is None or "model" not in run:
        raise ValueError(
            f"`model_dir` must be a training run's directory: {model_dir} has no "
            f"{os.path.join(checkpoints.CHECKPOINT_DIR, checkpoints.RUN_FILE)} (train writes "
            "it). Received: model_dir=" + repr(os.fspath(model_dir))
        )
    return run


def run_tokenizer(model_dir):
    """The tokenizer `train(..., tokenizer=...)` kept with `model_dir`'s
    checkpoints; for a run recorded before it kept one, the SentencePiece
    model (`spm.model`) or Marian files (`vocab.json`, `source.spm`,
    `target.spm`) in `model_dir`, as `examples/wmt_ende.py` writes them."""
    kept = records.kept_tokenizer(model_dir)
    if kept is not None:
        return kept
    model_dir = os.fspath(model_dir)
    if os.path.exists(os.path.join(model_dir, "spm.model")):
        return SentencePieceTokenizer.from_file(os.path.join(model_dir, "spm.model"))
    if os.path.exists(os.path.join(model_dir, "vocab.json")):
        return MarianTokenizer.from_directory(model_dir)
    raise ValueError(
        f"{model_dir} keeps no tokenizer: the run was trained without passing "
        "`tokenizer=` to `train`, and holds no spm.model or Marian files. Pass "
        "`tokenizer=` to `Translator.from_run`."
    )


def run_choice(model_dir):
    """`(checkpoint_paths, settings, dtype_policy)`: what `record_choice`
    recorded in `model_dir`, or else the average of the last
    `AVERAGED_CHECKPOINTS` checkpoints (those the budget kept for
    averaging, if any), no settings and no policy."""
    model_dir = os.fspath(model_dir)
    path = os.path.join(model_dir, CHOICE_FILE)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
        paths = [os.path.join(model_dir, name) for name in record["checkpoints"]]
        return paths, record.get("settings") or {}, record.get("dtype_policy")
    paths = averaging.averaging_checkpoint_paths(model_dir, AVERAGED_CHECKPOINTS)
    if not paths:
        raise ValueError(f"{model_dir} holds no checkpoints to translate with.")
    return paths, {}, None


def translator_from_run(
    cls, model_dir, tokenizer=None, checkpoint_paths=None, dtype=None, **changes
):  # noqa: E501
    """`Translator.from_run`: a `cls` of `model_dir`'s model (in the dtype
    policy `dtype`, else the recorded one), tokenizer and chosen weights,
    with its recorded decoding settings and `changes`."""
    architecture = run_record(model_dir)["model"]
    paths, settings, recorded_dtype = run_choice(model_dir)
    model = Transformer(**architecture, dtype=dtype or recorded_dtype)
    if tokenizer is None:
        tokenizer = run_tokenizer(model_dir)
    if checkpoint_paths is not None:
        paths = list(checkpoint_paths)
    checkpoints.average_checkpoints(model, paths)
    return cls(model, tokenizer, **{**settings, **changes})
