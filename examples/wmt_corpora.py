"""Named corpora of `wmt_ende.py --data NAME`: where their files come
from, how many lines each holds, and `fetch`, which downloads the missing
ones, checks them and writes them atomically.

    corpus = CORPORA["multi30k"]
    paths = fetch(corpus, "data/multi30k", ("en", "de"))
    paths["train"]  # ("data/multi30k/train.en.gz", "data/multi30k/train.de.gz")

Files already in the directory are checked and used; the network is only
touched for a file that is missing.
"""

import dataclasses
import gzip
import http.client
import os
import sys
import time
import urllib.error
import urllib.request
import zlib


class CorpusError(RuntimeError):
    """A corpus file cannot be downloaded or is not what it should be."""


@dataclasses.dataclass(frozen=True)
class Corpus:
    """A parallel corpus published as one gzip file per split and language,
    `{split}.{language}.gz`, line i of each language aligned.

    Attributes:
        name: the `--data` value.
        url: the directory the files are downloaded from.
        splits: the file name of the train, valid and test splits.
        lines: how many lines each split holds, in every language.
        languages: the languages published for every split.
        note: who publishes it, under which terms.
    """

    name: str
    url: str
    splits: dict
    lines: dict
    languages: tuple
    note: str

    def check_languages(self, languages):
        """Raises a `ValueError` naming the corpus's languages unless it
        has every one of `languages`."""
        for language in languages:
            if language not in self.languages:
                raise ValueError(
                    f"languages: {self.name} has {', '.join(self.languages)}, not {language!r}"
                )

    def file_name(self, role, language):
        """The file of one split (`"train"`, `"valid"` or `"test"`)."""
        return f"{self.splits[role]}.{language}.gz"


CORPORA = {
    "multi30k": Corpus(
        name="multi30k",
        url="https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw",
        splits={"train": "train", "valid": "val", "test": "test_2016_flickr"},
        lines={"train": 29_000, "valid": 1_014, "test": 1_000},
        languages=("en", "de", "fr", "cs"),
        note="Multi30k task 1 (Elliott et al., 2016), from Flickr30K image captions: "
        "for non-commercial research and educational use only",
    ),
}


def _check(corpus, role, path, name, hint=""):
    """Raises `CorpusError` naming `name` unless the gzip file at `path`
    is complete and has the split's line count."""
    try:
        with gzip.open(path, "rb") as f:
            lines = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except (EOFError, OSError, zlib.error) as error:
        raise CorpusError(f"{name} is not a complete gzip file ({error}){hint}") from error
    if lines != corpus.lines[role]:
        raise CorpusError(
            f"{name} has {lines} lines; {corpus.name}'s {corpus.splits[role]} split has "
            f"{corpus.lines[role]}{hint}"
        )


def _show(label, done, total, started):
    size = f"{done / 1e3:,.1f}/{total / 1e3:,.1f} kB" if total else f"{done / 1e3:,.1f} kB"
    print(f"\r{label}: {size}, {time.time() - started:.0f}s", end="", file=sys.stderr, flush=True)


def _download(url, path, timeout):
    """`url` to `path` through a temporary file, with a progress line on
    stderr; the file appears only when every byte has arrived."""
    staging = f"{path}.part-{os.getpid()}"
    label = f"downloading {os.path.basename(path)}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            total = int(response.headers.get("Content-Length") or 0)
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            done, started = 0, time.time()
            with open(staging, "wb") as f:
                for chunk in iter(lambda: response.read(1 << 16), b""):
                    f.write(chunk)
                    done += len(chunk)
                    _show(label, done, total, started)
            print(file=sys.stderr)
        if total and done != total:
            raise CorpusError(f"{url}: the download ended after {done} of {total} bytes")
        return staging
    except BaseException:
        if os.path.exists(staging):
            os.remove(staging)
        raise


def _unreachable(corpus, url, directory, languages, error):
    files = ", ".join(corpus.file_name(role, x) for role in corpus.splits for x in languages)
    return CorpusError(
        f"cannot download {url} ({error}).\nWithout network access, put the {corpus.name} "
        f"files {files} from {corpus.url}/ into {directory}/ and run the command again."
    )


def fetch(corpus, directory, languages, url=None, timeout=30):
    """The paths of `corpus`'s train, valid and test files in `languages`,
    as `{"train": (source, target), "valid": ..., "test": ...}`.

    A file already in `directory` is used without touching the network;
    a missing one is downloaded from `url` (default: `corpus.url`; any
    scheme `urllib` reads, `file://` included). Every file's line count is
    checked against `corpus.lines` (so the two sides of a split are
    aligned); a download is written under its name only once complete and
    checked, so an interrupted or bad download leaves nothing behind.

    Raises:
        ValueError: `languages` names a language the corpus lacks.
        CorpusError: a download fails (the message names the URL and the
            directory to put the files in) or a file has the wrong number
            of lines.

    Example:

    >>> fetch(CORPORA["multi30k"], "data/multi30k", ("en", "de"))["test"]
    ('data/multi30k/test_2016_flickr.en.gz', 'data/multi30k/test_2016_flickr.de.gz')
    """
    corpus.check_languages(languages)
    url = (url or corpus.url).rstrip("/")
    paths = {}
    for role in corpus.splits:
        paths[role] = tuple(os.path.join(directory, corpus.file_name(role, x)) for x in languages)
        for path in paths[role]:
            if os.path.exists(path):
                _check(corpus, role, path, path, " (delete it to download it again)")
                continue
            source = f"{url}/{os.path.basename(path)}"
            try:
                staging = _download(source, path, timeout)
            except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
                raise _unreachable(corpus, source, directory, languages, error) from error
            try:
                _check(corpus, role, staging, source)
                os.replace(staging, path)
            finally:
                if os.path.exists(staging):
                    os.remove(staging)
    return paths
