#!/usr/bin/env python3
"""Writes records.json: the shared record-layout test vectors of ABI v1.

An independent encoder of the layout in abi/ABI.md (Python's struct, not the
Go codec), so the Go codec is checked against a second implementation.
Run from this directory: python3 gen.py > records.json
"""
import json, struct

def enc(ts, off, part, idx, key, val, headers):
    def ln(b): return -1 if b is None else len(b)
    out = struct.pack('<qqiIiiI', ts, off, part, idx, ln(key), ln(val), len(headers))
    out += (key or b'') + (val or b'')
    for k, v in headers:
        out += struct.pack('<Ii', len(k), ln(v)) + k + (v or b'')
    return out

def hx(b): return None if b is None else b.hex()

V = [
    ("minimal-null-key-null-value", 0, 0, 0, 0, None, None, []),
    ("empty-key-empty-value", 1, 2, 3, 4, b"", b"", []),
    ("input-100-byte-value", 1732960000000, 42, 5, 0, b"user-17", bytes(range(100)), []),
    ("emit-any-partition", 1732960000123, -1, -1, 2, b"k", b"{\"ok\":true}", []),
    ("headers-null-and-empty", 7, 8, 1, 1, b"key", b"value",
        [(b"trace-id", b"abc123"), (b"null-value", None), (b"empty", b""), (b"", b"empty-name")]),
    ("negative-timestamp-max-offset", -1, 2**63-1, 2**31-1, 2**32-1, b"\x00\xff", b"\xff\x00", []),
    ("utf8-header-name", 99, 100, 0, 0, None, b"tombstone-key-null", [("wasmstream-versión".encode(), b"v1")]),
]

M = {
    "short-header": bytes(35),
    "key-longer-than-buffer": struct.pack('<qqiIiiI', 0, 0, 0, 0, 10, -1, 0) + b"abc",
    "negative-value-length": struct.pack('<qqiIiiI', 0, 0, 0, 0, -1, -2, 0),
    "trailing-bytes": enc(0, 0, 0, 0, None, None, []) + b"x",
    "header-count-beyond-data": struct.pack('<qqiIiiI', 0, 0, 0, 0, -1, -1, 3),
    "too-many-headers": struct.pack('<qqiIiiI', 0, 0, 0, 0, -1, -1, 1025) + bytes(8 * 1025),
    "negative-header-name-length": struct.pack('<qqiIiiI', 0, 0, 0, 0, -1, -1, 1) + struct.pack('<ii', -1, -1),
}

doc = {"vectors": [], "malformed": []}
for name, ts, off, part, idx, key, val, hdrs in V:
    doc["vectors"].append({
        "name": name, "timestamp": ts, "offset": off, "partition": part, "index": idx,
        "key": hx(key), "value": hx(val),
        "headers": [{"key": k.decode(), "value": hx(v)} for k, v in hdrs],
        "encoded": enc(ts, off, part, idx, key, val, hdrs).hex(),
    })
for name, b in M.items():
    doc["malformed"].append({"name": name, "encoded": b.hex()})
print(json.dumps(doc, indent=1))
