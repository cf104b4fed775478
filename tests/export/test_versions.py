"""Version directories, as local file systems and object stores list them."""

import os
import stat

import pytest
import tensorflow as tf

from keras_transformer.export import existing_versions
from keras_transformer.export import resolve_version_dir

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design


def test_versions_from_an_object_store_listing(monkeypatch):
    # gs:// and s3:// list directories with a trailing slash.
    listing = ["10/", "2/", "1", ".tmp-export-3-x/", "notes.txt", "٣", "7.5"]
    monkeypatch.setattr(tf.io.gfile, "isdir", lambda path: True)
    monkeypatch.setattr(tf.io.gfile, "listdir", lambda path: listing)
    monkeypatch.setattr(tf.io.gfile, "exists", lambda path: path.endswith("/10/saved_model.pb"))
    assert existing_versions("gs://bucket/models") == [1, 2, 10]
    assert resolve_version_dir("gs://bucket/models") == "gs://bucket/models/10"
    with pytest.raises(FileNotFoundError, match=r"versions: \[1, 2, 10\]"):
        resolve_version_dir("gs://bucket/models", version=2)


def test_local_directories(tmp_path):
    assert existing_versions(tmp_path / "missing") == []
    for name in ("3", "12", "tmp"):
        (tmp_path / name).mkdir()
    assert existing_versions(tmp_path) == [3, 12]
    (tmp_path / "12" / "saved_model.pb").write_bytes(b"")
    assert resolve_version_dir(tmp_path) == str(tmp_path / "12")
    assert resolve_version_dir(tmp_path / "12") == str(tmp_path / "12")
    with pytest.raises(FileNotFoundError, match="No SavedModel or numbered version"):
        resolve_version_dir(tmp_path / "tmp")


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_an_export_directory_gets_the_users_umask(tmp_path, words_tokenizer, umask):
    """Exports were created drwx------ (a temporary directory renamed into
    place keeps its 0700): TF Serving or a server running as another user
    could not read them."""
    from keras_transformer import Translator
    from keras_transformer.export import export_ctranslate2
    from keras_transformer.export import versions
    from tests.export.random_models import random_model

    former = os.umask(umask)
    try:
        staging = versions.owned_staging_dir(tmp_path, "x-")
        assert stat.S_IMODE(os.stat(staging).st_mode) == 0o777 & ~umask
        tokenizer, _ = words_tokenizer
        path = export_ctranslate2(Translator(random_model(), tokenizer), tmp_path / f"ct2-{umask}")
    finally:
        os.umask(former)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o777 & ~umask
    for name in os.listdir(path):
        assert stat.S_IMODE(os.stat(os.path.join(path, name)).st_mode) == 0o666 & ~umask
