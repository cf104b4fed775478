"""Loading the example scripts, which are modules of `examples/`, not of
the package, and the named corpus of their tests."""

import dataclasses
import hashlib
import importlib
import os
import sys

# The smallest whole run of the example: its tests' flags.
TINY_RUN_FLAGS = (
    "--preset tiny --num_layers 1 --d_model 16 --num_heads 2 --d_ff 32 --vocab_size 300 "
    "--train_steps 2 --steps_per_checkpoint 2 --beam_size 1 --export_dir"
).split() + [""]
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "examples")


def load_example(name):
    """The module `examples/<name>.py`, imported the way the scripts import
    each other (their folder first on `sys.path`)."""
    if EXAMPLES not in sys.path:
        sys.path.insert(0, EXAMPLES)
    return importlib.import_module(name)


def mirrored_corpus(lines, languages, text):
    """Multi30k's corpus layout (`wmt_corpora.CORPORA["multi30k"]`) with
    `lines` per split (`{"train": ..., "valid": ..., "test": ...}`) in
    `languages`, each file's text `text(role, language, count)` (bytes),
    and the digests of those texts."""
    real = load_example("wmt_corpora").CORPORA["multi30k"]
    digests = {
        real.file_name(role, language): hashlib.sha256(text(role, language, count)).hexdigest()
        for role, count in lines.items()
        for language in languages
    }
    return dataclasses.replace(real, lines=lines, digests=digests)
