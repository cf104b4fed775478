"""Named corpora of `wmt_ende.py --data NAME`: where their files come
from, how many lines each holds, and `fetch`, which downloads the missing
ones, checks them and writes them atomically.

    corpus = CORPORA["multi30k"]
    paths = fetch(corpus, "data/multi30k", ("en", "de"))
    paths["train"]  # ("data/multi30k/train.en.gz", "data/multi30k/train.de.gz")

Files already in the directory are checked and used; the network is only
touched for a file that is missing.
"""

import contextlib
import dataclasses
import glob
import gzip
import hashlib
import http.client
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
import zlib

from keras_transformer_runtime.processes import is_running


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
        digests: the SHA-256 of each file's text (decompressed, so that a
            mirror that recompressed it still matches), by file name; a
            file without one is checked by its line count only.
    """

    name: str
    url: str
    splits: dict
    lines: dict
    languages: tuple
    note: str
    digests: dict = dataclasses.field(default_factory=dict)

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
        digests={
            "train.en.gz": "460a15fbd157e34a7a9957ee388c1ca247fe47af3ef25fb50442af6c274e0fc6",
            "train.de.gz": "2c2b73fd2b548fbcde3a875e0a78d6ee94d498bfdee6bd3eae3945779e9ddf72",
            "train.fr.gz": "5925a3c18f1587b6b54b87743106e6e8ab93618edb6f65d19eac0621f853a10d",
            "train.cs.gz": "2be68b38c8d586ff4f54eb13cc6e1baaaa053695b3f070d3038303a47f2268da",
            "val.en.gz": "1f2a23d992769b5b3d209b0a10dd0b77c08cceb1f20dfb97ed0aafa49d107227",
            "val.de.gz": "660e09eb7e1da2f856ea13ee5ad3cf6d36b3d5b0b733c857e94c5747a3dfc660",
            "val.fr.gz": "5304e444d842e962b2dda4d816b70b22a1765b15401642b7ca37a67477e708dc",
            "val.cs.gz": "d53827e469b0a1ca8d57e9e26b2b64c4bc4b33f5479c7b03ae87ae5c882c3e33",
            "test_2016_flickr.en.gz": (
                "399a4382932c1aadd3ceb9bef1008d388a64c76d4ae4e9d4728c6f4301cac182"
            ),
            "test_2016_flickr.de.gz": (
                "4be6b5b3236b79c25475c6bb829800a7ce559e9ba7a1f6c2394fe4d40be46d16"
            ),
            "test_2016_flickr.fr.gz": (
                "cb3160d69b002bb638e66cc7612fcd56cb0af82eadc9c142dedc438afb885ef6"
            ),
            "test_2016_flickr.cs.gz": (
                "45adb85f688de8407fddcbe1b36dca15d12aab868149b337e2576f2d6d2ff8d8"
            ),
        },
    ),
}

# What a download writes before it is complete and checked: `PATH.part-PID`.
PART_SUFFIX = ".part-"


def _check(corpus, role, path, name, hint="", check_digest=True):
    """Raises `CorpusError` naming `name` unless the gzip file at `path`
    is complete, has the split's line count and (with `check_digest`)
    the text the corpus published (`Corpus.digests`)."""
    digest = hashlib.sha256()
    try:
        with gzip.open(path, "rb") as f:
            lines = 0
            for chunk in iter(lambda: f.read(1 << 20), b""):
                lines += chunk.count(b"\n")
                digest.update(chunk)
    except (EOFError, OSError, zlib.error) as error:
        raise CorpusError(f"{name} is not a complete gzip file ({error}){hint}") from error
    if lines != corpus.lines[role]:
        raise CorpusError(
            f"{name} has {lines} lines; {corpus.name}'s {corpus.splits[role]} split has "
            f"{corpus.lines[role]}{hint}"
        )
    expected = corpus.digests.get(os.path.basename(path).split(PART_SUFFIX)[0])
    if check_digest and expected and digest.hexdigest() != expected:
        raise CorpusError(
            f"{name} is not {corpus.name}'s {os.path.basename(path).split(PART_SUFFIX)[0]}: "
            f"its text has the SHA-256 {digest.hexdigest()}, the corpus's is {expected}"
            f"{hint}. If it is a mirror's file you mean to use, pass --no-data_digests "
            "(fetch(check_digests=False))."
        )


def _show(label, done, total, started):
    size = f"{done / 1e3:,.1f}/{total / 1e3:,.1f} kB" if total else f"{done / 1e3:,.1f} kB"
    print(f"\r{label}: {size}, {time.time() - started:.0f}s", end="", file=sys.stderr, flush=True)


class Terminated(BaseException):
    """The process was asked to stop (SIGTERM, SIGHUP) during a download."""


@contextlib.contextmanager
def _signals_raise():
    """SIGTERM and SIGHUP raise `Terminated` in the block (as Ctrl-C raises
    `KeyboardInterrupt`), so that what it cleans up in `except` or
    `finally` is cleaned up; outside the main thread, where Python cannot
    handle signals, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminated(number, frame):
        raise Terminated(f"stopped by {signal.Signals(number).name}")

    names = [name for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)]
    before = {name: signal.signal(getattr(signal, name), terminated) for name in names}
    try:
        yield
    finally:
        for name, handler in before.items():
            signal.signal(getattr(signal, name), handler)


