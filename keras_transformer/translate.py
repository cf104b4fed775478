"""Translate, sample or score stdin to stdout with an exported SavedModel
or a CTranslate2 export; translate with a LiteRT or ONNX export.

    python -m keras_transformer.translate --export_dir /models/ende < in.txt > out.txt
    python -m keras_transformer.translate --export_dir /models/ende --n_best 4 --with_scores
    python -m keras_transformer.translate --export_dir /models/ende --mode sample --seed 7
    python -m keras_transformer.translate --export_dir /models/ende --mode score < pairs.tsv
    python -m keras_transformer.translate --export_dir /models/ende --info
    python -m keras_transformer.translate --ctranslate2_dir /models/ende_ct2 < in.txt
    python -m keras_transformer.translate --litert_model ende.tflite < in.txt
    python -m keras_transformer.translate --onnx_model ende.onnx < in.txt

`--export_dir` is a version directory or the base directory that holds
numbered versions (the newest is used). `--ctranslate2_dir` is a directory
written by `keras_transformer.export.export_ctranslate2` (`pip install -e
".[ctranslate2]"`): the same modes and output, run by
`keras_transformer_runtime.CTranslate2Translator` with its exported
settings (`--compute_type int8` quantizes at load time; sampling draws
from CTranslate2's own random generator). `--litert_model` and
`--onnx_model` are model files written by `export.export_litert` and
`export.export_onnx` (the `litert` and `onnx` extras), run by
`LiteRTTranslator` and `ONNXTranslator`: `--mode translate` only, the best
hypothesis only (the search inside them returns it). Lines are processed in
batches of `--batch_size`: input is split on `\\n` only, invalid UTF-8 is
read as it is (with a warning on stderr), and an output never contains a
line break.

Output format (tab-separated; scores are length-penalized log-probabilities,
as the search ranks them):

* `--mode translate` (beam search, as exported) and `--mode sample` (one
  random draw per hypothesis, repeatable with `--seed`): one line per
  input line, `translation`, or `score<TAB>translation` with
  `--with_scores`. With `--n_best N` (N > 1; at most the exported beam
  size when translating), N lines per input line, best first for beam
  search, each `line<TAB>translation` or `line<TAB>score<TAB>translation`,
  `line` being the input's 1-based line number.
* `--with_token_scores` (`--export_dir` or `--ctranslate2_dir`, `--mode
  translate`): a last field after the translation, the space-separated
  log-probabilities of its tokens (EOS's last), as `--mode score` gives
  them for it.
* `--mode constrain`: each input line is `source<TAB>constraints` or
  `source<TAB>constraints<TAB>banned`, the phrases joined by `|||`; the
  output as `--mode translate`'s, each translation containing its
  constraints and none of its banned phrases (`translate_with_constraints`;
  a warning names the lines whose limit came first). `--glossary FILE`
  (`source term<TAB>target term` lines) gives each input line the target
  terms of the source terms it contains as constraints.
* `--mode score`: each input line is `source<TAB>target`; one output line
  per input line, `score<TAB>log_prob<TAB>token_scores`, the last the
  space-separated log-probabilities of the target's tokens (EOS's last).

A SavedModel is a program that can read and write files: load only
exports you trust.
"""

import argparse
import json
import os
import re
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402,F401  (registers the ops the graph uses)

from keras_transformer.export.versions import resolve_version_dir  # noqa: E402
from keras_transformer_runtime import DecodingSettings  # noqa: E402
from keras_transformer_runtime.ctranslate2 import MAX_SEED  # noqa: E402
from keras_transformer_runtime.glossary import PHRASE_SEPARATOR  # noqa: E402

# Lines per call of the `tokenize` signature, which counts tokens for the limits.
TOKENIZE_BATCH = 256


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


def _text(value):
    return one_line(value.decode("utf-8", errors="replace"))


class RefusedLineError(ValueError):
    """The export refuses a line that alone exceeds one of its request
    limits; the lines before it were translated."""


def token_counts(loaded, texts, truncated_to=None):
    """Each text's tokens as the export counts them against
    `max_input_tokens`: its pieces and EOS, at most `truncated_to`."""
    counts = []
    for start in range(0, len(texts), TOKENIZE_BATCH):
        chunk = tf.constant(texts[start : start + TOKENIZE_BATCH], tf.string)
        for length in loaded.signatures["tokenize"](text=chunk)["lengths"].numpy():
            count = int(length) + 1
            counts.append(min(count, truncated_to) if truncated_to else count)
    return counts


