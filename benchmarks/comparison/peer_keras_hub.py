"""The workers for keras-hub: its `TransformerEncoder`/`TransformerDecoder`
with `ReversibleEmbedding(tie_weights=True)` and `SinePositionEncoding`,
the same loss formula in plain Keras ops, and its cached decoding."""

from comparison.measure import quiet_tensorflow
from comparison.measure import time_calls
from comparison.workload import DECODE_SOURCE_LEN
from comparison.workload import DECODE_STEPS
from comparison.workload import DROPOUT
from comparison.workload import LABEL_SMOOTHING
from comparison.workload import decode_sources
from comparison.workload import forbid_eos_before
from comparison.workload import train_batch


def _threads(spec):
    """TensorFlow's intra-op threads as `spec["threads"]` says (keras-hub
    runs on TensorFlow here), before anything runs."""
    if "threads" in spec:
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(spec["threads"])


def _model(cfg, precision, pad_id, dropout=DROPOUT):
    import keras
    import keras_hub
    from keras import ops

    if precision == "bf16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    d = cfg["d_model"]

    class HubTransformer(keras.Model):
        def __init__(self):
            super().__init__()
            self.embedding = keras_hub.layers.ReversibleEmbedding(cfg["vocab"], d, tie_weights=True)
            self.positions = keras_hub.layers.SinePositionEncoding()
            self.embedding_dropout = keras.layers.Dropout(dropout)
            options = dict(
                intermediate_dim=cfg["d_ff"],
                num_heads=cfg["heads"],
                dropout=dropout,
                activation="relu",
            )
            layers = range(cfg["layers"])
            self.encoders = [keras_hub.layers.TransformerEncoder(**options) for _ in layers]
            self.decoders = [keras_hub.layers.TransformerDecoder(**options) for _ in layers]

        def embed(self, ids, start_index=0, training=None):
            x = self.embedding(ids) * ops.cast(d**0.5, self.compute_dtype)
            x = x + self.positions(x, start_index=start_index)
            return self.embedding_dropout(x, training=training)

        def encode(self, source, training=None):
            x = self.embed(source, training=training)
            for layer in self.encoders:
                x = layer(x, padding_mask=ops.not_equal(source, pad_id), training=training)
            return x

        def call(self, inputs, training=None):
            source, target = inputs
            memory = self.encode(source, training=training)
            mask = ops.not_equal(source, pad_id)
            y = self.embed(target, training=training)
            for layer in self.decoders:
                y = layer(y, memory, encoder_padding_mask=mask, training=training)
            return ops.cast(self.embedding(y, reverse=True), "float32")

    model = HubTransformer()
    model((ops.ones((1, 4), "int32"), ops.ones((1, 4), "int32")))
    return model


def smoothed_cross_entropy(y_true, logits):
    """Label-smoothed cross-entropy in plain Keras ops."""
    from keras import ops

    log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
    targets = ops.expand_dims(ops.cast(y_true, "int32"), -1)
    nll = -ops.take_along_axis(log_probs, targets, axis=-1)[..., 0]
    uniform = -ops.mean(log_probs, axis=-1)
    return (1.0 - LABEL_SMOOTHING) * nll + LABEL_SMOOTHING * uniform


def worker_train(spec):
    """One training step, Keras's default `jit_compile="auto"`."""
    quiet_tensorflow()
    _threads(spec)
    import keras
    import tensorflow as tf

    cfg = spec["cfg"]
    model = _model(cfg, spec["precision"], spec["ids"]["pad"])
    model.compile(
        optimizer=keras.optimizers.Adam(1e-4, beta_1=0.9, beta_2=0.98, epsilon=1e-9),
        loss=smoothed_cross_entropy,
    )
    source, target_in, target_out = (tf.constant(x) for x in train_batch(cfg, spec["ids"]))
    losses = []

    def step():
        losses.append(float(model.train_on_batch((source, target_in), target_out)))

    return {"times": time_calls(step, spec["warmup"], spec["steps"]), "loss": losses[-1]}


def worker_decode(spec):
    """Cached greedy decoding with keras-hub's decoder caches, XLA."""
    quiet_tensorflow()
    _threads(spec)
    import tensorflow as tf
    from keras import ops

    cfg, ids = spec["cfg"], spec["ids"]
    model = _model(cfg, spec["precision"], ids["pad"], dropout=0.0)
    heads, head_dim = cfg["heads"], cfg["d_model"] // cfg["heads"]
    steps = DECODE_STEPS

    def decoder_step(token, index, memory, mask, caches, cross_index):
        x = model.embed(token, start_index=index)
        self_caches, cross_caches = [], []
        for layer, (self_cache, cross_cache) in zip(model.decoders, caches, strict=True):
            x, self_cache, cross_cache = layer(
                x,
                memory,
                encoder_padding_mask=mask,
                self_attention_cache=self_cache,
                self_attention_cache_update_index=index,
                cross_attention_cache=cross_cache,
                cross_attention_cache_update_index=cross_index,
            )
            self_caches.append(self_cache)
            cross_caches.append(cross_cache)
        logits = ops.cast(model.embedding(x[:, -1], reverse=True), "float32")
        logits = forbid_eos_before(logits, index, steps, ids["eos"])
        next_token = tf.argmax(logits, -1, output_type=tf.int32)
        return next_token, list(zip(self_caches, cross_caches, strict=True))

    @tf.function(jit_compile=True)
    def run(source):
        batch = tf.shape(source)[0]
        mask = tf.not_equal(source, ids["pad"])
        memory = model.encode(source)
        dtype = model.compute_dtype
        caches = [
            (
                tf.zeros([batch, 2, steps, heads, head_dim], dtype),
                tf.zeros([batch, 2, DECODE_SOURCE_LEN, heads, head_dim], dtype),
            )
            for _ in model.decoders
        ]
        first = tf.fill([batch, 1], ids["bos"])
        token, caches = decoder_step(first, 0, memory, mask, caches, 0)
        output = tf.TensorArray(tf.int32, size=steps).write(0, token)

        def body(index, token, caches, output):
            token, caches = decoder_step(token[:, None], index, memory, mask, caches, None)
            return index + 1, token, caches, output.write(index, token)

        _, _, _, output = tf.while_loop(
            lambda index, *_: index < steps, body, (1, token, caches, output)
        )
        return tf.transpose(output.stack())

    source = tf.constant(decode_sources(cfg, ids))
    times = time_calls(lambda: run(source).numpy(), spec["warmup"], spec["steps"])
    return {"times": times, "tokens": int(run(source).numpy().size)}