def remove_stale_parts(path):
    """Removes `PATH.part-PID` files of downloads to `path` whose process
    has ended (one killed with SIGKILL, or before this version handled
    SIGTERM). Returns their names."""
    removed = []
    for part in glob.glob(glob.escape(path) + PART_SUFFIX + "*"):
        pid = part.rsplit(PART_SUFFIX, 1)[1]
        if not pid.isdigit() or not is_running(int(pid)):
            os.remove(part)
            removed.append(os.path.basename(part))
    return removed


def _download(url, path, timeout):
    """`url` to `path` through a temporary file, with a progress line on
    stderr; the file appears only when every byte has arrived, and the
    temporary file is removed on any error, Ctrl-C, SIGTERM or SIGHUP."""
    remove_stale_parts(path)
    staging = f"{path}{PART_SUFFIX}{os.getpid()}"
    label = f"downloading {os.path.basename(path)}"
    try:
        with _signals_raise(), urllib.request.urlopen(url, timeout=timeout) as response:
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


def fetch(corpus, directory, languages, url=None, timeout=30, check_digests=True):
    """The paths of `corpus`'s train, valid and test files in `languages`,
    as `{"train": (source, target), "valid": ..., "test": ...}`.

    A file already in `directory` is used without touching the network;
    a missing one is downloaded from `url` (default: `corpus.url`; any
    scheme `urllib` reads, `file://` included). Every file's line count is
    checked against `corpus.lines` (so the two sides of a split are
    aligned) and, unless `check_digests=False` (a mirror's files, used
    knowingly), its text against `corpus.digests` (so that a file with the
    right line count but the wrong text, the other language say, is never
    used); a download is written under its name only once complete and
    checked, so an interrupted or bad download leaves nothing behind
    (part files of killed downloads are removed by the next one).

    Raises:
        ValueError: `languages` names a language the corpus lacks.
        CorpusError: a download fails (the message names the URL and the
            directory to put the files in), or a file has the wrong number
            of lines or the wrong text (naming both digests).

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
                hint = " (delete it to download it again)"
                _check(corpus, role, path, path, hint, check_digests)
                continue
            source = f"{url}/{os.path.basename(path)}"
            try:
                staging = _download(source, path, timeout)
            except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
                raise _unreachable(corpus, source, directory, languages, error) from error
            try:
                _check(corpus, role, staging, source, check_digest=check_digests)
                os.replace(staging, path)
            finally:
                if os.path.exists(staging):
                    os.remove(staging)
    return paths
