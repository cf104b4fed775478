"""Text files as every part of the package reads them: plain, or gzip by
a `.gz` suffix; UTF-8; lines split on `\\n` only (a lone `\\r` stays inside
its line, a final `\\r\\n` loses its `\\r`), so that line `i` of two
parallel files stays a pair; a UTF-8 byte-order mark at the start (as
Windows editors save UTF-8) is not part of the first line.
`tf.data.TextLineDataset`, which reads training pairs, splits the same
lines (it drops every `\\r`, also one inside a line, and keeps a
byte-order mark).

Example:

>>> read_lines("newstest2014.de.gz")[:1]
['Gutach: Noch mehr Sicherheit für Fußgänger']
"""

import gzip
import os

GZIP_SUFFIX = ".gz"
BYTE_ORDER_MARK = "\ufeff".encode()


def is_gzip(path):
    """Whether `path` names a gzip file (its suffix is `.gz`)."""
    return os.fspath(path).endswith(GZIP_SUFFIX)


def compression_type(path):
    """`tf.data.TextLineDataset`'s `compression_type` for `path`."""
    return "GZIP" if is_gzip(path) else None


def open_binary(path):
    """`path` opened for reading bytes, decompressed if it is gzip."""
    return gzip.open(path, "rb") if is_gzip(path) else open(path, "rb")


def split_lines(data):
    """The lines of `data` (bytes), split as the module says."""
    lines = data.removeprefix(BYTE_ORDER_MARK).split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the newline that ends the last line
    return [line[:-1] if line.endswith(b"\r") else line for line in lines]


def byte_lines(stream):
    """The lines of a binary stream (any file object that iterates over
    `\\n`-ended lines, as a file opened in binary mode does), one at a
    time, as bytes, split as the module says."""
    for number, line in enumerate(stream):
        line = line.removeprefix(BYTE_ORDER_MARK) if number == 0 else line
        line = line[:-1] if line.endswith(b"\n") else line
        yield line[:-1] if line.endswith(b"\r") else line


def iter_lines(path, errors="strict"):
    """The lines of the file at `path`, one at a time, as strings
    (`errors`: as for `bytes.decode`, e.g. `"replace"`)."""
    with open_binary(path) as f:
        for line in byte_lines(f):
            yield line.decode("utf-8", errors)


def read_lines(path, errors="strict"):
    """Every line of the file at `path`, as strings."""
    return list(iter_lines(path, errors))


def count_lines(path):
    """How many lines the file at `path` has (one pass, nothing decoded)."""
    with open_binary(path) as f:
        return sum(1 for _ in f)
