"""A writer of ONNX model files for the few message types cortex's graph builder uses.

An ONNX file is one protobuf ``ModelProto`` (onnx/onnx.proto, proto2 syntax). Writing it
needs no ``onnx`` package: the builder uses nodes with int, float and int-list attributes,
tensors as raw little-endian data, and tensor value infos with symbolic or fixed dims.
This module writes those, field by field in field-number order with proto2 presence
(a field is written when it is set, even to its default), which is what protobuf's own
serializer does, so the bytes equal ``onnx.helper`` + ``SerializeToString()`` for the same
graph (the tests compare them, and ``model.EXPECTED_ONNX_SHA256`` pins the result).

Not written, because the builder needs none of them: doc strings, domains of nodes,
string/tensor/graph attributes, sparse or external tensors, metadata, functions.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "FLOAT",
    "INT8",
    "INT32",
    "INT64",
    "UINT8",
    "Node",
    "ValueInfo",
    "model_bytes",
    "read_initializers",
    "tensor_bytes",
]

# TensorProto.DataType
FLOAT = 1
UINT8 = 2
INT8 = 3
INT32 = 6
INT64 = 7
_DATA_TYPES: dict[np.dtype[Any], int] = {
    np.dtype("<f4"): FLOAT,
    np.dtype("u1"): UINT8,
    np.dtype("i1"): INT8,
    np.dtype("<i4"): INT32,
    np.dtype("<i8"): INT64,
}
_DTYPES = {code: dtype for dtype, code in _DATA_TYPES.items()}

# AttributeProto.AttributeType
_ATTR_FLOAT, _ATTR_INT, _ATTR_INTS = 1, 2, 7

_VARINT, _I32, _LEN = 0, 5, 2


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s are ten bytes of two's complement
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _tag(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _int(number: int, value: int) -> bytes:
    return _tag(number, _VARINT) + _varint(value)


def _float(number: int, value: float) -> bytes:
    return _tag(number, _I32) + struct.pack("<f", value)


def _bytes(number: int, value: bytes) -> bytes:
    return _tag(number, _LEN) + _varint(len(value)) + value


def _str(number: int, value: str) -> bytes:
    return _bytes(number, value.encode("utf-8"))


def _ints(number: int, values: Iterable[int]) -> bytes:
    # proto2 repeated scalars without [packed = true] (dims, ints): one tag per element
    return b"".join(_int(number, v) for v in values)


@dataclass(frozen=True, slots=True)
class Node:
    """A NodeProto: ``op_type(inputs) -> outputs`` with int, float or int-list attributes."""

    op_type: str
    inputs: Sequence[str]
    outputs: Sequence[str]
    name: str = ""
    attributes: Mapping[str, int | float | Sequence[int]] = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        out = [_str(1, i) for i in self.inputs]
        out += [_str(2, o) for o in self.outputs]
        if self.name:
            out.append(_str(3, self.name))
        out.append(_str(4, self.op_type))
        for key in sorted(self.attributes):  # onnx.helper.make_node sorts them by name
            out.append(_bytes(5, _attribute(key, self.attributes[key])))
        return b"".join(out)


def _attribute(name: str, value: int | float | Sequence[int]) -> bytes:
    if isinstance(value, bool):
        raise TypeError(f"attribute {name}: bool is not an ONNX attribute type")
    if isinstance(value, int):
        return _str(1, name) + _int(3, value) + _int(20, _ATTR_INT)
    if isinstance(value, float):
        return _str(1, name) + _float(2, value) + _int(20, _ATTR_FLOAT)
    return _str(1, name) + _ints(8, [int(v) for v in value]) + _int(20, _ATTR_INTS)


def tensor_bytes(name: str, array: np.ndarray) -> bytes:
    """A TensorProto holding `array` as raw little-endian data: float32, int8 and uint8
    as they are, every other integer type as int64, float64 as float32."""
    arr = np.ascontiguousarray(array)
    if arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    elif arr.dtype.kind in "iu" and arr.dtype.itemsize > 1:
        arr = arr.astype(np.int64)  # a list of ints is int32 on Windows with numpy 1.x
    dtype = arr.dtype.newbyteorder("<") if arr.dtype.itemsize > 1 else arr.dtype
    if dtype not in _DATA_TYPES:
        raise TypeError(f"tensor {name}: dtype {arr.dtype} is not float32, int8, uint8 or int64")
    raw = arr.astype(dtype, copy=False).tobytes()
    return _ints(1, arr.shape) + _int(2, _DATA_TYPES[dtype]) + _str(8, name) + _bytes(9, raw)


@dataclass(frozen=True, slots=True)
class ValueInfo:
    """A ValueInfoProto of a tensor: its name, element type and dims (int or symbolic)."""

    name: str
    elem_type: int
    shape: Sequence[int | str]

    def to_bytes(self) -> bytes:
        dims = b"".join(
            _bytes(1, _int(1, d) if isinstance(d, int) else _str(2, d)) for d in self.shape
        )
        tensor_type = _int(1, self.elem_type) + _bytes(2, dims)
        return _str(1, self.name) + _bytes(2, _bytes(1, tensor_type))


def model_bytes(
    *,
    graph_name: str,
    nodes: Sequence[Node],
    initializers: Sequence[bytes],
    inputs: Sequence[ValueInfo],
    outputs: Sequence[ValueInfo],
    ir_version: int,
    opset: int,
    producer_name: str,
    producer_version: str,
) -> bytes:
    """A serialized ModelProto of one graph with the default-domain opset `opset`.

    `initializers` are :func:`tensor_bytes` results, in order.
    """
    graph = b"".join(
        [
            *(_bytes(1, n.to_bytes()) for n in nodes),
            _str(2, graph_name),
            *(_bytes(5, t) for t in initializers),
            *(_bytes(11, v.to_bytes()) for v in inputs),
            *(_bytes(12, v.to_bytes()) for v in outputs),
        ]
    )
    opset_id = _str(1, "") + _int(2, opset)
    return b"".join(
        [
            _int(1, ir_version),
            _str(2, producer_name),
            _str(3, producer_version),
            _bytes(7, graph),
            _bytes(8, opset_id),
        ]
    )


# -- reading back the initializers of a graph this module wrote ---------------------------


def _read_varint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes | memoryview) -> Iterable[tuple[int, int | memoryview]]:
    """(field number, value) of a serialized message: an int for varints, the bytes of
    length-delimited fields; fixed-width fields are skipped."""
    view = memoryview(data)
    pos = 0
    while pos < len(view):
        key, pos = _read_varint(view, pos)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, pos = _read_varint(view, pos)
            yield number, value
        elif wire == _LEN:
            size, pos = _read_varint(view, pos)
            yield number, view[pos : pos + size]
            pos += size
        elif wire == _I32:
            pos += 4
        elif wire == 1:  # 64-bit
            pos += 8
        else:
            raise ValueError(f"unsupported protobuf wire type {wire} at byte {pos}")


def read_initializers(model: bytes) -> dict[str, np.ndarray]:
    """The initializers of a serialized ModelProto whose tensors hold raw data (as
    :func:`tensor_bytes` writes them), by name. Raises ValueError on anything else."""
    out: dict[str, np.ndarray] = {}
    for number, graph in _fields(model):
        if number != 7 or not isinstance(graph, memoryview):
            continue
        for gnum, tensor in _fields(graph):
            if gnum != 5 or not isinstance(tensor, memoryview):
                continue
            dims: list[int] = []
            code, name, raw = 0, "", None
            for tnum, value in _fields(tensor):
                if tnum == 1 and isinstance(value, int):
                    dims.append(value)
                elif tnum == 2 and isinstance(value, int):
                    code = value
                elif tnum == 8 and isinstance(value, memoryview):
                    name = bytes(value).decode("utf-8")
                elif tnum == 9 and isinstance(value, memoryview):
                    raw = value
            if code not in _DTYPES or raw is None:
                raise ValueError(f"initializer {name!r}: not a raw tensor of a known type")
            out[name] = np.frombuffer(raw, dtype=_DTYPES[code]).reshape(dims).copy()
    return out
