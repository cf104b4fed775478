"""The runners: one `Runner` per kind of export (SavedModel, CTranslate2,
LiteRT, ONNX), the settings they share, what they return, and loading an
export by its path (`loading.load_runner`)."""
