"""A reader of `.safetensors` files with NumPy alone (no PyTorch)."""

import json
import struct

import numpy as np

# safetensors' dtype names and NumPy's; BF16 has no NumPy type and is
# widened from its 16 bits.
DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}


def read_safetensors(path):
    """Every tensor of a `.safetensors` file as `{name: float32 array}`
    (integer and boolean tensors keep their type).

    The format: an 8-byte little-endian header size, a JSON header mapping
    each name to its `dtype`, `shape` and `data_offsets` into the bytes
    that follow, then those bytes.

    Raises:
        ValueError: the file is truncated or not a safetensors file.

    Example:

    >>> weights = read_safetensors("opus-mt-en-de/model.safetensors")
    >>> weights["final_logits_bias"].shape
    (1, 58101)
    """
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: not a safetensors file ({len(data)} bytes).")
    (header_size,) = struct.unpack("<Q", data[:8])
    try:
        header = json.loads(data[8 : 8 + header_size].decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ValueError(f"{path}: not a safetensors file (no JSON header).") from None
    body = memoryview(data)[8 + header_size :]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        if end > len(body):
            raise ValueError(f"{path}: truncated ({name!r} ends past the file).")
        raw = body[begin:end]
        if entry["dtype"] == "BF16":
            bits = np.frombuffer(raw, np.uint16).astype(np.uint32) << 16
            array = bits.view(np.float32)
        elif entry["dtype"] in DTYPES:
            array = np.frombuffer(raw, DTYPES[entry["dtype"]])
        else:
            raise ValueError(f"{path}: {name!r} has the unsupported dtype {entry['dtype']!r}.")
        array = array.reshape(entry["shape"])
        tensors[name] = array.astype(np.float32) if array.dtype.kind == "f" else array.copy()
    return tensors
