"""The HTTP server of `python -m keras_transformer_runtime.serve` (the
`[serve]` extra: starlette, uvicorn, prometheus_client), in parts: the
dynamic `Batcher`, the request and response bodies (`protocol`), the
`Server` and its ASGI app, its `Metrics`.

Example:

>>> from keras_transformer_runtime import LiteRTTranslator
>>> from keras_transformer_runtime.serving import Server
>>> server = Server([LiteRTTranslator("ende.tflite")], model_name="ende")
>>> uvicorn.run(server.app, port=8501)  # TF Serving's REST API, /translate, a page
"""

from keras_transformer_runtime.serving.app import Server
from keras_transformer_runtime.serving.batcher import Batcher
from keras_transformer_runtime.serving.batcher import Translation
from keras_transformer_runtime.serving.metrics import Metrics
from keras_transformer_runtime.serving.protocol import BadRequest
from keras_transformer_runtime.serving.protocol import Limits

__all__ = ["BadRequest", "Batcher", "Limits", "Metrics", "Server", "Translation"]
