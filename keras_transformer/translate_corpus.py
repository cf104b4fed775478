"""`python -m keras_transformer.translate_corpus`, kept for the scripts written
before the runtime had its own commands: it runs `kt-translate-corpus`
(`keras_transformer_runtime.translate_corpus`), which starts faster because it
imports neither Keras nor TensorFlow.

Example:

    python -m keras_transformer.translate_corpus --model exports/ende_ct2 < in.txt
"""

import sys

from keras_transformer_runtime.translate_corpus import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
