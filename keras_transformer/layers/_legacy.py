"""Former names of the layers, registered so that `.keras` files saved
under them still load."""

import keras

from keras_transformer.layers.multi_head_attention import MultiHeadAttention


@keras.saving.register_keras_serializable(package="keras_transformer")
class CachedMultiHeadAttention(MultiHeadAttention):
    """The former name of `MultiHeadAttention`, registered so that `.keras`
    files saved under it still load (as a `MultiHeadAttention`, its old
    `output_dim` read as `output_shape`). Use `MultiHeadAttention`."""

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        output_dim = config.pop("output_dim", None)
        if output_dim is not None:
            config["output_shape"] = output_dim
        return MultiHeadAttention.from_config(config)
