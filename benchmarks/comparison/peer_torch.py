"""The PyTorch peers, at their best: the paper's Transformer as
`torch.nn.Transformer` and as layers written over
`scaled_dot_product_attention` (the way eole builds its own), each the
same model as ours (post-norm, ReLU, the paper's interleaved sinusoids,
one embedding for the source, the target and the output, dropout on the
embeddings and on every sub-layer's output only, LayerNorm ε 1e-6),
trained with `cross_entropy(label_smoothing=0.1)` and Adam.

What a PyTorch user at their best does, each a `PeerOptions` field, so
that an ablation can add them one at a time (`ABLATION`):

* `causal_flag`: the causal mask registered once and passed with
  `tgt_is_causal=True` (`is_causal` to SDPA), not rebuilt every step,
  which `nn.TransformerDecoder` then compares on the device (a host sync,
  and a graph break under `torch.compile`; pytorch/pytorch#134616);
* `padding_when_padded`: key padding masks only for batches that have
  padding (all-False masks keep flash attention out);
* `fused_adam`: `Adam(fused=True)`;
* `loss_in_graph`: the loss inside the compiled function, compiled with
  `fullgraph=True` (any graph break is then an error);
* `same_model`: no attention dropout, no dropout inside the feed-forward
  network and no final LayerNorms (`nn.Transformer` has all three; ours
  has none), so that both count the same weights.
"""

import math
import typing

from comparison.measure import time_calls
from comparison.workload import DROPOUT
from comparison.workload import LABEL_SMOOTHING
from comparison.workload import train_batch

LAYER_NORM_EPSILON = 1e-6


class PeerOptions(typing.NamedTuple):
    causal_flag: bool = True
    padding_when_padded: bool = True
    fused_adam: bool = True
    loss_in_graph: bool = True
    same_model: bool = True


BEST = PeerOptions()
# As this benchmark ran `nn.Transformer` before: none of the above.
AS_BEFORE = PeerOptions(False, False, False, False, False)
# One change more per row, from AS_BEFORE to BEST.
ABLATION = tuple(
    PeerOptions(*(index < count for index in range(len(BEST)))) for count in range(len(BEST) + 1)
)


def sinusoids(length, d_model):
    """The paper's interleaved position table `(length, d_model)`."""
    import torch

    position = torch.arange(length)[:, None]
    rates = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    table = torch.zeros(length, d_model)
    table[:, 0::2] = torch.sin(position * rates)
    table[:, 1::2] = torch.cos(position * rates)
    return table


