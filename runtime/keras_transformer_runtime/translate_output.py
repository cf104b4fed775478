"""What `kt-translate` writes: its output lines, a translated document,
and its warnings on stderr (see `keras_transformer_runtime.translate`)."""

import sys
import warnings

from keras_transformer_runtime.runners.results import RefusedRequestError
from keras_transformer_runtime.text.documents import LongInputWarning


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


def shown(numbers):
    """Line numbers as a warning lists them: the first ten."""
    return ", ".join(map(str, numbers[:10])) + (" ..." if len(numbers) > 10 else "")


def report_warning(warning):
    """A caught warning as a line on stderr: a `LongInputWarning` names
    the input lines (1-based); others as Python shows them."""
    message = warning.message
    if not isinstance(message, LongInputWarning):
        warnings.showwarning(message, warning.category, warning.filename, warning.lineno)
        return
    lines = [i + 1 for i in message.inputs]
    text = (
        f"warning: {len(lines)} line(s) had a sentence longer than max_input_length "
        f"({message.limit} tokens): translated in pieces of whole words (line {shown(lines)})"
    )
    if message.cut:
        text += f"; a word alone was longer and cut in line {shown([i + 1 for i in message.cut])}"
    print(text + ".", file=sys.stderr)


def output_lines(args, results):
    """The output line of each result, in order (see the module's docstring)."""
    if args.mode == "score":
        for s in results:
            tokens = " ".join(f"{v:.4f}" for v in s.token_scores)
            yield f"{s.score:.4f}\t{s.log_prob:.4f}\t{tokens}"
        return
    for number, options in enumerate(results, 1):
        for h in options:
            fields = [str(number)] if args.n_best > 1 else []
            fields += [f"{h.score:.4f}"] if args.with_scores else []
            fields += [one_line(h.translation)]
            if args.with_token_scores:
                fields += [" ".join(f"{value:.4f}" for value in h.token_scores)]
            yield "\t".join(fields)


def translate_document(runner, args, data, out):
    """Translates `data` (bytes), one document in `args.format`, to `out`;
    warnings on stderr for invalid UTF-8 and repaired markup."""
    if invalid_utf8([data]):
        print(
            "warning: the input is not valid UTF-8; the invalid bytes are read as U+FFFD.",
            file=sys.stderr,
        )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LongInputWarning)
        try:
            (document,) = runner.translate_documents(
                [data.decode("utf-8", errors="replace")],
                args.format,
                batch_size=args.batch_size,
                target_lang=args.target_lang,
            )
        except RefusedRequestError as error:
            print(
                f"error: The export refuses a part of the document: {error.reason}", file=sys.stderr
            )
            return 1
    for warning in caught:
        report_warning(warning)
    if document.repaired:
        print(
            "warning: the input's markup was malformed: it was repaired as a browser repairs "
            "it (no text was dropped).",
            file=sys.stderr,
        )
    out.write(document.translation.encode("utf-8"))
    out.flush()
    return 0
