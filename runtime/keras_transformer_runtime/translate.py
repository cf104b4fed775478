"""Translate, sample or score stdin to stdout with any export the runtime
runs (`kt-translate`, or `python -m keras_transformer_runtime.translate`).

    kt-translate --model exports/ende_ct2 < in.txt > out.txt
    kt-translate --model exports/ende --n_best 4 --with_scores
    kt-translate --model exports/ende_ct2 --mode sample --top_k 20 --seed 7
    kt-translate --model exports/ende --mode score < pairs.tsv
    kt-translate --model exports/ende.tflite --info
    kt-translate --model exports/en-many --target_lang fr < in.txt
    kt-translate --model exports/ende_ct2 --format html < page.html > page.de.html

`--model` is a SavedModel directory or the base directory that holds
numbered versions (the newest is used; `[saved_model]` extra), a
CTranslate2 directory (`[ctranslate2]`), a `.tflite` file (`[litert]`) or an
`.onnx` file (`[onnx]`); `--kind` names the kind where the path does not
tell it. Each kind offers:

* SavedModel: every mode, `--n_best`, `--with_token_scores`.
* CTranslate2: the same; `--compute_type int8` quantizes at load time, and
  `--temperature`, `--top_k` and `--top_p` change `--mode sample`'s draws
  (from CTranslate2's own random generator).
* LiteRT, ONNX: `--mode translate` only, the best hypothesis only (the
  search inside the file returns it).

Lines are processed in
batches of `--batch_size`: input is split on `\\n` only, invalid UTF-8 is
read as it is (with a warning on stderr), and an output never contains a
line break. A line of several sentences is translated sentence by
sentence and joined back, as exported (`split_sentences`); a sentence
longer than the export's `max_input_length` is translated in pieces of
whole words, and a warning on stderr names its line.

With `--format html` or `--format markdown`, stdin is one document (a
web page or a fragment of one, or Markdown): its text is translated and
its markup put back around the aligned words
(`keras_transformer_runtime.text.formats`), and the translated document
is written as it is, line breaks kept; a warning on stderr says when
malformed HTML was repaired. It goes with `--mode translate` and one
translation, no scores.

A multilingual model (one trained with target-language tags, as
`examples/wmt_ende.py --target_lang de,fr,cs` trains it) translates into
`--target_lang`, which must be one of its languages (`--info` lists them);
without it, each line must start with its language's tag (`>>fr<< A dog
runs.`).

Output format (tab-separated; scores are length-penalized log-probabilities,
as the search ranks them):

* `--mode translate` (beam search, as exported) and `--mode sample` (one
  random draw per hypothesis, repeatable with `--seed`): one line per
  input line, `translation`, or `score<TAB>translation` with
  `--with_scores`. With `--n_best N` (N > 1; at most the exported beam
  size when translating), N lines per input line, best first for beam
  search, each `line<TAB>translation` or `line<TAB>score<TAB>translation`,
  `line` being the input's 1-based line number.
* `--with_token_scores` (a SavedModel or CTranslate2 export, `--mode
  translate`): a last field after the translation, the space-separated
  log-probabilities of its tokens (EOS's last), as `--mode score` gives
  them for it.
* `--mode constrain`: each input line is `source<TAB>constraints` or
  `source<TAB>constraints<TAB>banned`, the phrases joined by `|||`; the
  output as `--mode translate`'s, each translation containing its
  constraints and none of its banned phrases (`translate_with_constraints`;
  a warning names the lines whose limit came first). `--glossary FILE`
  (`source term<TAB>target term` lines) gives each input line the target
  terms of the source terms it contains as constraints, in either mode
  (with `--mode constrain`, after the line's own).
* `--mode score`: each input line is `source<TAB>target`; one output line
  per input line, `score<TAB>log_prob<TAB>token_scores`, the last the
  space-separated log-probabilities of the target's tokens (EOS's last).

Each model is run by its `keras_transformer_runtime` runner
(`SavedModelTranslator`, `CTranslate2Translator`, `LiteRTTranslator`,
`ONNXTranslator`): this command reads lines, calls the runner once, and
writes lines. A SavedModel is a program that can read and write files:
load only exports you trust.
"""

import argparse
import sys
import warnings

