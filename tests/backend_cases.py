"""One set of weights, every backend: reference outputs written on TensorFlow
and compared on JAX or PyTorch.

`write_reference(directory)` (TensorFlow) saves, for every public layer and
for `Transformer`, a `.keras` file, the inputs and TensorFlow's outputs:
the full pass, `encode` and cached `decode_step` logits for the model. It
also records two `fit` steps of the paper's recipe (losses, metrics, the
logits after them), and trains a small `Transformer` to reverse id
sequences and saves it with the outputs of the package's (TensorFlow)
greedy search. `compare(directory)` (any backend) loads each file and
returns the largest absolute difference per output.
`tests/test_backends.py` runs the reference in a TensorFlow subprocess;
run this module to print the table:

    python -m tests.backend_cases              # TensorFlow vs JAX and PyTorch
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import keras
import numpy as np
from keras import ops

import keras_transformer
from keras_transformer.special_ids import BOS_ID
from keras_transformer.special_ids import EOS_ID
from tests.test_case import functional_model

RNG = np.random.default_rng(0)
HIDDEN = RNG.normal(size=(2, 5, 16)).astype("float32")
MEMORY = RNG.normal(size=(2, 7, 16)).astype("float32")
MEMORY_MASK = np.array([[1] * 7, [1] * 3 + [0] * 4], bool)
TARGET_MASK = np.array([[1] * 5, [1] * 4 + [0]], bool)
IDS = np.array([[5, 9, 3, 17, 2], [4, 4, 11, 0, 0]], "int32")

# name -> (layer factory, call inputs, call options). Each layer is wrapped
# in a functional model, the way a user would hold it.
LAYERS = {
    "TokenEmbedding": (lambda: keras_transformer.TokenEmbedding(20, 16), {"inputs": IDS}, {}),
    "TokenEmbedding (reverse)": (
        lambda: keras_transformer.TokenEmbedding(20, 16),
        {"inputs": HIDDEN},
        {"reverse": True},
    ),
    "PositionalEncoding": (lambda: keras_transformer.PositionalEncoding(), {"inputs": HIDDEN}, {}),
    "LearnedPositionalEmbedding": (
        lambda: keras_transformer.LearnedPositionalEmbedding(12),
        {"inputs": HIDDEN},
        {},
    ),
    "MultiHeadAttention": (
        lambda: keras_transformer.MultiHeadAttention(num_heads=4, key_dim=4),
        {"query": HIDDEN, "value": MEMORY, "value_mask": MEMORY_MASK},
        {},
    ),
    "FeedForward": (lambda: keras_transformer.FeedForward(32), {"inputs": HIDDEN}, {}),
    "EncoderLayer": (
        lambda: keras_transformer.EncoderLayer(num_heads=4, d_ff=32),
        {"inputs": MEMORY, "padding_mask": MEMORY_MASK},
        {},
    ),
    "DecoderLayer": (
        lambda: keras_transformer.DecoderLayer(num_heads=4, d_ff=32),
        {
            "decoder_sequence": HIDDEN,
            "encoder_sequence": MEMORY,
            "decoder_padding_mask": TARGET_MASK,
            "encoder_padding_mask": MEMORY_MASK,
        },
        {},
    ),
    "Encoder (pre-norm)": (
        lambda: keras_transformer.Encoder(2, num_heads=4, d_ff=32, norm_first=True),
        {"inputs": MEMORY, "padding_mask": MEMORY_MASK},
        {},
    ),
    "Decoder": (
        lambda: keras_transformer.Decoder(2, num_heads=4, d_ff=32),
        {
            "decoder_sequence": HIDDEN,
            "encoder_sequence": MEMORY,
            "encoder_padding_mask": MEMORY_MASK,
        },
        {},
    ),
}
# name -> Transformer arguments.
MODELS = {
    "Transformer (tiny)": {"vocab_size": 40},
    "Transformer (pre-norm, learned, untied)": {
        "vocab_size": 40,
        "norm_first": True,
        "position_encoding": "learned",
        "tie_embeddings": "none",
        "max_length": 16,
    },
}
SOURCE = np.array([[5, 9, 3, 17, 8, 3, 0], [4, 4, 11, 3, 0, 0, 0]], "int32")
TARGET = np.array([[2, 7, 9, 30, 6], [2, 12, 12, 3, 0]], "int32")

# Two `train_on_batch` steps with `training.compile_for_training`: the
# paper's loss (label smoothing 0.1), masked metrics and Adam schedule.
FIT_MODEL = {"vocab_size": 40, "dropout": 0.0}
FIT_STEPS = 2
FIT_LOGS = ("loss", "accuracy", "perplexity", "tokens")

# The reverser: sequences of ids 4..19 reversed, each ending with EOS.
REVERSER = {"vocab_size": 20, "num_layers": 2, "d_model": 64, "num_heads": 4, "d_ff": 128}
REVERSER_MAX_LENGTH = 12


def _file_name(name):
    return "".join(c if c.isalnum() else "_" for c in name)


def model_outputs(model):
    """The full pass, `encode`, and `decode_step` logits one position at a
    time through a fixed-shape cache, as NumPy."""
    cache = model.init_cache(model.encode(SOURCE), SOURCE != 0, max_length=8)
    steps = []
    for index in range(TARGET.shape[1]):
        logits, cache = model.decode_step(TARGET[:, index : index + 1], cache, index)
        steps.append(ops.convert_to_numpy(logits))
    return {
        "logits": ops.convert_to_numpy(model((SOURCE, TARGET))),
        "encode": ops.convert_to_numpy(model.encode(SOURCE)),
        "decode_step": np.concatenate(steps, axis=1),
    }


def fit_batch():
    """Sources, decoder inputs and labels with padding, for `FIT_MODEL`."""
    target = np.concatenate([TARGET, np.array([[3], [0]], "int32")], axis=1)
    return (SOURCE, target[:, :-1]), target[:, 1:]


def fit_outputs(model):
    """The logs of each of `FIT_STEPS` steps and the logits after them."""
    from keras_transformer import training

    training.compile_for_training(model, training.TrainingSettings(warmup_steps=10))
    inputs, labels = fit_batch()
    outputs = {}
    for step in range(FIT_STEPS):
        logs = model.train_on_batch(inputs, labels, return_dict=True)
        for name in FIT_LOGS:
            outputs[f"{name} after step {step + 1}"] = np.float32(logs[name])
    outputs["logits after the steps"] = ops.convert_to_numpy(model(inputs))
    return outputs


def reversal_pairs(count, seed):
    """Source ids (EOS-terminated, padded) and their reversals."""
    rng = np.random.default_rng(seed)
    width = REVERSER_MAX_LENGTH
    sources = np.zeros((count, width), "int32")
    targets_in = np.zeros((count, width), "int32")
    targets_out = np.zeros((count, width), "int32")
    for row in range(count):
        ids = list(rng.integers(4, REVERSER["vocab_size"], size=rng.integers(3, 8)))
        reversed_ids = ids[::-1]
        sources[row, : len(ids) + 1] = ids + [EOS_ID]
        targets_in[row, : len(ids) + 1] = [BOS_ID] + reversed_ids
        targets_out[row, : len(ids) + 1] = reversed_ids + [EOS_ID]
    return sources, targets_in, targets_out


def _train_reverser():
    from keras_transformer import training

    keras.utils.set_random_seed(0)
    model = keras_transformer.Transformer(**REVERSER, dropout=0.0)
    training.compile_for_training(
        model, training.TrainingSettings(warmup_steps=100, label_smoothing=0.0)
    )
    sources, targets_in, targets_out = reversal_pairs(4096, seed=0)
    model.fit((sources, targets_in), targets_out, batch_size=64, epochs=6, verbose=0)
    return model


def _tensorflow_greedy(model, sources):
    """The package's greedy search (a `tf.while_loop`) over `decode_step`."""
    from keras_transformer.decoding import greedy_search

    def tokens_to_logits(token_ids, cache, index):
        logits, cache = model.decode_step(token_ids, cache, index)
        return logits[:, -1], cache

    cache = model.init_cache(model.encode(sources), sources != 0, max_length=REVERSER_MAX_LENGTH)
    ids, _ = greedy_search(tokens_to_logits, cache, len(sources), REVERSER_MAX_LENGTH)
    return ops.convert_to_numpy(ids)


