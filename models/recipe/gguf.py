"""A small GGUF v3 writer and reader, enough for the embedded models: metadata of the usual scalar,
string and array types; tensors in F32 and F16. Layout as in ggml's gguf.md: header, metadata,
tensor infos, padding to general.alignment, tensor data (each tensor aligned)."""

import struct

import numpy as np

MAGIC = b"GGUF"
VERSION = 3
ALIGNMENT = 32

# metadata value types
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
# tensor types
F32, F16 = 0, 1

_SCALAR = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i",
           FLOAT32: "<f", BOOL: "<?", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}


class UInt32(int):
    pass


class Int32(int):
    pass


class Float32(float):
    pass


def _type_of(v):
    if isinstance(v, bool):
        return BOOL
    if isinstance(v, UInt32):
        return UINT32
    if isinstance(v, Int32):
        return INT32
    if isinstance(v, int):
        return UINT64 if v >= 0 else INT64
    if isinstance(v, Float32):
        return FLOAT32
    if isinstance(v, float):
        return FLOAT64
    if isinstance(v, str):
        return STRING
    if isinstance(v, (list, tuple)):
        return ARRAY
    raise TypeError(f"no GGUF type for {type(v)}")


def _string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _value(t, v):
    if t == STRING:
        return _string(v)
    if t == ARRAY:
        et = _type_of(v[0]) if v else UINT32
        out = [struct.pack("<IQ", et, len(v))]
        if et in _SCALAR:
            out.append(np.asarray(v, dtype=np.dtype(_SCALAR[et])).tobytes())
        else:
            out.extend(_value(et, x) for x in v)
        return b"".join(out)
    return struct.pack(_SCALAR[t], v)


def write(path, metadata, tensors):
    """metadata: ordered dict of key -> value (wrap ints in UInt32/Int32 and floats in Float32
    where llama.cpp writes those types). tensors: list of (name, numpy array of float32 or
    float16); the array's shape is the PyTorch shape, written reversed as GGUF dimensions."""
    head = [MAGIC, struct.pack("<IQQ", VERSION, len(tensors), len(metadata))]
    for k, v in metadata.items():
        t = _type_of(v)
        head.append(_string(k) + struct.pack("<I", t) + _value(t, v))
    offset, blobs = 0, []
    for name, a in tensors:
        a = np.ascontiguousarray(a)
        ttype = {np.dtype(np.float32): F32, np.dtype(np.float16): F16}[a.dtype]
        dims = list(reversed(a.shape))
        head.append(_string(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
                    + struct.pack("<IQ", ttype, offset))
        data = a.astype(a.dtype.newbyteorder("<")).tobytes()
        pad = (-len(data)) % ALIGNMENT
        blobs.append(data + b"\0" * pad)
        offset += len(data) + pad
    head = b"".join(head)
    head += b"\0" * ((-len(head)) % ALIGNMENT)
    with open(path, "wb") as f:
        f.write(head)
        for b in blobs:
            f.write(b)


def read(path):
    """Returns (metadata dict, dict of name -> numpy array in PyTorch shape)."""
    with open(path, "rb") as f:
        buf = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from(fmt, buf, pos)
        pos += struct.calcsize(fmt)
        return vals if len(vals) > 1 else vals[0]

    def string():
        nonlocal pos
        n = take("<Q")
        s = buf[pos:pos + n].decode("utf-8")
        pos += n
        return s

    def value(t):
        if t == STRING:
            return string()
        if t == ARRAY:
            et, n = take("<IQ")
            return [value(et) for _ in range(n)]
        return take(_SCALAR[t])

    if buf[:4] != MAGIC:
        raise ValueError(f"{path}: not a GGUF file")
    pos = 4
    version, n_tensors, n_kv = take("<IQQ")
    if version != VERSION:
        raise ValueError(f"{path}: GGUF version {version}")
    metadata = {}
    for _ in range(n_kv):
        k = string()
        metadata[k] = value(take("<I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        nd = take("<I")
        dims = [take("<Q") for _ in range(nd)]
        ttype, off = take("<IQ")
        infos.append((name, dims, ttype, off))
    align = metadata.get("general.alignment", ALIGNMENT)
    base = pos + (-pos) % align
    tensors = {}
    for name, dims, ttype, off in infos:
        dt = {F32: np.float32, F16: np.float16}[ttype]
        n = int(np.prod(dims))
        a = np.frombuffer(buf, dtype=np.dtype(dt).newbyteorder("<"), count=n, offset=base + off)
        tensors[name] = a.reshape(list(reversed(dims)))
    return metadata, tensors
