"""A corpus translation's output directory: its shards, written whole
through temporaries (`write_whole`) and read back in the inputs' order
(`read_records`), its manifest (`corpus.json`) and summary, and a run's
side of them (`CorpusRun`): it touches no file it did not write.

Example:

>>> for record in read_records("bt/"):
...     print(record["file"], record["line"], record.get("translation"))
"""

import dataclasses
import itertools
import json
import os
import re
import uuid

from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import MetricsFilter

from keras_transformer_runtime.corpus import manifest as corpus_manifest
from keras_transformer_runtime.corpus import shards as corpus_shards
from keras_transformer_runtime.corpus.manifest import MANIFEST
from keras_transformer_runtime.corpus.shards import ERRORS
from keras_transformer_runtime.corpus.shards import TRANSLATIONS
from keras_transformer_runtime.corpus.shards import CorpusJob

SUMMARY = "summary.json"
NAMESPACE = "keras_transformer"  # of the pipeline's metrics
TEMPORARY_SUFFIX = ".tmp"
# The names of the files a run writes, and of its temporaries
# (`write_whole`): the only files of `output` it ever removes.
OWN_FILES = re.compile(r"^(corpus\.json|summary\.json|(translations|errors)-\d+-\d+\.jsonl)$")
OWN_TEMPORARIES = re.compile(OWN_FILES.pattern[:-1] + r"\.[0-9a-f]{32}\.tmp$")


def write_atomically(path, records):
    """Writes `records` as JSON lines to `path` through a temporary file
    renamed when whole."""
    write_whole(path, corpus_shards.jsonl(records))


def write_whole(path, data):
    """Writes the bytes `data` to `path` through a temporary file renamed
    when whole: a reader finds all of it or no file."""
    temporary = f"{path}.{uuid.uuid4().hex}{TEMPORARY_SUFFIX}"
    with FileSystems.create(temporary) as f:
        f.write(data)
    FileSystems.rename([temporary], [path])


def read_file(path, missing_ok=False):
    """The records of a JSON-lines file (`[]` if it is missing and
    `missing_ok`)."""
    if missing_ok and not FileSystems.exists(path):
        return []
    with FileSystems.open(path, compression_type="uncompressed") as f:
        return corpus_shards.from_jsonl(f.read())


def read_records(output, kinds=(TRANSLATIONS, ERRORS)):
    """The records of a corpus translation's `output`, translations and
    errors (`kinds`), in the inputs' order: by file, then line."""
    paths = sorted(
        (m.path.rsplit("/", 1)[-1].split("-", 1)[1], m.path)
        for kind in kinds
        for m in _matched(FileSystems.join(output, f"{kind}-*.jsonl"))
    )
    for _, shard in itertools.groupby(paths, key=lambda place_path: place_path[0]):
        records = [r for _, path in shard for r in read_file(path)]
        yield from sorted(records, key=lambda r: (r["file"], r["line"]))


def read_manifest(output):
    """The manifest (`corpus.json`) of the run `output` holds, as written;
    `None` where it holds none (or not one this package wrote)."""
    path = FileSystems.join(output, MANIFEST)
    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path, compression_type="uncompressed") as f:
        try:
            return json.loads(f.read())
        except ValueError:  # not JSON: not this package's
            return None


def _matched(pattern):
    return FileSystems.match([pattern])[0].metadata_list


@dataclasses.dataclass
@dataclasses.dataclass
class CorpusRun:
    """The launcher's side of `translate_corpus`: the manifest of the
    output, what was left from a killed run, and the summary."""

    inputs: list  # (path, bytes, sha256)
    output: str
    export: str
    export_sha256: str
    job: CorpusJob

    def manifest(self):
        return corpus_manifest.manifest(self.inputs, self.export, self.export_sha256, self.job)

    def prepare(self):
        """Checks that `output` holds nothing or this run's earlier
        outputs, records the manifest, and removes a killed run's
        temporary files. Whether it wrote the manifest (a new run)."""
        if os.path.isfile(self.output):  # a local file (object stores have no directories)
            raise ValueError(
                f"`output` must be a directory (new, or an earlier run's). Received the file "
                f"output={self.output!r}"
            )
        path, now = FileSystems.join(self.output, MANIFEST), self.manifest()
        if FileSystems.exists(path):
            earlier = read_manifest(self.output)
            if earlier != now:
                differences = corpus_manifest.differences(earlier, now)
                raise ValueError(
                    f"`output` {self.output!r} holds a corpus translation of other inputs or "
                    f"settings ({MANIFEST}: {differences}); use the same ones, another "
                    "directory, or remove it to start again."
                )
            self.remove_temporary_files()
            return False
        foreign = [n for n in self._names() if not OWN_FILES.match(n)]
        if foreign:
            raise ValueError(
                f"`output` {self.output!r} holds files this package did not write (such as "
                f"{foreign[0]!r}) and no {MANIFEST}: use a new or empty directory."
            )
        if not FileSystems.exists(self.output):
            FileSystems.mkdirs(self.output)
        write_whole(path, json.dumps(now, indent=1, sort_keys=True).encode())
        self.remove_temporary_files()
        return True

    def _names(self):
        """The names of the files in `output`."""
        if not FileSystems.exists(self.output):
            return []
        return [m.path.rsplit("/", 1)[-1] for m in _matched(FileSystems.join(self.output, "*"))]

    def remove_temporary_files(self):
        """Removes what a killed run left half-written: this package's
        temporaries only (`OWN_TEMPORARIES`), never another program's."""
        leftovers = _matched(FileSystems.join(self.output, f"*{TEMPORARY_SUFFIX}"))
        ours = [m.path for m in leftovers if OWN_TEMPORARIES.match(m.path.rsplit("/", 1)[-1])]
        if ours:
            FileSystems.delete(ours)

    def forget(self):
        """Removes the manifest of a run that failed before writing any
        shard: it records nothing, and would refuse the corrected rerun."""
        shards = [n for n in self._names() if n.startswith((TRANSLATIONS, ERRORS))]
        if not shards:
            FileSystems.delete([FileSystems.join(self.output, MANIFEST)])

    def summary(self, result, seconds):
        """What the run did, from its metrics, written to `summary.json`."""
        names = ("lines", "translated", "errors", "kept_from_earlier_runs")
        counts = {name: _counter(result, name) for name in names}
        summary = {
            **counts,
            "loading_seconds": _largest(result, "loading_ms", 0) / 1000,
            "batch_size": _largest(result, "batch_size", self.job.batch_size),
            "seconds": round(seconds, 3),
            "sentences_per_second": round(counts["translated"] / max(seconds, 1e-9), 2),
        }
        write_whole(
            FileSystems.join(self.output, SUMMARY),
            json.dumps(summary, indent=1, sort_keys=True).encode(),
        )
        return summary


def _counter(result, name):
    found = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE).with_name(name))
    values = [c.committed if c.committed is not None else c.attempted for c in found["counters"]]
    return int(sum(values))


def _largest(result, name, default):
    """The largest value of distribution `name` (`default` if none was
    recorded): the slowest worker's `loading_ms`, the `batch_size` its
    runner used."""
    query = MetricsFilter().with_namespace(NAMESPACE).with_name(name)
    found = result.metrics().query(query)["distributions"]
    values = [d.committed if d.committed is not None else d.attempted for d in found]
    return max((value.max for value in values if value and value.count), default=default)
