"""What a corpus translation's output directory records of the run that
wrote it (`corpus.json`: the inputs, the export, the job's settings), and
what differs when a rerun into it asks for others.

Example:

>>> earlier = manifest([("a.gz", 10), ("b.gz", 20)], "exports/deen", CorpusJob())
>>> differences(earlier, manifest([("a.gz", 12)], "exports/deen", CorpusJob()))
'inputs: removed b.gz; changed a.gz (10 bytes, now 12)'
"""

import json

MANIFEST = "corpus.json"
# The most files a message names of each kind of difference.
NAMED_FILES = 3


def manifest(inputs, export, job):
    """The record of a run: `inputs` (`(path, bytes)` pairs, in order),
    `export` (its path) and `job` (a `CorpusJob`)."""
    return {
        "inputs": [{"path": path, "bytes": size} for path, size in inputs],
        "export": export,
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
        parts.append(f"export: {json.dumps(earlier['export'])} (now: {json.dumps(now['export'])})")
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


def _input_differences(earlier, now):
    before = {f["path"]: f["bytes"] for f in earlier}
    after = {f["path"]: f["bytes"] for f in now}
    kinds = [
        ("removed", [path for path in before if path not in after]),
        ("added", [path for path in after if path not in before]),
        (
            "changed",
            [
                f"{path} ({before[path]} bytes, now {after[path]})"
                for path in before
                if path in after and before[path] != after[path]
            ],
        ),
    ]
    parts = [f"{kind} {_named(files)}" for kind, files in kinds if files]
    return "; ".join(parts) if parts else "the same files in another order"


def _named(items):
    """The first `NAMED_FILES` of `items`, and how many more."""
    more = len(items) - NAMED_FILES
    return ", ".join(items[:NAMED_FILES]) + (f" and {more} more" if more > 0 else "")
