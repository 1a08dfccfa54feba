#!/usr/bin/env python3
"""Writes the shared test vectors of ABI v1.

An independent encoder of the layouts in abi/ABI.md (Python's struct, not the
Go codec), so the Go codec is checked against a second implementation.
Run from this directory:

    python3 gen.py > records.json            # record layout (section 5)
    python3 gen.py triggers > triggers.json  # time (section 8)
    python3 gen.py batches > batches.json    # batches (section 10, version 2)
"""
import json, struct, sys

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

def records():
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
    return doc


# Section 8: the Trigger layout of on_timer and on_commit calls.
NO_TIME = -2**63
MAX_TIMER_KEY = 4096

def trig(ts, stream, wall, kind, key):
    return struct.pack('<qqqII', ts, stream, wall, kind, len(key)) + key

T = [
    ("event-timer", 1732960060000, 1732960075000, 1732960080123, 0, b"user-17\x00w"),
    ("processing-timer-empty-key", 1732960300000, NO_TIME, 1732960300007, 1, b""),
    ("commit-mark", 1732960000999, 1732960001000, 1732960002000, 2, b"word"),
    ("extremes", 2**63-1, -1, 0, 1, bytes(range(256))),
    ("largest-key", 0, 0, 0, 0, bytes([0xab]) * MAX_TIMER_KEY),
]

TM = {
    "short-header": bytes(31),
    "key-longer-than-buffer": struct.pack('<qqqII', 0, 0, 0, 0, 4) + b"abc",
    "trailing-bytes": trig(0, 0, 0, 0, b"k") + b"x",
    "unknown-kind": trig(0, 0, 0, 3, b"k"),
    "key-over-limit": trig(0, 0, 0, 0, bytes(MAX_TIMER_KEY + 1)),
}

# Argument checks of timer_set and timer_cancel, in the order ABI.md gives:
# kind, then time, then key length. errno 0 = accepted.
EINVAL, ETOOLARGE = 2, 6
CHECKS = [
    (0, 0, 0, 0), (1, 2**63-1, MAX_TIMER_KEY, 0),
    (2, 0, 0, EINVAL), (7, 0, 0, EINVAL), (2**32-1, 0, 0, EINVAL),
    (0, -1, 0, EINVAL), (1, NO_TIME, 0, EINVAL),
    (0, 0, MAX_TIMER_KEY + 1, ETOOLARGE), (9, -1, MAX_TIMER_KEY + 1, EINVAL),
]

# Firing order of due timers: time, then kind, then key bytes (unsigned).
ORDER = [
    (1, 5, b"b"), (0, 5, b"b"), (0, 5, b"a"), (1, 4, b"z"), (0, 5, b""),
    (0, 5, b"\xff"), (0, 5, b"a\x00"), (1, 5, b"a"), (0, 6, b""),
]

def triggers():
    doc = {"vectors": [], "malformed": [], "checks": [], "order": {}}
    for name, ts, stream, wall, kind, key in T:
        doc["vectors"].append({
            "name": name, "timestamp": ts, "stream_time": stream, "wall_time": wall,
            "kind": kind, "key": key.hex(), "encoded": trig(ts, stream, wall, kind, key).hex(),
        })
    for name, b in TM.items():
        doc["malformed"].append({"name": name, "encoded": b.hex()})
    for kind, ts, keylen, errno in CHECKS:
        doc["checks"].append({"kind": kind, "ts": ts, "key_len": keylen, "errno": errno})
    fmt = lambda t: {"kind": t[0], "ts": t[1], "key": t[2].hex()}
    doc["order"] = {"given": [fmt(t) for t in ORDER],
                    "fired": [fmt(t) for t in sorted(ORDER, key=lambda t: (t[1], t[0], t[2]))]}
    return doc


# Section 10 (version 2): a batch in the input buffer, and a call's staged
# emits (emit entries).
SLOT_RECORD, SLOT_TRIGGER = 0, 1

def slot(kind, payload):
    out = struct.pack('<IIIIII', kind, 0, 0, 0, 0, len(payload)) + payload
    return out + bytes((-len(out)) % 8)

def batch(slots):
    return struct.pack('<IIII', len(slots), 0, 0, 0) + b"".join(slot(k, p) for k, p in slots)

REC = {name: enc(ts, off, part, idx, key, val, hdrs) for name, ts, off, part, idx, key, val, hdrs in V}
TRIG = {name: trig(ts, stream, wall, kind, key) for name, ts, stream, wall, kind, key in T}

B = [
    ("one-record", [("record", "input-100-byte-value")]),
    ("records-of-every-size", [("record", n) for n, *_ in V]),
    ("records-and-triggers", [("record", "minimal-null-key-null-value"), ("trigger", "event-timer"),
                              ("record", "headers-null-and-empty"), ("trigger", "commit-mark"),
                              ("trigger", "processing-timer-empty-key")]),
]

# Emit entries: each record of the list, u32 length first, back to back.
E = [
    ("none", []),
    ("one", ["emit-any-partition"]),
    ("several", ["emit-any-partition", "minimal-null-key-null-value", "headers-null-and-empty"]),
]

EM = {
    "short-length": bytes(3),
    "length-beyond-data": struct.pack('<I', 40) + bytes(36),
    "second-entry-short": struct.pack('<I', 36) + REC["minimal-null-key-null-value"] + bytes(2),
}

def batches():
    doc = {"batches": [], "emits": [], "malformed_emits": []}
    for name, slots in B:
        ss = [(SLOT_RECORD if k == "record" else SLOT_TRIGGER, REC[n] if k == "record" else TRIG[n]) for k, n in slots]
        doc["batches"].append({"name": name,
            "slots": [{"kind": k, "name": n} for k, n in slots],
            "encoded": batch(ss).hex()})
    for name, recs in E:
        doc["emits"].append({"name": name, "records": recs,
            "encoded": b"".join(struct.pack('<I', len(REC[r])) + REC[r] for r in recs).hex()})
    for name, b in EM.items():
        doc["malformed_emits"].append({"name": name, "encoded": b.hex()})
    return doc

which = sys.argv[1] if len(sys.argv) > 1 else "records"
print(json.dumps({"records": records, "triggers": triggers, "batches": batches}[which](), indent=1))
