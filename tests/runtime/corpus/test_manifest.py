"""What a corpus rerun's refusal says differs (`corpus_manifest`)."""

import json

import pytest

from keras_transformer_runtime.corpus.manifest import NAMED_FILES
from keras_transformer_runtime.corpus.manifest import differences
from keras_transformer_runtime.corpus.manifest import manifest
from keras_transformer_runtime.corpus.shards import CorpusJob


def record(inputs, export="exports/deen", **job):
    """A manifest as a rerun reads it back: through JSON."""
    return json.loads(json.dumps(manifest(inputs, export, DIGEST, CorpusJob(**job))))


FILES = [(f"mono/part-{n:04d}.gz", 1000 + n, f"{n:064x}") for n in range(1000)]
DIGEST = "ab" * 32  # the export's


def now_of(inputs, export="exports/deen", digest=DIGEST, **job):
    return manifest(inputs, export, digest, CorpusJob(**job))


def test_the_same_run_has_no_differences():
    assert record(FILES) == now_of(FILES)
    assert differences(record(FILES), now_of(FILES)) == ""


def test_job_settings_and_export_are_named_with_both_values():
    now = now_of(FILES, "exports/deen_v2", batch_size=8, with_scores=True)
    assert differences(record(FILES), now) == (
        "job.batch_size: None (now: 8); job.with_scores: False (now: True); "
        'export: "exports/deen" (now: "exports/deen_v2")'
    )


def test_one_file_of_a_thousand_changed_is_named_alone():
    now = [*FILES[:500], (FILES[500][0], 7, FILES[500][2]), *FILES[501:]]
    found = differences(record(FILES), now_of(now))
    assert found == "inputs: changed mono/part-0500.gz (1500 bytes, now 7)"


def test_an_input_or_export_edited_at_the_same_size_and_path_is_named():
    """The manifest recorded inputs by path and size, and the export by
    path: an edit of the same size, or another model at the same path,
    was accepted, mixing old shards with new ones."""
    now = [*FILES[:3], (*FILES[3][:2], "e" * 64), *FILES[4:]]
    found = differences(record(FILES), now_of(now))
    assert (
        found == "inputs: changed mono/part-0003.gz (its content: the same size, another SHA-256)"
    )
    found = differences(record(FILES), now_of(FILES, digest="cd" * 32))
    assert (
        found
        == "export: exports/deen holds other files than the earlier run's (its SHA-256 differs)"
    )


def test_removed_and_added_files_are_named_up_to_a_few_each():
    now = FILES[10:] + [("mono/new.gz", 5, "0" * 64)]
    found = differences(record(FILES), now_of(now))
    removed = ", ".join(path for path, _, _ in FILES[:NAMED_FILES])
    assert found == (f"inputs: removed {removed} and {10 - NAMED_FILES} more; added mono/new.gz")
    assert len(found) < 200  # not the two lists of a thousand files


def test_the_same_files_in_another_order_are_said_to_be_so():
    found = differences(record(FILES), now_of(FILES[::-1]))
    assert found == "inputs: the same files in another order"


@pytest.mark.parametrize(
    "earlier",
    [None, [], {"job": {}}, {"job": {}, "inputs": [{"path": "a"}], "export": "e"}, {"job": 3}],
)
def test_a_record_that_is_no_manifest_is_said_to_be_so(earlier):
    assert differences(earlier, now_of(FILES)) == "not a manifest this package wrote"
