import numpy as np
import pytest

from keras_transformer.pretrained import read_safetensors

safetensors_numpy = pytest.importorskip("safetensors.numpy")


def test_reads_what_the_safetensors_library_writes(tmp_path):
    rng = np.random.default_rng(0)
    tensors = {
        "float32": rng.normal(size=(3, 4)).astype(np.float32),
        "float16": rng.normal(size=(5,)).astype(np.float16),
        "int64": np.arange(6, dtype=np.int64).reshape(2, 3),
        "scalar": np.array(2.5, np.float32),
    }
    path = tmp_path / "weights.safetensors"
    safetensors_numpy.save_file(tensors, str(path), metadata={"format": "np"})
    read = read_safetensors(path)
    assert sorted(read) == sorted(tensors)
    for name, value in tensors.items():
        expected = value.astype(np.float32) if value.dtype.kind == "f" else value
        assert read[name].dtype == expected.dtype and read[name].shape == value.shape
        np.testing.assert_array_equal(read[name], expected)


def test_bfloat16_is_widened_exactly(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    values = torch.tensor([[1.0, -2.5], [3.140625, 1e-3]], dtype=torch.bfloat16)
    save_file({"w": values}, str(tmp_path / "w.safetensors"))
    read = read_safetensors(tmp_path / "w.safetensors")["w"]
    np.testing.assert_array_equal(read, values.float().numpy())


def test_not_a_safetensors_file(tmp_path):
    (tmp_path / "bad").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!")
    with pytest.raises(ValueError, match="no JSON header"):
        read_safetensors(tmp_path / "bad")
    (tmp_path / "short").write_bytes(b"\x01")
    with pytest.raises(ValueError, match="not a safetensors file"):
        read_safetensors(tmp_path / "short")
