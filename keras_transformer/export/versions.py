"""The numbered version directories of an export base directory.

TF Serving watches a base directory (`model_base_path`) and serves the
highest numbered subdirectory. Local file systems list `1`, object stores
(`gs://`, `s3://`) list `1/`; both mean version 1. Names that are not
plain ASCII numbers (temporary export directories, files) are not versions.
"""

import os

import tensorflow as tf

SAVED_MODEL_FILE = "saved_model.pb"


def existing_versions(export_dir):
    """The integer versions in `export_dir`, sorted; `[]` if it does not exist.

    Example:

    >>> existing_versions("/models/ende")
    [1, 2]
    """
    export_dir = os.fspath(export_dir)
    if not tf.io.gfile.isdir(export_dir):
        return []
    names = (name.rstrip("/") for name in tf.io.gfile.listdir(export_dir))
    return sorted(int(name) for name in names if name.isascii() and name.isdigit())


def resolve_version_dir(export_dir, version=None):
    """The SavedModel directory to load from `export_dir`.

    `export_dir` may be a SavedModel itself (when `version` is `None`) or a
    base directory of numbered versions, of which `version` (default: the
    highest) is taken.

    Raises:
        FileNotFoundError: there is no such SavedModel; the message lists
            the versions that exist.

    Example:

    >>> resolve_version_dir("/models/ende")
    '/models/ende/2'
    """
    export_dir = os.fspath(export_dir)
    if version is None and tf.io.gfile.exists(os.path.join(export_dir, SAVED_MODEL_FILE)):
        return export_dir
    versions = existing_versions(export_dir)
    if version is None:
        if not versions:
            raise FileNotFoundError(f"No SavedModel or numbered version in {export_dir}")
        version = versions[-1]
    path = os.path.join(export_dir, str(version))
    if not tf.io.gfile.exists(os.path.join(path, SAVED_MODEL_FILE)):
        raise FileNotFoundError(f"No SavedModel at {path} (versions: {versions})")
    return path
