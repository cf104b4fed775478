"""SavedModel export for TF Serving."""

from keras_transformer.export.saved_model import existing_versions
from keras_transformer.export.saved_model import export_saved_model

__all__ = ["existing_versions", "export_saved_model"]
