"""What a run keeps beside its checkpoints for loading it back: the record
of its model (`checkpoints/run.json`, which `check_run` writes) and its
tokenizer (`checkpoints/tokenizer.json`)."""

import json
import os

import keras
import tensorflow as tf

from keras_transformer.training.checkpoints import CHECKPOINT_DIR
from keras_transformer.training.checkpoints import _read_run
from keras_transformer.training.checkpoints import write_json_atomically

TOKENIZER_FILE = "tokenizer.json"


def read_run(model_dir):
    """The record of `model_dir`'s run (`checkpoints/run.json`: the
    model's architecture under `"model"`, the tokenizer's fingerprint,
    accumulation), or `None` for a directory without one.

    Example:

    >>> read_run("runs/m30k")["model"]["d_model"]
    256
    """
    return _read_run(os.path.join(os.fspath(model_dir), CHECKPOINT_DIR))


def keep_tokenizer(model_dir, tokenizer):
    """Keeps `tokenizer` with `model_dir`'s checkpoints, as Keras
    serializes it (`checkpoints/tokenizer.json`), unless the run keeps one
    already or the tokenizer has no config (`Tokenizer.get_config`):
    `Translator.from_run` loads it back.

    Example:

    >>> keep_tokenizer("runs/m30k", SentencePieceTokenizer.from_file("spm.model"))
    """
    path = os.path.join(os.fspath(model_dir), CHECKPOINT_DIR, TOKENIZER_FILE)
    if tf.io.gfile.exists(path) or tokenizer.get_config() is None:
        return
    tf.io.gfile.makedirs(os.path.dirname(path))
    write_json_atomically(path, keras.saving.serialize_keras_object(tokenizer))


def kept_tokenizer(model_dir):
    """The tokenizer `keep_tokenizer` kept for `model_dir`'s run, or `None`."""
    path = os.path.join(os.fspath(model_dir), CHECKPOINT_DIR, TOKENIZER_FILE)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        return keras.saving.deserialize_keras_object(json.load(f))
