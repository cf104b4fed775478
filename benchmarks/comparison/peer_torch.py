"""The worker for PyTorch: `nn.Transformer(batch_first=True)` with a tied
embedding, the paper's interleaved sinusoids and
`cross_entropy(label_smoothing=0.1)`."""

from comparison.measure import time_calls
from comparison.workload import DROPOUT
from comparison.workload import LABEL_SMOOTHING
from comparison.workload import train_batch


def torch_transformer(cfg, pad_id, dropout=DROPOUT):
    """`nn.Transformer(batch_first=True)` of `cfg`'s shape with a tied
    embedding and the paper's interleaved sinusoids: `model(source,
    target)` gives the logits."""
    import math

    import torch
    from torch import nn

    d = cfg["d_model"]

    class TorchTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(cfg["vocab"], d)
            nn.init.normal_(self.embedding.weight, std=d**-0.5)
            self.transformer = nn.Transformer(
                d_model=d,
                nhead=cfg["heads"],
                num_encoder_layers=cfg["layers"],
                num_decoder_layers=cfg["layers"],
                dim_feedforward=cfg["d_ff"],
                dropout=dropout,
                batch_first=True,
            )
            self.dropout = nn.Dropout(dropout)
            position = torch.arange(1024)[:, None]
            rates = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
            table = torch.zeros(1024, d)
            table[:, 0::2] = torch.sin(position * rates)
            table[:, 1::2] = torch.cos(position * rates)
            self.register_buffer("positions", table)

        def embed(self, ids):
            x = self.embedding(ids) * math.sqrt(d) + self.positions[: ids.shape[1]]
            return self.dropout(x)

        def forward(self, source, target):
            causal = nn.Transformer.generate_square_subsequent_mask(
                target.shape[1], device=target.device
            )
            pad = source == pad_id
            y = self.transformer(
                self.embed(source),
                self.embed(target),
                tgt_mask=causal,
                src_key_padding_mask=pad,
                memory_key_padding_mask=pad,
            )
            return y @ self.embedding.weight.T

    return TorchTransformer()


def training_step(model, optimizer, batch, bf16=False, device="cpu"):
    """One optimizer step of `model` (or its compiled forward pass) on
    `(source, target_in, target_out)`, bf16 by `torch.autocast`; returns
    the loss, a 0-d tensor the device may still be computing."""
    import torch
    from torch import nn

    source, target_in, target_out = batch
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
        logits = model(source, target_in)
    loss = nn.functional.cross_entropy(
        logits.float().reshape(-1, logits.shape[-1]),
        target_out.reshape(-1),
        label_smoothing=LABEL_SMOOTHING,
    )
    loss.backward()
    optimizer.step()
    return loss.detach()


def worker_train(spec):
    """One training step; bf16 is `torch.autocast`."""
    import torch

    cfg, pad_id = spec["cfg"], spec["ids"]["pad"]
    torch.manual_seed(0)
    model = torch_transformer(cfg, pad_id)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    source, target_in, target_out = (
        torch.from_numpy(x).long() for x in train_batch(cfg, spec["ids"])
    )
    bf16 = spec["precision"] == "bf16"
    losses = []

    def step():
        batch = (source, target_in, target_out)
        losses.append(float(training_step(model, optimizer, batch, bf16=bf16)))

    model.train()
    times = time_calls(step, spec["warmup"], spec["steps"])
    return {"times": times, "loss": losses[-1], "threads": torch.get_num_threads()}
