"""What a corpus translation's output directory records of the run that
wrote it (`corpus.json`: the inputs, the export, the job's settings), and
what differs when a rerun into it asks for others.

Example:

>>> files = [("a.gz", 10, "0a1b"), ("b.gz", 20, "2c3d")]
>>> earlier = manifest(files, "exports/deen", "9f", CorpusJob())
>>> differences(earlier, manifest([("a.gz", 12, "4e5f")], "exports/deen", "9f", CorpusJob()))
'inputs: removed b.gz; changed a.gz (10 bytes, now 12)'
"""

import json

MANIFEST = "corpus.json"
# The most files a message names of each kind of difference.
NAMED_FILES = 3


def manifest(inputs, export, export_sha256, job):
    """The record of a run: `inputs` (`(path, bytes, sha256, ...)`, in order),
    `export` (its path) and the SHA-256 of its files, and `job` (a
    `CorpusJob`): a rerun of other contents at the same paths differs."""
    return {
        "inputs": [{"path": p, "bytes": n, "sha256": digest} for p, n, digest, *_ in inputs],
        "export": {"path": export, "sha256": export_sha256},
        "job": job.to_dict(),
    }


def differences(earlier, now):
    """What differs between an `earlier` manifest (as read back) and `now`,
    as text: each job setting as `job.name: earlier (now: value)`, the
    export, and the inputs by file (removed, added, of another size, or
    the same files in another order), naming at most `NAMED_FILES` of each.
    """
    if not _readable(earlier):
        return "not a manifest this package wrote"
    before, after = earlier["job"], now["job"]
    parts = [
        f"job.{name}: {before.get(name)!r} (now: {after.get(name)!r})"
        for name in sorted(set(before) | set(after))
        if before.get(name) != after.get(name)
    ]
    if earlier["export"] != now["export"]:
        parts.append(_export_difference(earlier["export"], now["export"]))
    if earlier["inputs"] != now["inputs"]:
        parts.append("inputs: " + _input_differences(earlier["inputs"], now["inputs"]))
    return "; ".join(parts)


def _readable(record):
    """Whether `record` has a manifest's parts, of their types."""
    return (
        isinstance(record, dict)
        and isinstance(record.get("job"), dict)
        and isinstance(record.get("inputs"), list)
        and all(isinstance(f, dict) and {"path", "bytes"} <= set(f) for f in record["inputs"])
        and "export" in record
    )


def _export_difference(earlier, now):
    """The export's difference: another path, or other files at it."""
    earlier = earlier if isinstance(earlier, dict) else {"path": earlier}  # before digests
    if earlier.get("path") != now["path"]:
        return f"export: {json.dumps(earlier.get('path'))} (now: {json.dumps(now['path'])})"
    return f"export: {now['path']} holds other files than the earlier run's (its SHA-256 differs)"


def _input_differences(earlier, now):
    before = {f["path"]: (f["bytes"], f.get("sha256")) for f in earlier}
    after = {f["path"]: (f["bytes"], f.get("sha256")) for f in now}

    def changed(path):
        (size, _), (new_size, _) = before[path], after[path]
        if size != new_size:
            return f"{path} ({size} bytes, now {new_size})"
        return f"{path} (its content: the same size, another SHA-256)"

    kinds = [
        ("removed", [path for path in before if path not in after]),
        ("added", [path for path in after if path not in before]),
        ("changed", [changed(p) for p in before if p in after and before[p] != after[p]]),
    ]
    parts = [f"{kind} {_named(files)}" for kind, files in kinds if files]
    return "; ".join(parts) if parts else "the same files in another order"


def _named(items):
    """The first `NAMED_FILES` of `items`, and how many more."""
    more = len(items) - NAMED_FILES
    return ", ".join(items[:NAMED_FILES]) + (f" and {more} more" if more > 0 else "")