def batches_within(costs, batch_size, max_batch_size=None, max_input_tokens=None):
    """Consecutive `(start, end)` batches of the lines whose token counts
    are `costs` (per line, a tuple: one count per input of the request):
    at most `batch_size` and `max_batch_size` lines, and within
    `max_input_tokens` for each input, except a line that alone exceeds
    it, which goes alone (and the export refuses it)."""
    size = min(batch_size, max_batch_size or batch_size)
    start = 0
    while start < len(costs):
        end, totals = start, (0,) * len(costs[start])
        while end < len(costs) and end - start < size:
            grown = tuple(t + c for t, c in zip(totals, costs[end], strict=True))
            if end > start and max_input_tokens and max(grown) > max_input_tokens:
                break
            totals, end = grown, end + 1
        yield start, end
        start = end


def export_batches(loaded, settings, lines, batch_size, targets=None):
    """`batches_within` the limits of the export (`settings`: its
    `settings_json`), for `lines` (and their `targets`, in `--mode score`)."""
    costs = [(c,) for c in token_counts(loaded, lines, settings.get("max_input_length"))]
    if targets is not None:
        costs = [(*c, t) for c, t in zip(costs, token_counts(loaded, targets), strict=True)]
    return batches_within(
        costs, batch_size, settings.get("max_batch_size"), settings.get("max_input_tokens")
    )


def refused(error, start, end):
    """A `RefusedLineError` for a request of lines `start` to `end` (0-based)
    that the export refused with `error`."""
    # The graph's assertion message names the limit; the rest is a trace.
    found = re.search(r"A request may hold at most [^.]*\.", error.message)
    message = found.group(0) if found else error.message.strip().splitlines()[0]
    where = f"line {start + 1}" if end - start == 1 else f"lines {start + 1}-{end}"
    return RefusedLineError(f"The export refuses {where}: {message} The lines before were written.")


def hypotheses(loaded, mode, lines, batch_size, n_best, seed, settings=None, token_scores=False):
    """Yields, per input line (in order), its hypotheses best first as
    `(score, translation)`: `n_best` of them; with `token_scores` (one
    translation per line), `(score, translation, token_scores)`. Requests
    keep within the export's limits (`settings`: its `settings_json`); a
    line the export refuses alone raises `RefusedLineError` after the
    lines before it."""
    batches = export_batches(loaded, settings or {}, lines, batch_size)
    for batch_number, (start, end) in enumerate(batches):
        try:
            if token_scores:
                per_line = _batch_token_scores(loaded, lines[start:end])
            else:
                per_line = _batch_hypotheses(
                    loaded, mode, lines[start:end], n_best, seed, batch_number
                )
        except tf.errors.InvalidArgumentError as error:
            raise refused(error, start, end) from None
        for options in per_line:
            yield [(float(score), _text(text), *rest) for score, text, *rest in options]


def _batch_token_scores(loaded, lines):
    """The best translation of each line of one request with its tokens'
    log-probabilities (`translate_with_alignments`), as `[(score, text
    bytes, token_scores)]` per line."""
    outputs = loaded.signatures["translate_with_alignments"](text=tf.constant(lines, tf.string))
    outputs = {key: value.numpy() for key, value in outputs.items()}
    per_line = []
    for row, tokens in enumerate(outputs["target_tokens"]):
        length = int((tokens != b"").sum())
        scores = outputs["token_scores"][row, :length].tolist()
        per_line.append([(outputs["score"][row], outputs["translation"][row], scores)])
    return per_line


def _batch_hypotheses(loaded, mode, lines, n_best, seed, batch_number):
    """`hypotheses` of one request, as `(score, text bytes)` per line."""
    batch = tf.constant(lines, tf.string)
    if mode == "sample":
        draws = []
        for draw in range(n_best):
            state = np.random.SeedSequence([seed, draw, batch_number]).generate_state(1, np.uint64)
            outputs = loaded.signatures["sample"](
                text=batch, seed=tf.constant(int(state[0]) >> 2, tf.int64)
            )
            draws.append(zip(outputs["score"].numpy(), outputs["translation"].numpy(), strict=True))
        return list(zip(*draws, strict=True))
    if n_best == 1:
        outputs = loaded.signatures["serving_default"](text=batch)
        pairs = zip(outputs["score"].numpy(), outputs["translation"].numpy(), strict=True)
        return [[pair] for pair in pairs]
    outputs = loaded.signatures["n_best"](text=batch)
    scores, texts = outputs["scores"].numpy(), outputs["translations"].numpy()
    return [
        list(zip(s[:n_best], t[:n_best], strict=True)) for s, t in zip(scores, texts, strict=True)
    ]


