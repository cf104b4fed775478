"""The inputs of the translation signatures: `Translator`'s `tf.function`s
take them, and a SavedModel export serves them under these names."""

import tensorflow as tf

TEXT = tf.TensorSpec([None], tf.string, name="text")
SOURCE = tf.TensorSpec([None], tf.string, name="source")
TARGET = tf.TensorSpec([None], tf.string, name="target")
SEED = tf.TensorSpec([], tf.int64, name="seed")
PREFIX = tf.TensorSpec([None], tf.string, name="prefix")
MAX_OUTPUT_LENGTH = tf.TensorSpec([], tf.int32, name="max_output_length")
# Phrases no output may contain, as target ids: `decoding.banned`'s layout.
BANNED_IDS = tf.TensorSpec([None, None, None], tf.int32, name="banned_ids")
