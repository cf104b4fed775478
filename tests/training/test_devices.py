import warnings

import pytest

from keras_transformer import _backend
from keras_transformer import training
from keras_transformer.training import devices
from keras_transformer.training.devices import cpu_has_native_bf16

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design


@pytest.fixture
def cpu(monkeypatch):
    """Sets the CPU flags that `devices` reads, on a Linux machine without GPU."""

    def set_flags(*flags):
        monkeypatch.setattr(devices.platform, "system", lambda: "Linux")
        monkeypatch.setattr(devices, "_cpu_flags", lambda: set(flags))
        monkeypatch.setattr(_backend, "gpu_compute_capabilities", lambda: [])

    return set_flags


def test_auto_is_bf16_only_where_the_cpu_has_it(cpu):
    cpu("avx2", "avx512f", "avx512_bf16", "amx_bf16")
    assert cpu_has_native_bf16()
    assert training.recommended_mixed_precision() == "bf16"
    assert training.dtype_policy("auto") == "mixed_bfloat16"
    cpu("avx2", "fma")  # an AVX2-only CPU emulates bfloat16
    assert not cpu_has_native_bf16()
    assert training.recommended_mixed_precision() == "none"
    assert training.dtype_policy("auto") == "float32"


def test_bf16_without_native_support_warns_with_the_reason(cpu):
    cpu("avx2", "fma")
    with pytest.warns(RuntimeWarning, match="emulates it, about ten times slower"):
        assert training.dtype_policy("bf16") == "mixed_bfloat16"
    cpu("avx512_bf16")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        training.dtype_policy("bf16")
        training.dtype_policy("none")


def test_gpus_by_compute_capability(monkeypatch):
    for capability, expected in (((8, 0), "bf16"), ((7, 5), "fp16"), ((0, 0), "bf16")):
        monkeypatch.setattr(_backend, "gpu_compute_capabilities", lambda c=capability: [c])
        assert training.recommended_mixed_precision() == expected
        assert training.recommended_jit_compile() is True


def test_tensorflows_gpus_and_their_compute_capability(monkeypatch):
    import tensorflow as tf

    monkeypatch.setattr(
        tf.config, "list_physical_devices", lambda kind=None: ["GPU:0"] if kind == "GPU" else []
    )
    details = {"compute_capability": (9, 0)}
    monkeypatch.setattr(tf.config.experimental, "get_device_details", lambda d: details)
    assert _backend.gpu_compute_capabilities() == [(9, 0)]
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: [])
    assert _backend.gpu_compute_capabilities() == []