def source_target_pairs(lines):
    """`source<TAB>target` lines as `(source, target)` byte pairs."""
    pairs = []
    for number, line in enumerate(lines, 1):
        tabs = line.count(b"\t")
        if tabs != 1:
            raise ValueError(
                f"--mode score reads `source<TAB>target` lines; line {number} has {tabs} tabs."
            )
        pairs.append(line.split(b"\t"))
    return pairs


def score_line(score, log_prob, token_scores):
    """`score<TAB>log_prob<TAB>token_scores`, the output of `--mode score`."""
    tokens = " ".join(f"{v:.4f}" for v in token_scores)
    return f"{score:.4f}\t{log_prob:.4f}\t{tokens}"


def score_lines(loaded, lines, batch_size, settings=None):
    """Yields `score<TAB>log_prob<TAB>token_scores` per `source<TAB>target`
    line, scored by the SavedModel's `score` signature in requests within
    its limits (`settings`: its `settings_json`); a line the export refuses
    alone raises `RefusedLineError` after the lines before it."""
    pairs = source_target_pairs(lines)
    sources, targets = [p[0] for p in pairs], [p[1] for p in pairs]
    for start, end in export_batches(loaded, settings or {}, sources, batch_size, targets):
        try:
            outputs = loaded.signatures["score"](
                source=tf.constant(sources[start:end], tf.string),
                target=tf.constant(targets[start:end], tf.string),
            )
        except tf.errors.InvalidArgumentError as error:
            raise refused(error, start, end) from None
        lengths = (outputs["target_tokens"].numpy() != b"").sum(axis=1)
        for row, length in enumerate(lengths):
            yield score_line(
                outputs["score"][row],
                outputs["log_prob"][row],
                outputs["token_scores"].numpy()[row, :length],
            )


def ctranslate2_hypotheses(translator, mode, lines, batch_size, n_best, seed, token_scores=False):
    """Like `hypotheses`, with a `CTranslate2Translator`."""
    texts = [line.decode("utf-8", errors="replace") for line in lines]
    if mode == "sample":
        outputs = translator.sample(texts, num_samples=n_best, seed=seed, batch_size=batch_size)
    else:
        outputs = translator.translate_with_scores(
            texts, n_best=n_best, batch_size=batch_size, token_scores=token_scores
        )
    for options in outputs:
        if token_scores:
            yield [(h.score, one_line(h.translation), h.token_scores) for h in options]
        else:
            yield [(h.score, one_line(h.translation)) for h in options]


def exported_search_hypotheses(translator, lines, batch_size):
    """Like `hypotheses`, with a `LiteRTTranslator` or `ONNXTranslator`
    (the best hypothesis only)."""
    texts = [line.decode("utf-8", errors="replace") for line in lines]
    for h in translator.translate_with_scores(texts, batch_size=batch_size):
        yield [(h.score, one_line(h.translation))]


def ctranslate2_score_lines(translator, lines, batch_size):
    """Like `score_lines`, with a `CTranslate2Translator`."""
    pairs = [
        [part.decode("utf-8", errors="replace") for part in pair]
        for pair in source_target_pairs(lines)
    ]
    scores = translator.score([p[0] for p in pairs], [p[1] for p in pairs], batch_size=batch_size)
    for result in scores:
        yield score_line(result.score, result.log_prob, result.token_scores)