def write_reference(directory):
    """Saves every case's `.keras` file, inputs and TensorFlow outputs."""
    assert keras.backend.backend() == "tensorflow", "the reference is TensorFlow's"
    keras.utils.set_random_seed(1)
    for name, (factory, inputs, options) in LAYERS.items():
        model = functional_model(factory(), inputs, options)
        model.save(os.path.join(directory, _file_name(name) + ".keras"))
        np.savez(
            os.path.join(directory, _file_name(name) + ".npz"),
            output=ops.convert_to_numpy(model(inputs)),
        )
    for name, arguments in MODELS.items():
        model = keras_transformer.Transformer.from_preset("tiny", **arguments)
        model.save(os.path.join(directory, _file_name(name) + ".keras"))
        np.savez(os.path.join(directory, _file_name(name) + ".npz"), **model_outputs(model))
    model = keras_transformer.Transformer.from_preset("tiny", **FIT_MODEL)
    model.save(os.path.join(directory, "fit.keras"))
    np.savez(os.path.join(directory, "fit.npz"), **fit_outputs(model))
    reverser = _train_reverser()
    reverser.save(os.path.join(directory, "reverser.keras"))
    sources, _, _ = reversal_pairs(16, seed=1)
    greedy = _tensorflow_greedy(reverser, sources)
    np.savez(os.path.join(directory, "reverser.npz"), sources=sources, greedy=greedy)


