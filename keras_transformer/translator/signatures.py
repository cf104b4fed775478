"""The inputs of the translation signatures: `Translator`'s `tf.function`s
take them, and a SavedModel export serves them under these names."""

import tensorflow as tf

from keras_transformer_runtime.text import glossary

TEXT = tf.TensorSpec([None], tf.string, name="text")
SOURCE = tf.TensorSpec([None], tf.string, name="source")
TARGET = tf.TensorSpec([None], tf.string, name="target")
SEED = tf.TensorSpec([], tf.int64, name="seed")
PREFIX = tf.TensorSpec([None], tf.string, name="prefix")
MAX_OUTPUT_LENGTH = tf.TensorSpec([], tf.int32, name="max_output_length")
# Per sentence, phrases joined by `PHRASE_SEPARATOR` (`""`: none): the
# phrases its translation must contain, and those it must not.
CONSTRAINTS = tf.TensorSpec([None], tf.string, name="constraints")
BANNED = tf.TensorSpec([None], tf.string, name="banned")
PHRASE_SEPARATOR = glossary.PHRASE_SEPARATOR
UNWRITABLE_CONSTRAINT = glossary.UNWRITABLE_CONSTRAINT
IDS = tf.TensorSpec([None, None], tf.int32, name="ids")
# A multilingual model's export: per text, its target language (`""`: a
# tag typed at the start of the text, `>>fr<< ...`).
TARGET_LANG = tf.TensorSpec([None], tf.string, name="target_lang")
