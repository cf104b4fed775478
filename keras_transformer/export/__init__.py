"""SavedModel export for TF Serving."""

from keras_transformer.export.saved_model import export_saved_model
from keras_transformer.export.versions import existing_versions
from keras_transformer.export.versions import resolve_version_dir

__all__ = ["existing_versions", "export_saved_model", "resolve_version_dir"]