def runtime_translator(parser, args):
    """`(translator, label)`: the `keras_transformer_runtime` translator
    that `--ctranslate2_dir`, `--litert_model` or `--onnx_model` names, and
    the line `--info` prints for it; a usage error if it cannot load."""
    from keras_transformer_runtime import CTranslate2Translator
    from keras_transformer_runtime import LiteRTTranslator
    from keras_transformer_runtime import ONNXTranslator

    try:
        if args.ctranslate2_dir is not None:
            translator = CTranslate2Translator(args.ctranslate2_dir, compute_type=args.compute_type)
            return translator, f"CTranslate2 model: {args.ctranslate2_dir}"
        if args.litert_model is not None:
            return LiteRTTranslator(args.litert_model), f"LiteRT model: {args.litert_model}"
        return ONNXTranslator(args.onnx_model), f"ONNX model: {args.onnx_model}"
    except (ImportError, ValueError) as error:
        parser.error(str(error))


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument("--export_dir", help="SavedModel or base directory of versions")
    model.add_argument("--ctranslate2_dir", help="a directory written by export.export_ctranslate2")
    model.add_argument("--litert_model", help="a .tflite file written by export.export_litert")
    model.add_argument("--onnx_model", help="an .onnx file written by export.export_onnx")
    parser.add_argument("--version", type=int, help="version to use (default: the newest)")
    parser.add_argument(
        "--compute_type",
        default="default",
        help="CTranslate2's compute type with --ctranslate2_dir (default: as exported)",
    )
    parser.add_argument("--batch_size", type=int, default=64, help="sentences per call")
    parser.add_argument(
        "--mode",
        choices=("translate", "sample", "score", "constrain"),
        default="translate",
        help="beam search, random draws, score source<TAB>target pairs, or translate "
        "source<TAB>constraints[<TAB>banned] lines (phrases joined by |||)",
    )
    parser.add_argument(
        "--glossary",
        help="a source<TAB>target term file: each line's target terms become its constraints",
    )
    parser.add_argument("--n_best", type=int, default=1, help="hypotheses per input line")
    parser.add_argument("--with_scores", action="store_true", help="print each hypothesis' score")
    parser.add_argument(
        "--with_token_scores",
        action="store_true",
        help="print each output token's log-probability after the translation",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help=f"seed of --mode sample, 0 to {MAX_SEED}"
    )
    parser.add_argument(
        "--info", action="store_true", help="print settings and signatures, then exit"
    )
    args = parser.parse_args(argv)
    if args.batch_size <= 0:
        parser.error(f"--batch_size must be positive. Received: --batch_size={args.batch_size}")
    if args.n_best <= 0:
        parser.error(f"--n_best must be positive. Received: --n_best={args.n_best}")
    if not 0 <= args.seed <= MAX_SEED:
        parser.error(f"--seed must be in [0, {MAX_SEED}]. Received: --seed={args.seed}")
    if args.version is not None and args.version < 0:
        parser.error(
            f"--version must be a version number, 0 or more. Received: --version={args.version}"
        )
    if args.mode == "score" and (args.n_best != 1 or args.with_scores):
        parser.error("--mode score prints scores of given targets: no --n_best, no --with_scores.")
    if (args.mode == "constrain" or args.glossary) and (
        args.export_dir is None or args.n_best != 1 or args.mode not in ("translate", "constrain")
    ):
        parser.error(
            "--mode constrain and --glossary go with an --export_dir SavedModel and one "
            "translation per line (no --n_best, no --mode sample or score)."
        )
    glossary = None
    if args.glossary:
        from keras_transformer_runtime import Glossary

        try:
            glossary = Glossary.from_tsv(args.glossary)
        except (OSError, ValueError) as error:
            parser.error(f"--glossary: {error}")
    if args.with_token_scores and (
        args.litert_model or args.onnx_model or args.mode != "translate" or args.n_best != 1
    ):
        parser.error(
            "--with_token_scores goes with --export_dir or --ctranslate2_dir, --mode translate "
            "and one translation per line (no --n_best)."
        )
    exported = None
    if args.export_dir is None:
        model_file = args.litert_model or args.onnx_model
        if model_file and (args.mode != "translate" or args.n_best != 1):
            parser.error(
                "--litert_model and --onnx_model translate only, with the best hypothesis: "
                f"no --mode {args.mode}, no --n_best {args.n_best}."
            )
        translator, label = runtime_translator(parser, args)
        if args.info:
            print(label)
            print(f"quantization: {translator.quantization}")
            print("decoding settings: " + json.dumps(translator.settings.to_dict(), sort_keys=True))
            return 0
        settings, model = translator.settings, translator
    else:
        path = resolve_version_dir(args.export_dir, args.version)
        loaded = tf.saved_model.load(path)
        if args.info:
            print(describe(loaded, path))
            return 0
        exported = json.loads(loaded.settings_json.numpy().decode())
        settings, model = DecodingSettings.from_dict(exported), loaded
    if args.mode == "translate" and args.n_best > settings.beam_size:
        parser.error(
            f"--n_best must be at most the exported beam size ({settings.beam_size}). "
            f"Received: --n_best={args.n_best}"
        )
    lines = read_lines(sys.stdin.buffer)
    bad = invalid_utf8(lines)
    if bad:
        shown = ", ".join(map(str, bad[:10])) + (" ..." if len(bad) > 10 else "")
        print(
            f"warning: {len(bad)} input line(s) are not valid UTF-8 (line {shown}); "
            "they are read with the invalid bytes as they are.",
            file=sys.stderr,
        )
    out = sys.stdout.buffer
    try:
        for line in output_lines(args, model, lines, exported, glossary):
            out.write(line.encode("utf-8") + b"\n")
    except RefusedLineError as error:
        out.flush()
        print(f"error: {error}", file=sys.stderr)
        return 1
    except ValueError as error:  # a `--mode score` line that is not a pair
        parser.error(str(error))
    out.flush()
    return 0


