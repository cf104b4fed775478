"""What a corpus translation reads, checked before anything is written:
the input files (matched by patterns, each streamed once for its SHA-256
and, compressed, to the end of its gzip stream) and the export (the
SHA-256 of its files), so that a truncated or corrupt input fails at once
with its name, and a rerun of edited inputs or of another export is
refused (`manifest`).

Example:

>>> [(path, size, digest)] = checked(match_inputs(["mono/*.de.gz"]))
>>> export_digest("exports/deen_ct2")[:8]
'3f1c9a0e'
"""

import contextlib
import gzip
import hashlib
import io
import os
import zlib

from apache_beam.io.filesystems import FileSystems

from keras_transformer_runtime.text import files as text_files

CHUNK = 1 << 20


def match_inputs(patterns):
    """The files `patterns` match, `(path, size)` sorted by path; a
    `ValueError` names a pattern that matches nothing."""
    found_files = {}
    for pattern, found in zip(patterns, FileSystems.match(list(patterns)), strict=True):
        if not found.metadata_list:
            raise ValueError(f"`inputs` pattern {pattern!r} matches no file.")
        found_files.update({m.path: m.size_in_bytes for m in found.metadata_list})
    return sorted(found_files.items())


def checked(files):
    """`files` (`match_inputs`' `(path, size)`) as `(path, size, sha256,
    lines)`, each file read to its end: a gzip file (`.gz`) whole to its
    end-of-stream marker.

    Raises:
        ValueError: a compressed input that is truncated or corrupt
            (naming it).
    """
    return [(path, size, *_checked_digest(path)) for path, size in files]


def _checked_digest(path):
    """The SHA-256 of the file at `path` and its lines (of its text)."""
    lines, last = 0, b"\n"
    with FileSystems.open(path, compression_type="uncompressed") as raw:
        hashing = _Hashing(raw)
        stream = hashing if not text_files.is_gzip(path) else gzip.GzipFile(fileobj=hashing)
        try:
            while chunk := stream.read(CHUNK):
                lines, last = lines + chunk.count(b"\n"), chunk[-1:]
        except (EOFError, OSError, zlib.error) as error:
            if stream is hashing:  # a plain file: not a decompression's error
                raise
            raise ValueError(
                f"The input {path} is not a whole gzip file ({error}): it may be truncated or "
                "corrupt. Nothing was translated; fix or remove it and run again."
            ) from None
        finally:
            stream.close() if stream is not hashing else None
        while hashing.read(CHUNK):  # what follows the last member (gzip read it all)
            pass
        return hashing.hexdigest(), lines + (last != b"\n")


@contextlib.contextmanager
def open_lines(path):
    """`path` opened for reading its lines as bytes: a gzip file (`.gz`)
    decompressed by Python's `gzip`, which raises at a truncated or
    corrupt stream (Beam's reader ends there without a word)."""
    with FileSystems.open(path, compression_type="uncompressed") as raw:
        if not text_files.is_gzip(path):
            yield raw
            return
        with gzip.GzipFile(fileobj=raw) as stream:
            yield stream


def export_digest(export):
    """The SHA-256 of the export at `export`: of each file's name and
    bytes, in order of name. A directory's files (a SavedModel, a
    CTranslate2 directory); a model file's, with the files beside it that
    share its name (`ende.tflite.json`...)."""
    digest = hashlib.sha256()
    for name, path in _export_files(os.fspath(export)):
        digest.update(name.encode() + b"\0")
        with FileSystems.open(path, compression_type="uncompressed") as f:
            while chunk := f.read(CHUNK):
                digest.update(chunk)
    return digest.hexdigest()


def _export_files(export):
    """`(name relative to the export, path)` of the export's files."""
    if os.path.isdir(export):
        found = [os.path.join(root, name) for root, _, names in os.walk(export) for name in names]
        return sorted((os.path.relpath(p, export), p) for p in found)
    if os.path.isfile(export):
        parent, stem = os.path.split(export)
        names = [n for n in os.listdir(parent or ".") if n.startswith(stem)]
        return sorted((n, os.path.join(parent, n)) for n in names)
    matched = FileSystems.match([export.rstrip("/") + "/**", export + "*"])  # an object store
    paths = sorted({m.path for result in matched for m in result.metadata_list})
    return [(p[len(export) :].lstrip("/") or os.path.basename(p), p) for p in paths]


class _Hashing(io.RawIOBase):
    """A reader of `raw` that hashes what it reads."""

    def __init__(self, raw):
        self.raw, self.digest = raw, hashlib.sha256()

    def readable(self):
        return True

    def read(self, size=-1):
        data = self.raw.read(size)
        self.digest.update(data)
        return data

    def readinto(self, buffer):
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def hexdigest(self):
        return self.digest.hexdigest()
