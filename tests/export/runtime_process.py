"""Running `keras_transformer_runtime` in a process of its own, as a CPU
inference server or a device runs it."""

import json
import os
import subprocess
import sys

HEAVY = ("tensorflow", "tensorflow_text", "keras", "keras_transformer", "jax", "torch")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def translate_in_a_process(runtime, path, sources):
    """`{"translations", "scores", "imported"}`: what `runtime` (a class of
    `keras_transformer_runtime`) made of `sources` in a fresh Python
    process, and which of the heavy packages that process imported."""
    script = (
        "import json, sys\n"
        f"from keras_transformer_runtime import {runtime}\n"
        f"results = {runtime}({os.fspath(path)!r}).translate_with_scores({sources!r})\n"
        "best = [options[0] for options in results]\n"
        "print(json.dumps({\n"
        "    'translations': [h.translation for h in best],\n"
        "    'scores': [h.score for h in best],\n"
        f"    'imported': sorted(m for m in {HEAVY!r} if m in sys.modules),\n"
        "}))\n"
    )
    command = [sys.executable, "-c", script]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])
