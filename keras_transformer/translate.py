"""Translate stdin to stdout with an exported SavedModel.

    python -m keras_transformer.translate --export_dir /models/ende < in.txt > out.txt
    python -m keras_transformer.translate --export_dir /models/ende --info

`--export_dir` is a version directory or the base directory that holds
numbered versions (the newest is used). Lines are translated in batches of
`--batch_size`; the output has one line per input line, in order.
"""

import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402,F401  (registers the ops the graph uses)


def resolve_version_dir(export_dir, version=None):
    """The SavedModel directory: `export_dir` itself, or its `version`
    (default: highest) numbered subdirectory."""
    if version is None and tf.io.gfile.exists(os.path.join(export_dir, "saved_model.pb")):
        return export_dir
    versions = sorted(
        int(name.strip("/"))
        for name in tf.io.gfile.listdir(export_dir)
        if name.strip("/").isdigit()
    )
    if version is None:
        if not versions:
            raise FileNotFoundError(f"No SavedModel or numbered version in {export_dir}")
        version = versions[-1]
    path = os.path.join(export_dir, str(version))
    if not tf.io.gfile.exists(os.path.join(path, "saved_model.pb")):
        raise FileNotFoundError(f"No SavedModel at {path} (versions: {versions})")
    return path


def describe(loaded, path):
    """Decoding settings and signatures of a loaded export, as text."""
    lines = [f"SavedModel: {path}"]
    settings = json.loads(loaded.settings_json.numpy().decode())
    lines.append("decoding settings: " + json.dumps(settings, sort_keys=True))
    for name, function in sorted(loaded.signatures.items()):
        inputs = function.structured_input_signature[1]
        outputs = function.structured_outputs
        spec = lambda s: f"{s.dtype.name}{list(s.shape)}"  # noqa: E731
        lines.append(
            f"signature {name}: "
            + ", ".join(f"{k}: {spec(v)}" for k, v in sorted(inputs.items()))
            + " -> "
            + ", ".join(f"{k}: {spec(v)}" for k, v in sorted(outputs.items()))
        )
    return "\n".join(lines)


def translate_lines(signature, lines, batch_size):
    """Yields one translation per line, in order."""
    for start in range(0, len(lines), batch_size):
        batch = tf.constant(lines[start : start + batch_size], tf.string)
        for text in signature(text=batch)["translation"].numpy():
            yield text.decode("utf-8", errors="replace")


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--export_dir", required=True, help="SavedModel or base directory of versions"
    )
    parser.add_argument("--version", type=int, help="version to use (default: the newest)")
    parser.add_argument("--batch_size", type=int, default=64, help="sentences per call")
    parser.add_argument(
        "--info", action="store_true", help="print settings and signatures, then exit"
    )
    args = parser.parse_args(argv)
    if args.batch_size <= 0:
        parser.error(f"--batch_size must be positive. Received: --batch_size={args.batch_size}")
    path = resolve_version_dir(args.export_dir, args.version)
    loaded = tf.saved_model.load(path)
    if args.info:
        print(describe(loaded, path))
        return 0
    lines = [line.rstrip("\n") for line in sys.stdin]
    for translation in translate_lines(
        loaded.signatures["serving_default"], lines, args.batch_size
    ):
        print(translation, flush=False)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
