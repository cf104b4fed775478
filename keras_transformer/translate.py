"""Translate stdin to stdout with an exported SavedModel.

    python -m keras_transformer.translate --export_dir /models/ende < in.txt > out.txt
    python -m keras_transformer.translate --export_dir /models/ende --info

`--export_dir` is a version directory or the base directory that holds
numbered versions (the newest is used). Lines are translated in batches of
`--batch_size`; the output has one line per input line, in order: input is
split on `\\n` only, invalid UTF-8 is translated as it is (with a warning
on stderr), and a translation never contains a line break. A SavedModel is
a program that can read and write files: load only exports you trust.
"""

import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402,F401  (registers the ops the graph uses)

from keras_transformer.export.versions import resolve_version_dir  # noqa: E402


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


def read_lines(stream):
    """The lines of a binary stream as bytes, split on `\\n` only (a lone
    `\\r` stays inside its line; a final `\\r\\n` loses its `\\r`)."""
    data = stream.read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the newline that ends the last line
    return [line[:-1] if line.endswith(b"\r") else line for line in lines]


def invalid_utf8(lines):
    """The 1-based numbers of the lines that are not valid UTF-8."""
    numbers = []
    for number, line in enumerate(lines, 1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            numbers.append(number)
    return numbers


def one_line(text):
    """`text` with line breaks turned into spaces, so that output line i
    belongs to input line i."""
    return " ".join(text.splitlines())


def translate_lines(signature, lines, batch_size):
    """Yields one translation per line (bytes in, `str` out), in order."""
    for start in range(0, len(lines), batch_size):
        batch = tf.constant(lines[start : start + batch_size], tf.string)
        for text in signature(text=batch)["translation"].numpy():
            yield one_line(text.decode("utf-8", errors="replace"))


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
    lines = read_lines(sys.stdin.buffer)
    bad = invalid_utf8(lines)
    if bad:
        shown = ", ".join(map(str, bad[:10])) + (" ..." if len(bad) > 10 else "")
        print(
            f"warning: {len(bad)} input line(s) are not valid UTF-8 (line {shown}); "
            "they are translated with the invalid bytes as they are.",
            file=sys.stderr,
        )
    signature = loaded.signatures["serving_default"]
    out = sys.stdout.buffer
    for translation in translate_lines(signature, lines, args.batch_size):
        out.write(translation.encode("utf-8") + b"\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