def compare(directory):
    """`{case: {output: max |this backend − TensorFlow|}}` for every case."""
    differences = {}
    for name, (_, inputs, _) in LAYERS.items():
        model = keras.saving.load_model(os.path.join(directory, _file_name(name) + ".keras"))
        expected = np.load(os.path.join(directory, _file_name(name) + ".npz"))["output"]
        actual = ops.convert_to_numpy(model(inputs))
        differences[name] = {"output": float(np.abs(actual - expected).max())}
    for name in MODELS:
        model = keras.saving.load_model(os.path.join(directory, _file_name(name) + ".keras"))
        expected = np.load(os.path.join(directory, _file_name(name) + ".npz"))
        actual = model_outputs(model)
        differences[name] = {
            key: float(np.abs(actual[key] - expected[key]).max()) for key in actual
        }
    model = keras.saving.load_model(os.path.join(directory, "fit.keras"))
    expected = np.load(os.path.join(directory, "fit.npz"))
    actual = fit_outputs(model)
    differences["fit, compile_for_training"] = {
        key: float(np.abs(actual[key] - expected[key]).max()) for key in actual
    }
    return differences


_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _environment(backend):
    """This process's environment with Keras on `backend`, TensorFlow quiet."""
    return {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}


def reference_in_subprocess(directory):
    """Runs `write_reference(directory)` in a TensorFlow process."""
    code = f"from tests.backend_cases import write_reference; write_reference({directory!r})"
    subprocess.run(
        [sys.executable, "-c", code], check=True, env=_environment("tensorflow"), cwd=_ROOT
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["jax", "torch"])
    parser.add_argument("--directory", help="where the reference is (written if empty)")
    parser.add_argument("--json", action="store_true", help="(internal) print this backend's")
    args = parser.parse_args(argv)
    if args.json:
        print(json.dumps(compare(args.directory)))
        return
    directory = args.directory or tempfile.mkdtemp()
    if not os.listdir(directory):
        reference_in_subprocess(directory)
    results = {}
    for backend in args.backends:
        command = [sys.executable, "-m", "tests.backend_cases", "--json"]
        output = subprocess.run(
            command + ["--directory", directory],
            check=True,
            env=_environment(backend),
            cwd=_ROOT,
            capture_output=True,
            text=True,
        ).stdout
        results[backend] = json.loads(output.strip().splitlines()[-1])
    print("| case | output | " + " | ".join(f"{b} vs tensorflow" for b in args.backends) + " |")
    print("| --- | --- |" + " ---: |" * len(args.backends))
    for name, outputs in results[args.backends[0]].items():
        for key in outputs:
            cells = " | ".join(f"{results[b][name][key]:.1e}" for b in args.backends)
            print(f"| {name} | {key} | {cells} |")


if __name__ == "__main__":
    main()
