"""`benchmarks/compare.py` as a package: ours against keras-hub, PyTorch and
CTranslate2 on identical work.

    workload.py          the shared work: configurations, sizes, synthetic data
    measure.py           timing and memory of a worker process
    flops.py             the FLOP model and the matmul ceiling
    ours.py              workers for keras_transformer
    peer_keras_hub.py    workers for keras-hub
    peer_torch.py        workers for PyTorch's nn.Transformer
    peer_ctranslate2.py  workers for CTranslate2
    driver.py            runs every worker in its own subprocess
    report.py            the Markdown table

Every worker is a function `spec -> dict` that `driver.py` runs in a fresh
Python process, so that imports, thread pools and caches never leak from
one measurement into the next; the peers' workers do not import
keras_transformer (the special ids reach them through the spec).
"""