def terms_of(lines, mode, glossary):
    """Per line, `(source, constraints, banned)` bytes: with `--mode
    constrain` from `source<TAB>constraints[<TAB>banned]` lines, else the
    line and the target terms `glossary` finds in it."""
    terms = []
    for number, line in enumerate(lines, 1):
        if mode != "constrain":
            found = glossary.constraints(line.decode("utf-8", errors="replace"))
            terms.append((line, f" {PHRASE_SEPARATOR} ".join(found).encode("utf-8"), b""))
            continue
        fields = line.split(b"\t")
        if not 2 <= len(fields) <= 3:
            raise ValueError(
                "--mode constrain reads `source<TAB>constraints[<TAB>banned]` lines; "
                f"line {number} has {len(fields) - 1} tabs."
            )
        terms.append(tuple(fields) + (b"",) * (3 - len(fields)))
    return terms


def constrained_hypotheses(loaded, lines, batch_size, settings, mode, glossary):
    """Like `hypotheses`, through the `translate_with_constraints`
    signature; a warning on stderr names the lines whose constraints the
    length limit left unmet."""
    terms = terms_of(lines, mode, glossary)
    unmet = []
    sources = [source for source, _, _ in terms]
    for start, end in export_batches(loaded, settings or {}, sources, batch_size):
        batch = terms[start:end]
        try:
            outputs = loaded.signatures["translate_with_constraints"](
                **{
                    name: tf.constant([t[i] for t in batch], tf.string)
                    for i, name in enumerate(("text", "constraints", "banned"))
                }
            )
        except tf.errors.InvalidArgumentError as error:
            raise refused(error, start, end) from None
        met = outputs["constraints_met"].numpy()
        unmet += [start + i + 1 for i, ok in enumerate(met) if not ok]
        for score, text in zip(
            outputs["score"].numpy(), outputs["translation"].numpy(), strict=True
        ):
            yield [(float(score), _text(text))]
    if unmet:
        shown = ", ".join(map(str, unmet[:10])) + (" ..." if len(unmet) > 10 else "")
        print(
            f"warning: the length limit came before every constraint of {len(unmet)} line(s) "
            f"(line {shown}); their translations meet as many as they could.",
            file=sys.stderr,
        )


def output_lines(args, model, lines, exported=None, glossary=None):
    """The output lines for `lines`, in order: `model` is the loaded
    SavedModel (its settings `exported`) or, with `--ctranslate2_dir`, a
    `CTranslate2Translator` (with `--litert_model` or `--onnx_model`, a
    `LiteRTTranslator` or `ONNXTranslator`)."""
    if args.mode == "score":
        if args.ctranslate2_dir is not None:
            yield from ctranslate2_score_lines(model, lines, args.batch_size)
        else:
            yield from score_lines(model, lines, args.batch_size, exported)
        return
    if args.mode == "constrain" or glossary is not None:
        results = constrained_hypotheses(
            model, lines, args.batch_size, exported, args.mode, glossary
        )
    elif args.litert_model or args.onnx_model:
        results = exported_search_hypotheses(model, lines, args.batch_size)
    elif args.ctranslate2_dir is not None:
        results = ctranslate2_hypotheses(
            model,
            args.mode,
            lines,
            args.batch_size,
            args.n_best,
            args.seed,
            token_scores=args.with_token_scores,
        )
    else:
        results = hypotheses(
            model,
            args.mode,
            lines,
            args.batch_size,
            args.n_best,
            args.seed,
            exported,
            token_scores=args.with_token_scores,
        )
    for number, options in enumerate(results, 1):
        for score, translation, *token_scores in options:
            fields = [str(number)] if args.n_best > 1 else []
            fields += [f"{score:.4f}"] if args.with_scores else []
            fields += [translation]
            if token_scores:
                fields += [" ".join(f"{value:.4f}" for value in token_scores[0])]
            yield "\t".join(fields)


if __name__ == "__main__":
    sys.exit(main())
