"""Trainable weights per layer, from the architecture: every count the
layer tests expect is built from these."""

DENSE = 2  # kernel and bias
NORM = 2  # gamma and beta of a LayerNormalization
TABLE = 1  # an embedding or position table
ATTENTION = 4 * DENSE  # query, key, value and output projections
FEED_FORWARD = 2 * DENSE  # inner and output projections
ENCODER_LAYER = ATTENTION + FEED_FORWARD + 2 * NORM  # self-attention, feed-forward
DECODER_LAYER = 2 * ATTENTION + FEED_FORWARD + 3 * NORM  # self-, cross-attention, feed-forward
