"""`python -m tests.export.serve_without_tensorflow ARGS`: the server of
`keras_transformer_runtime.serve` in a process where TensorFlow (and
Keras) cannot be imported, as on an inference machine that has only the
runtime: a server that imports them fails to start."""

import sys

from tests.without_tensorflow import NoTensorFlow

if __name__ == "__main__":
    sys.meta_path.insert(0, NoTensorFlow(blocked=("keras",)))
    from keras_transformer_runtime import serve

    serve.main(sys.argv[1:])
