"""`python -m tests.runtime.corpus.worker INPUT OUTPUT WORKERS DELAY`:
`corpus.translate_corpus` of the files INPUT matches into OUTPUT, shards
of 5 lines, with a `ReversingRunner` taking DELAY seconds per call, on
WORKERS local processes: a corpus translation to kill and rerun."""

import functools
import sys

from keras_transformer_runtime.corpus import pipeline as corpus
from keras_transformer_runtime.corpus.shards import CorpusJob
from tests.runtime.serving.reversing import ReversingRunner

if __name__ == "__main__":
    pattern, output, workers, delay = sys.argv[1:]
    corpus.translate_corpus(
        [pattern],
        output,
        "unused",
        CorpusJob(shard_lines=5, batch_size=5),
        workers=int(workers),
        load_runner=functools.partial(ReversingRunner, delay=float(delay)),
    )
