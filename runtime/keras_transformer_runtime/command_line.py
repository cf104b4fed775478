"""What the commands (`kt-translate`, `kt-translate-corpus`, `kt-serve`)
share: one way to name a model (`--model PATH`, its kind read from the
path, `--kind` to override), the flags that load it, and `--verbose`.

Example:

>>> parser = argparse.ArgumentParser()
>>> add_model_arguments(parser)
>>> args = parser.parse_args(["--model", "ende.tflite"])
>>> model_of(parser, args)
('ende.tflite', 'litert')
"""

import argparse
import sys

from keras_transformer_runtime import logs
from keras_transformer_runtime.runners.loading import KINDS
from keras_transformer_runtime.runners.loading import runner_kind

MODEL_HELP = (
    "the export: a SavedModel directory (or base directory of numbered versions), a "
    "CTranslate2 directory, a .tflite file or an .onnx file"
)
# The flags that named a model before `--model`, and the kind each named
# (None: read from the path, as `--export_dir` took any export in
# `kt-translate-corpus`). Still read, with a note on stderr, so that scripts
# written for them keep working.
FORMER_MODEL_FLAGS = {
    "export_dir": None,
    "ctranslate2_dir": "ctranslate2",
    "litert_model": "litert",
    "onnx_model": "onnx",
}


def add_model_arguments(parser, threads_help="each runner's threads (default: the runtime's)"):
    """Adds the flags that name and load a model, and `--verbose`."""
    group = parser.add_argument_group("the model")
    group.add_argument("--model", help=MODEL_HELP)
    group.add_argument(
        "--kind", choices=KINDS, help="the export's kind (default: read from --model's path)"
    )
    group.add_argument("--version", type=int, help="a SavedModel base directory's version")
    group.add_argument(
        "--compute_type",
        default="default",
        help="CTranslate2's compute type, e.g. int8 (default: as exported)",
    )
    group.add_argument("--threads", type=int, help=threads_help)
    for flag in FORMER_MODEL_FLAGS:
        group.add_argument(f"--{flag}", help=argparse.SUPPRESS)
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show the native libraries' start-up lines (TensorFlow, absl, oneDNN, SentencePiece)",
    )


def add_batch_size_argument(parser):
    """Adds `--batch_size`: sentences per call of the runner."""
    parser.add_argument(
        "--batch_size",
        type=int,
        help="sentences per call (default: the runtime's bulk_batch_size, e.g. 256 for a "
        "SavedModel, 8 for LiteRT)",
    )


def add_sampling_arguments(parser):
    """Adds `--temperature`, `--top_k` and `--top_p`: `--mode sample`'s
    draws with a CTranslate2 export (the other kinds draw as exported)."""
    group = parser.add_argument_group("--mode sample's draws (a CTranslate2 export)")
    group.add_argument("--temperature", type=float, help="default: as exported (1.0)")
    group.add_argument("--top_k", type=int, help="draw among the k likeliest (0: all)")
    group.add_argument("--top_p", type=float, help="draw within this probability mass")


def sampling_settings(parser, args):
    """The sampling settings the arguments set (`DecodingSettings` names);
    a usage error where they are set without `--mode sample`."""
    named = {"temperature": args.temperature, "top_k": args.top_k, "top_p": args.top_p}
    settings = {name: value for name, value in named.items() if value is not None}
    if settings and args.mode != "sample":
        parser.error("--temperature, --top_k and --top_p go with --mode sample.")
    return settings


def model_of(parser, args):
    """`(path, kind)` of the model the arguments name; `kind` is `--kind`,
    else the former flag's, else read from the path. A usage error where
    none or several are named."""
    logs.show_native_logs(args.verbose)
    named = [(flag, getattr(args, flag)) for flag in FORMER_MODEL_FLAGS if getattr(args, flag)]
    if args.model:
        named.insert(0, ("model", args.model))
    if len(named) != 1:
        given = ", ".join(f"--{flag}" for flag, _ in named) or "none"
        parser.error(f"name the model with --model PATH (exactly one). Received: {given}")
    flag, path = named[0]
    kind = args.kind
    if flag != "model":
        print(f"note: --{flag} is now --model (and --kind); it still works.", file=sys.stderr)
        kind = kind or FORMER_MODEL_FLAGS[flag]
    if kind is None:
        try:
            kind = runner_kind(path)
        except ValueError as error:
            parser.error(f"{error} (or name its kind with --kind)")
    return path, kind


def check_positive(parser, args, *names):
    """A usage error for the first of `names` whose value is set and not
    positive."""
    for name in names:
        value = getattr(args, name)
        if value is not None and value <= 0:
            parser.error(f"--{name} must be positive. Received: --{name}={value}")
    if getattr(args, "version", None) is not None and args.version < 0:
        parser.error(
            f"--version must be a version number, 0 or more. Received: --version={args.version}"
        )