from keras_transformer_runtime import command_line
from keras_transformer_runtime import processes
from keras_transformer_runtime.runners import runner as methods
from keras_transformer_runtime.runners.ctranslate2 import MAX_SEED
from keras_transformer_runtime.runners.loading import load_runner
from keras_transformer_runtime.runners.results import RefusedRequestError
from keras_transformer_runtime.text import files as text_files
from keras_transformer_runtime.text import formats
from keras_transformer_runtime.text import glossary as phrases
from keras_transformer_runtime.text.documents import LongInputWarning
from keras_transformer_runtime.translate_output import invalid_utf8
from keras_transformer_runtime.translate_output import output_lines
from keras_transformer_runtime.translate_output import report_warning
from keras_transformer_runtime.translate_output import shown
from keras_transformer_runtime.translate_output import translate_document

# The runner's method each `--mode` calls.
MODES = {
    "translate": methods.TRANSLATE_WITH_SCORES,
    "sample": methods.SAMPLE,
    "score": methods.SCORE,
    "constrain": methods.TRANSLATE_WITH_CONSTRAINTS,
}


def read_lines(stream):
    """The lines of a binary stream as bytes (`text_files.split_lines`)."""
    return text_files.split_lines(stream.read())


def make_parser():
    parser = argparse.ArgumentParser(
        prog="kt-translate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command_line.add_model_arguments(parser)
    command_line.add_batch_size_argument(parser)
    parser.add_argument(
        "--mode",
        choices=tuple(MODES),
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
    command_line.add_sampling_arguments(parser)
    parser.add_argument(
        "--target_lang",
        help="a multilingual model's target language (default: each line starts with its tag)",
    )
    parser.add_argument(
        "--format",
        choices=formats.NAMES,
        default="text",
        help="text: one input a line; html, markdown: stdin is one document, its markup kept",
    )
    parser.add_argument(
        "--info", action="store_true", help="print settings and signatures, then exit"
    )
    return parser


def check_arguments(parser, args):
    """Usage errors for arguments out of range or that do not go together,
    before anything is loaded."""
    command_line.check_positive(parser, args, "batch_size", "n_best", "threads")
    if not 0 <= args.seed <= MAX_SEED:
        parser.error(f"--seed must be in [0, {MAX_SEED}]. Received: --seed={args.seed}")
    command_line.sampling_settings(parser, args)
    if args.mode == "score" and (args.n_best != 1 or args.with_scores):
        parser.error("--mode score prints scores of given targets: no --n_best, no --with_scores.")
    if (args.mode == "constrain" or args.glossary) and (
        args.n_best != 1 or args.mode not in ("translate", "constrain")
    ):
        parser.error(
            "--mode constrain and --glossary go with one translation per line (no --n_best, "
            "no --mode sample or score)."
        )
    if formats.of(args.format).marked_up and (
        args.mode != "translate" or args.glossary or args.n_best != 1 or args.with_scores
    ):
        parser.error(
            f"--format {args.format} goes with --mode translate and one translation (no "
            "--n_best, --with_scores, --with_token_scores or --glossary)."
        )
    if args.with_token_scores and (args.mode != "translate" or args.glossary or args.n_best != 1):
        parser.error(
            "--with_token_scores goes with --mode translate and one translation per line "
            "(no --n_best, no --glossary)."
        )


def load(parser, args):
    """The runner of the model the arguments name; a usage error if it
    cannot load."""
    path, kind = command_line.model_of(parser, args)
    try:
        return load_runner(
            path,
            threads=args.threads,
            version=args.version,
            compute_type=args.compute_type,
            kind=kind,
            **command_line.sampling_settings(parser, args),
        )
    except (ImportError, ValueError, FileNotFoundError) as error:
        parser.error(str(error))


def fields_of(lines, mode, count, name):
    """Each line's tab-separated fields, `count` of them (a range `(least,
    most)`: missing ones `b""`); a `ValueError` naming the first line with
    another number of tabs."""
    least, most = count
    rows = []
    for number, line in enumerate(lines, 1):
        fields = line.split(b"\t")
        if not least <= len(fields) <= most:
            raise ValueError(
                f"--mode {mode} reads `{name}` lines; line {number} has {len(fields) - 1} tabs."
            )
        rows.append(fields + [b""] * (most - len(fields)))
    return rows


def run(runner, args, lines, glossary):
    """The runner's results for `lines`, one per line: `TargetScore`s in
    `--mode score`, else each line's hypotheses (a list of `Hypothesis`)."""
    size = {"batch_size": args.batch_size, "target_lang": args.target_lang}
    if args.mode == "score":
        pairs = fields_of(lines, "score", (2, 2), "source<TAB>target")
        return runner.score([p[0] for p in pairs], [p[1] for p in pairs], **size)
    if args.mode == "constrain" or glossary is not None:
        if args.mode == "constrain":
            rows = fields_of(lines, "constrain", (2, 3), "source<TAB>constraints[<TAB>banned]")
            terms = [[phrases.split(methods.as_text(f)) for f in row[1:]] for row in rows]
        else:
            rows = [[line] for line in lines]
            terms = [[[], []] for _ in lines]
        try:  # the glossary's terms join each sentence's own constraints
            found = runner.translate_with_constraints(
                [row[0] for row in rows],
                [t[0] for t in terms],
                [t[1] for t in terms],
                glossary=glossary,
                **size,
            )
        except RefusedRequestError as error:
            if glossary is not None:  # where the refused line's terms came from
                matched = glossary.constraints(methods.as_text(rows[error.start][0]))
                read = {term: glossary.where(term) for term in matched}
                named = [f"{term!r} ({at})" for term, at in read.items() if at]
                error.reason += f" Its --glossary terms: {', '.join(named) or 'none'}."
            raise
        unmet = [number for number, h in enumerate(found, 1) if not h.constraints_met]
        if unmet:
            print(
                f"warning: the length limit came before every constraint of {len(unmet)} "
                f"line(s) (line {shown(unmet)}); their translations meet as many as they could.",
                file=sys.stderr,
            )
        return [[h] for h in found]
    if args.mode == "sample":
        return runner.sample(lines, num_samples=args.n_best, seed=args.seed, **size)
    return runner.translate_with_scores(
        lines, n_best=args.n_best, token_scores=args.with_token_scores, **size
    )


def main(argv=None):
    parser = make_parser()
    args = parser.parse_args(argv)
    check_arguments(parser, args)
    glossary = None
    if args.glossary:
        try:
            glossary = phrases.Glossary.from_tsv(args.glossary)
        except (OSError, ValueError) as error:
            parser.error(f"--glossary: {error}")
    runner = load(parser, args)
    processes.skip_collection_at_exit()  # this process ends with `main`
    if args.info:
        print(runner.describe())
        print("target languages: " + (", ".join(runner.languages) or "one (no tags)"))
        return 0
    if args.target_lang is not None:
        try:
            runner.languages.check(args.target_lang)
        except ValueError as error:
            parser.error(f"--target_lang: {error}")
    method = methods.TRANSLATE_WITH_CONSTRAINTS if glossary else MODES[args.mode]
    if not runner.supports(method) or (args.with_token_scores and not runner.has_token_scores):
        parser.error(
            f"{runner.name} does not support --mode {args.mode}"
            + (", --glossary" if glossary else "")
            + (", --with_token_scores" if args.with_token_scores else "")
            + "."
        )
    if args.mode == "translate" and args.n_best > runner.settings.beam_size:
        parser.error(
            f"--n_best must be at most the exported beam size ({runner.settings.beam_size}). "
            f"Received: --n_best={args.n_best}"
        )
    if formats.of(args.format).marked_up:
        return translate_document(runner, args, sys.stdin.buffer.read(), sys.stdout.buffer)
    lines = read_lines(sys.stdin.buffer)
    bad = invalid_utf8(lines)
    if bad:
        print(
            f"warning: {len(bad)} input line(s) are not valid UTF-8 (line {shown(bad)}); "
            "they are read with the invalid bytes as they are.",
            file=sys.stderr,
        )
    out = sys.stdout.buffer
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", LongInputWarning)
            results = run(runner, args, lines, glossary)
        for warning in caught:
            report_warning(warning)
    except RefusedRequestError as error:
        for line in output_lines(args, error.done):
            out.write(line.encode("utf-8") + b"\n")
        out.flush()
        print(
            f"error: The export refuses {error.where('line')}: {error.reason} "
            "The lines before were written.",
            file=sys.stderr,
        )
        return 1
    except ValueError as error:  # a line that is not as the mode reads it
        parser.error(str(error))
    for line in output_lines(args, results):
        out.write(line.encode("utf-8") + b"\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
