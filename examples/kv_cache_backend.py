# SPDX-License-Identifier: Apache-2.0
"""A KV-cache store on stripefs: each KV chunk (a tensor) is one object.

The shape a serving engine's storage backend has: contains(key), put(key,
tensor), get(key) -> tensor and batched_get(keys). A tensor is a numpy array,
or a CPU torch tensor (it is stored through its numpy view and loaded back
as a torch tensor when torch is installed and asked for).

An object holds a small header (dtype and shape, as text) and then the
tensor's raw bytes, so get() knows what to rebuild and reads the bytes
straight into the new array's memory.

    with KVCacheBackend("/srv/pool/meta") as cache:
        cache.put("req42/layer0/chunk3", kv)
        kv_back = cache.get("req42/layer0/chunk3")
"""
import json

import numpy as np

import stripefs

_MAGIC = b"SKV1"
_HEADER_BYTES = 256  # magic, header length, JSON, padding: the tensor starts aligned


class KVCacheBackend:
    def __init__(self, meta_dir, prefix="kv", as_torch=False, **pool_options):
        self._pool = stripefs.Pool.open(meta_dir, **pool_options)
        self._prefix = prefix.strip("/")
        self._as_torch = as_torch

    def _name(self, key):
        return f"{self._prefix}/{key}"

    def contains(self, key):
        try:
            self._pool.size(self._name(key))
            return True
        except FileNotFoundError:
            return False

    def put(self, key, tensor):
        array = tensor.numpy() if hasattr(tensor, "numpy") and not isinstance(tensor, np.ndarray) else tensor
        array = np.ascontiguousarray(array)
        meta = json.dumps({"dtype": array.dtype.str, "shape": list(array.shape)}).encode()
        if len(meta) > _HEADER_BYTES - 8:
            raise ValueError(f"tensor of shape {array.shape} has too long a header")
        header = _MAGIC + len(meta).to_bytes(4, "little") + meta
        blob = bytearray(_HEADER_BYTES + array.nbytes)
        blob[:len(header)] = header
        memoryview(blob)[_HEADER_BYTES:] = array.reshape(-1).view(np.uint8)
        self._pool.put(self._name(key), blob)

    def get(self, key):
        """The tensor stored under key; KeyError when there is none."""
        name = self._name(key)
        try:
            head = self._pool.read(name, 0, _HEADER_BYTES)
        except FileNotFoundError:
            raise KeyError(key) from None
        return self._load(name, head, key)

    def batched_get(self, keys):
        """The tensor of each key, or None for a key with none."""
        out = []
        for key in keys:
            try:
                out.append(self.get(key))
            except KeyError:
                out.append(None)
        return out

    def _load(self, name, head, key):
        if head[:4] != _MAGIC:
            raise ValueError(f"{name} is not a KV chunk")
        length = int.from_bytes(head[4:8], "little")
        meta = json.loads(head[8:8 + length])
        array = np.empty(meta["shape"], dtype=np.dtype(meta["dtype"]))
        got = self._pool.read_into(name, _HEADER_BYTES, array.reshape(-1).view(np.uint8))
        if got != array.nbytes:
            raise ValueError(f"{name}: {got} bytes of a {array.nbytes}-byte tensor")
        if self._as_torch:
            import torch
            return torch.from_numpy(array)
        return array

    def close(self):
        self._pool.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