def _with_embeddings(cfg, pad_id, dropout, options, body):
    """`body` (encoder and decoder layers) with the tied embedding, the
    sinusoids and the causal and padding masks: `model(source, target,
    padded)` gives the logits."""
    from torch import nn

    d = cfg["d_model"]

    class Peer(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(cfg["vocab"], d)
            nn.init.normal_(self.embedding.weight, std=d**-0.5)
            self.body = body
            self.dropout = nn.Dropout(dropout)
            self.register_buffer("positions", sinusoids(1024, d), persistent=False)
            mask = nn.Transformer.generate_square_subsequent_mask(1024)
            self.register_buffer("causal", mask, persistent=False)

        def embed(self, ids):
            x = self.embedding(ids) * math.sqrt(d) + self.positions[: ids.shape[1]]
            return self.dropout(x)

        def forward(self, source, target, padded):
            length = target.shape[1]
            if options.causal_flag:
                causal = self.causal[:length, :length]
            else:  # rebuilt every step, as this benchmark did
                causal = nn.Transformer.generate_square_subsequent_mask(
                    length, device=target.device
                )
            pad = (source == pad_id) if padded or not options.padding_when_padded else None
            y = self.body(self.embed(source), self.embed(target), causal, options.causal_flag, pad)
            return y @ self.embedding.weight.T

    return Peer()


def _nn_transformer(cfg, dropout, options):
    """`nn.Transformer(batch_first=True)`, as ours without its extras when
    `options.same_model`: `body(source, target, causal, is_causal, pad)`."""
    from torch import nn

    transformer = nn.Transformer(
        d_model=cfg["d_model"],
        nhead=cfg["heads"],
        num_encoder_layers=cfg["layers"],
        num_decoder_layers=cfg["layers"],
        dim_feedforward=cfg["d_ff"],
        dropout=dropout,
        layer_norm_eps=LAYER_NORM_EPSILON,
        batch_first=True,
    )
    if options.same_model:
        transformer.encoder.norm = None
        transformer.decoder.norm = None
        encoders, decoders = transformer.encoder.layers, transformer.decoder.layers
        for layer in [*encoders, *decoders]:
            layer.dropout = nn.Identity()  # inside the feed-forward network
            layer.self_attn.dropout = 0.0
        for layer in decoders:
            layer.multihead_attn.dropout = 0.0

    class Body(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = transformer

        def forward(self, source, target, causal, is_causal, pad):
            return self.transformer(
                source,
                target,
                tgt_mask=causal,
                tgt_is_causal=is_causal or None,
                src_key_padding_mask=pad,
                memory_key_padding_mask=pad,
            )

    return Body()


def _sdpa_transformer(cfg, dropout):
    """Post-norm encoder and decoder layers written over
    `torch.nn.functional.scaled_dot_product_attention`, projections fused
    where they share an input (queries, keys and values of self-attention;
    keys and values of cross-attention)."""
    from torch import nn
    from torch.nn import functional

    d, heads = cfg["d_model"], cfg["heads"]

    def split(x):  # (batch, length, d) -> (batch, heads, length, d / heads)
        return x.unflatten(-1, (heads, d // heads)).transpose(1, 2)

    def attend(q, k, v, pad, is_causal):
        mask = None if pad is None else ~pad[:, None, None, :]  # True: may attend
        y = functional.scaled_dot_product_attention(
            split(q), split(k), split(v), attn_mask=mask, is_causal=is_causal
        )
        return y.transpose(1, 2).flatten(2)

    class FeedForward(nn.Sequential):
        def __init__(self):
            super().__init__(nn.Linear(d, cfg["d_ff"]), nn.ReLU(), nn.Linear(cfg["d_ff"], d))

    class Residual(nn.Module):  # LayerNorm(x + Dropout(y))
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(d, eps=LAYER_NORM_EPSILON)
            self.dropout = nn.Dropout(dropout)

        def forward(self, x, y):
            return self.norm(x + self.dropout(y))

    class EncoderLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.feed_forward = FeedForward()
            self.first, self.second = Residual(), Residual()

        def forward(self, x, pad):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            x = self.first(x, self.out(attend(q, k, v, pad, False)))
            return self.second(x, self.feed_forward(x))

    class DecoderLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.self_out = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.q, self.kv, self.cross_out = nn.Linear(d, d), nn.Linear(d, 2 * d), nn.Linear(d, d)
            self.feed_forward = FeedForward()
            self.first, self.second, self.third = Residual(), Residual(), Residual()

        def forward(self, x, memory, pad):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            x = self.first(x, self.self_out(attend(q, k, v, None, True)))
            k, v = self.kv(memory).chunk(2, dim=-1)
            x = self.second(x, self.cross_out(attend(self.q(x), k, v, pad, False)))
            return self.third(x, self.feed_forward(x))

    class Body(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.ModuleList(EncoderLayer() for _ in range(cfg["layers"]))
            self.decoder = nn.ModuleList(DecoderLayer() for _ in range(cfg["layers"]))

        def forward(self, source, target, causal, is_causal, pad):
            for layer in self.encoder:
                source = layer(source, pad)
            for layer in self.decoder:
                target = layer(target, source, pad)
            return target

    return Body()


def torch_transformer(cfg, pad_id, dropout=DROPOUT, options=BEST):
    """`nn.Transformer` of `cfg`'s shape as `options` make it (see the
    module's docstring): `model(source, target, padded)` gives the logits."""
    return _with_embeddings(cfg, pad_id, dropout, options, _nn_transformer(cfg, dropout, options))


def sdpa_transformer(cfg, pad_id, dropout=DROPOUT):
    """The hand-written model over `scaled_dot_product_attention`."""
    return _with_embeddings(cfg, pad_id, dropout, BEST, _sdpa_transformer(cfg, dropout))


def make_step(model, options, compiled, bf16, device, compiler="inductor"):
    """`(step, optimizer)`: `step(batch, padded)` runs one optimizer step of
    `model` on `(source, target_in, target_out)` and returns the loss, a 0-d
    tensor the device may still be computing. Compiled, the forward pass
    (and with `options.loss_in_graph`, the loss, `fullgraph=True`) is
    `torch.compile`d with `compiler` as its backend (`"aot_eager"`: the
    same graphs captured, no code generated)."""
    import torch
    from torch import nn

    optimizer = torch.optim.Adam(
        model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=options.fused_adam
    )

    def forward(source, target_in, padded):
        with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
            return model(source, target_in, padded)

    def loss_of(logits, target_out):
        return nn.functional.cross_entropy(
            logits.float().reshape(-1, logits.shape[-1]),
            target_out.reshape(-1),
            label_smoothing=LABEL_SMOOTHING,
        )

    def forward_and_loss(source, target_in, target_out, padded):
        return loss_of(forward(source, target_in, padded), target_out)

    if compiled and options.loss_in_graph:
        forward_and_loss = torch.compile(forward_and_loss, fullgraph=True, backend=compiler)
    elif compiled:  # the forward pass alone, the loss outside (as this benchmark did)
        compiled_forward = torch.compile(forward, backend=compiler)

        def forward_and_loss(source, target_in, target_out, padded):
            return loss_of(compiled_forward(source, target_in, padded), target_out)

    def step(batch, padded):
        optimizer.zero_grad(set_to_none=True)
        loss = forward_and_loss(*batch, padded)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step, optimizer


def dynamo_counts():
    """What `torch.compile` did in this process so far: `{"graphs",
    "graph_breaks", "recompiles"}` (Dynamo's own counters)."""
    from torch._dynamo.utils import counters  # Dynamo's counters, read for the report only

    return {
        "graphs": int(counters["stats"]["unique_graphs"]),
        "graph_breaks": int(sum(counters["graph_break"].values())),
        "recompiles": int(sum(counters["recompiles"].values())),
    }


def worker_train(spec):
    """One training step on the CPU at the peer's best (BEST options,
    compiled unless `spec["compiled"]` is false, `spec["threads"]` intra-op
    threads); bf16 is `torch.autocast`."""
    import torch

    cfg, pad_id = spec["cfg"], spec["ids"]["pad"]
    if "threads" in spec:
        torch.set_num_threads(spec["threads"])
    torch.manual_seed(0)
    model = torch_transformer(cfg, pad_id).train()
    source, target_in, target_out = (
        torch.from_numpy(x).long() for x in train_batch(cfg, spec["ids"])
    )
    padded = bool((source == pad_id).any())
    compiled = spec.get("compiled", True)
    step, _ = make_step(model, BEST, compiled, spec["precision"] == "bf16", "cpu")
    losses = []
    times = time_calls(
        lambda: losses.append(float(step((source, target_in, target_out), padded))),
        spec["warmup"],
        spec["steps"],
    )
    result = {"times": times, "loss": losses[-1], "threads": torch.get_num_threads()}
    if compiled:
        result.update(dynamo_counts())
    return result
