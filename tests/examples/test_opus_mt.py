"""examples/opus_mt.py: import a Marian directory, translate, export."""

import os
import subprocess
import sys

import pytest
import tensorflow as tf

from keras_transformer import Translator
from keras_transformer.pretrained import load_marian
from tests.examples.helpers import EXAMPLES
from tests.examples.helpers import load_example

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design

SCRIPT = os.path.join(EXAMPLES, "opus_mt.py")
SENTENCES = ["A dog runs in the park.", ">>deu<< Red ball!", ""]


@pytest.mark.large  # starts a Python process, traces a SavedModel
def test_translates_and_exports_what_load_marian_translates(marian_directory, tmp_path):
    export_dir, ct2_dir = tmp_path / "export", tmp_path / "ct2"
    result = subprocess.run(
        [sys.executable, SCRIPT, "--marian_dir", str(marian_directory), "--export_dir",
         str(export_dir), "--ctranslate2_dir", str(ct2_dir), *SENTENCES],
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    pretrained = load_marian(marian_directory)
    expected = Translator(pretrained.model, pretrained.tokenizer, pretrained.settings).translate(
        SENTENCES
    )
    assert result.stdout.split("\n")[: len(SENTENCES)] == expected
    assert "beam 1" in result.stderr  # the generation config's num_beams (none: 1)
    serve = tf.saved_model.load(str(export_dir / "1")).signatures["serving_default"]
    served = serve(text=tf.constant(SENTENCES))["translation"].numpy()
    assert [t.decode() for t in served] == expected
    assert (ct2_dir / "model.bin").exists() and (ct2_dir / "source.spm").exists()


def test_a_directory_that_is_not_marians_is_a_usage_error(tmp_path, capsys):
    script = load_example("opus_mt")
    with pytest.raises(SystemExit):
        script.main(["--marian_dir", str(tmp_path), "x"])
    assert "--marian_dir" in capsys.readouterr().err
