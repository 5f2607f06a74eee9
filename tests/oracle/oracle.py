#!/usr/bin/env python3
"""kafka-python oracle for Kafka's on-disk batch formats (v2 record batches, legacy v0/v1 message sets).

Run with the venv python made by scripts/setup-python.sh (kafka-python 3.0.12 and its codecs):

    oracle.py decode [--allow-trailing] FILE...
    oracle.py build OUTDIR
    oracle.py check-json [--ignore KEY]... [--allow-extra-keys] EXPECTED_JSONL ACTUAL_JSONL
    oracle.py encode-check [--ignore KEY]... [--allow-extra-keys] FILE JSONL

`decode` prints one JSON object per batch (per log entry for legacy magic 0/1), one per line, with the
keys in DECODE_KEYS. Everything about a batch's header and records comes from kafka-python's own
classes (MemoryRecords, DefaultRecordBatch, LegacyRecordBatch), including decompression and CRC
validation; the only bytes read here directly are a legacy wrapper's CRC and timestamp, which
kafka-python keeps in private attributes. See README.md beside this file.
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import struct
import sys

try:
    import kafka
    import kafka.codec
    import kafka.record.default_records as kp_default
    import kafka.record.legacy_records as kp_legacy
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords
    from kafka.record.util import calc_crc32, calc_crc32c
except ImportError as e:  # pragma: no cover
    sys.exit("oracle.py: cannot import kafka-python (%s); run it with the python that "
             "scripts/setup-python.sh prints" % e)

KAFKA_PYTHON_VERSION = "3.0.12"

DECODE_KEYS = (
    "position", "base_offset", "last_offset", "batch_size", "magic", "partition_leader_epoch", "crc",
    "crc_valid", "compression", "timestamp_type", "is_transactional", "is_control", "control_type",
    "producer_id", "producer_epoch", "base_sequence", "last_sequence", "record_count",
    "base_timestamp", "max_timestamp", "records",
)
RECORD_KEYS = ("offset", "timestamp", "key", "value", "headers")

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
CODEC_NAMES = {v: k for k, v in CODECS.items()}
CONTROL_TYPES = {0: "abort", 1: "commit", 2: "leader_change", 3: "snapshot_header",
                 4: "snapshot_footer", 5: "kraft_version", 6: "kraft_voters", 7: "mirror_pid_reset"}
INT32_MAX = 2147483647


class OracleError(Exception):
    pass


def hx(b):
    return None if b is None else bytes(b).hex()


def control_type_name(type_id):
    return CONTROL_TYPES.get(type_id, "unknown_%d" % type_id)


def codec_name(codec_id):
    return CODEC_NAMES.get(codec_id, "unknown_%d" % codec_id)


def increment_sequence(base, delta):
    """Kafka's DefaultRecordBatch.incrementSequence: wraps past INT32_MAX to 0."""
    if base > INT32_MAX - delta:
        return delta - (INT32_MAX - base) - 1
    return base + delta


# ----------------------------------------------------------------------------------------------
# decode


def _record_obj(rec):
    return {
        "offset": rec.offset,
        "timestamp": rec.timestamp,
        "key": hx(rec.key),
        "value": hx(rec.value),
        "headers": [{"key": k, "value": hx(v)} for k, v in rec.headers],
    }


def _v2_obj(batch, position):
    crc_valid = batch.validate_crc()  # must run before iteration (kafka-python asserts it)
    records = list(batch)  # decompresses and parses; raises CorruptRecordError on bad structure
    if len(records) != batch.records_count:  # pragma: no cover - kafka-python enforces this
        raise OracleError("record count %d != header %d" % (len(records), batch.records_count))
    control_type = None
    if batch.is_control_batch and records:
        control_type = control_type_name(records[0].type)  # ControlRecord parsed the key
    # batch.last_sequence is kafka-python's port of Kafka's incrementSequence.
    return {
        "position": position,
        "base_offset": batch.base_offset,
        "last_offset": batch.last_offset,
        "batch_size": batch.size_in_bytes,
        "magic": batch.magic,
        "partition_leader_epoch": batch.leader_epoch,
        "crc": batch.crc,
        "crc_valid": crc_valid,
        "compression": codec_name(batch.compression_type),
        "timestamp_type": "log_append_time" if batch.timestamp_type == 1 else "create_time",
        "is_transactional": batch.is_transactional,
        "is_control": batch.is_control_batch,
        "control_type": control_type,
        "producer_id": batch.producer_id,
        "producer_epoch": batch.producer_epoch,
        "base_sequence": batch.base_sequence,
        "last_sequence": batch.last_sequence,
        "record_count": batch.records_count,
        "base_timestamp": batch.first_timestamp,
        "max_timestamp": batch.max_timestamp,
        "records": [_record_obj(r) for r in records],
    }


def _legacy_obj(batch, raw, position, warnings):
    magic = batch.magic
    crc_valid = batch.validate_crc()  # wrapper CRC-32 over magic..end; before iteration
    # kafka-python keeps the wrapper's CRC and timestamp private (_crc, _timestamp): read the bytes.
    (crc,) = struct.unpack_from(">I", raw, 12)
    wrapper_ts = struct.unpack_from(">q", raw, 18)[0] if magic == 1 else None
    records = list(batch)
    if not records:  # pragma: no cover
        raise OracleError("legacy entry without records")
    if batch.compression_type:
        for r in records:
            if not r.validate_crc():
                warnings.append("position %d: inner record at offset %d has a bad CRC-32 (stored %d)"
                                % (position, r.offset, r.checksum))
    return {
        "position": position,
        "base_offset": records[0].offset,
        "last_offset": records[-1].offset,
        "batch_size": batch.size_in_bytes,
        "magic": magic,
        "partition_leader_epoch": None,
        "crc": crc,
        "crc_valid": crc_valid,
        "compression": codec_name(batch.compression_type),
        "timestamp_type": {None: None, 0: "create_time", 1: "log_append_time"}[batch.timestamp_type],
        "is_transactional": False,
        "is_control": False,
        "control_type": None,
        "producer_id": None,
        "producer_epoch": None,
        "base_sequence": None,
        "last_sequence": None,
        "record_count": len(records),
        "base_timestamp": None,
        "max_timestamp": wrapper_ts,
        "records": [_record_obj(r) for r in records],
    }


def decode_bytes(data, warnings=None):
    """Decode concatenated batches. Returns (objects, trailing_bytes). A batch kafka-python fails on
    becomes {"position": P, "error": "..."} and decoding goes on with the next length-framed batch."""
    if warnings is None:
        warnings = []
    data = bytes(data)
    # MemoryRecords does the framing (offset int64, length int32, magic at byte 16) and picks
    # DefaultRecordBatch or LegacyRecordBatch. The position is tracked alongside it.
    mr = MemoryRecords(data)
    out = []
    position = 0
    while mr.has_next():
        size = struct.unpack_from(">i", data, position + 8)[0] + 12
        raw = data[position:position + size]
        try:
            batch = mr.next_batch()
            if batch.magic >= 2:
                obj = _v2_obj(batch, position)
            else:
                obj = _legacy_obj(batch, raw, position, warnings)
        except Exception as e:  # kafka-python raises CorruptRecordError, struct.error, AssertionError...
            msg = str(e)
            if not msg.startswith(type(e).__name__) and "]" not in msg[:12]:
                msg = "%s: %s" % (type(e).__name__, msg)
            out.append({"position": position, "error": msg})
            if size < MemoryRecords.MIN_SLICE:
                # framing itself is broken (next_batch did not advance): stop, rest is trailing
                return out, len(data) - position
            position += size
            mr = MemoryRecords(data[position:])  # go on with the next length-framed batch
            continue
        out.append(obj)
        position += size
    return out, len(data) - position


def decode_file(path, warnings=None):
    with open(path, "rb") as f:
        return decode_bytes(f.read(), warnings)


def dumps(obj):
    return json.dumps(obj, separators=(", ", ": "), ensure_ascii=False)


def cmd_decode(args):
    rc = 0
    for path in args.files:
        warnings = []
        objs, trailing = decode_file(path, warnings)
        for obj in objs:
            print(dumps(obj))
            if "error" in obj:
                print("oracle decode: %s: position %d: %s" % (path, obj["position"], obj["error"]),
                      file=sys.stderr)
                rc = 1
        for w in warnings:
            print("oracle decode: %s: warning: %s" % (path, w), file=sys.stderr)
        if trailing:
            print("oracle decode: %s: %d trailing bytes after the last whole batch (at position %d)"
                  % (path, trailing, os.path.getsize(path) - trailing), file=sys.stderr)
            if not args.allow_trailing:
                rc = 1
    return rc


# ----------------------------------------------------------------------------------------------
# comparison (check-json, encode-check)


def load_jsonl(path):
    text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
    if text.lstrip().startswith("["):
        return json.loads(text)
    objs = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            objs.append(json.loads(line))
        except ValueError as e:
            raise OracleError("%s:%d: not JSON: %s" % (path, n, e))
    return objs


def _same(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def _short(v, limit=200):
    s = json.dumps(v, ensure_ascii=False)
    return s if len(s) <= limit else s[:limit] + "...(%d chars)" % len(s)


def diff_values(exp, act, path, generic, ignore, allow_extra, out):
    """Append (path, expected, actual) for every difference. generic is path without list indices,
    used for --ignore."""
    if generic in ignore:
        return
    if isinstance(exp, dict) and isinstance(act, dict):
        for k in exp:
            sub, gsub = (path + "." + k if path else k), (generic + "." + k if generic else k)
            if gsub in ignore:
                continue
            if k not in act:
                out.append((sub, exp[k], "<missing>"))
            else:
                diff_values(exp[k], act[k], sub, gsub, ignore, allow_extra, out)
        if not allow_extra:
            for k in act:
                gsub = generic + "." + k if generic else k
                if k not in exp and gsub not in ignore:
                    out.append(((path + "." + k if path else k), "<missing>", act[k]))
    elif isinstance(exp, list) and isinstance(act, list):
        if len(exp) != len(act):
            out.append((path + ".length", len(exp), len(act)))
        for i, (e, a) in enumerate(zip(exp, act)):
            diff_values(e, a, "%s[%d]" % (path, i), generic, ignore, allow_extra, out)
    elif not _same(exp, act):
        out.append((path, exp, act))


def compare_streams(expected, actual, ignore=(), allow_extra=False):
    """Returns a list of (batch_index, key_path, expected, actual)."""
    ignore = set(ignore)
    diffs = []
    if len(expected) != len(actual):
        diffs.append((None, "batch_count", len(expected), len(actual)))
    for i, (e, a) in enumerate(zip(expected, actual)):
        out = []
        diff_values(e, a, "", "", ignore, allow_extra, out)
        diffs.extend((i, p, x, y) for p, x, y in out)
    return diffs


def report(diffs, expected, actual):
    for i, path, e, a in diffs:
        where = "batch -" if i is None else "batch %d" % i
        if i is not None and i < len(expected) and isinstance(expected[i], dict) \
                and "position" in expected[i]:
            where += " (position %s)" % expected[i]["position"]
        print("%s: %s: expected %s, actual %s" % (where, path, _short(e), _short(a)))
    if diffs:
        print("DIFFERENT: %d difference(s)" % len(diffs))
        return 1
    nrec = sum(len(o.get("records", [])) for o in expected if isinstance(o, dict))
    print("OK: %d batch(es), %d record(s) agree" % (len(expected), nrec))
    return 0


def cmd_check_json(args):
    expected, actual = load_jsonl(args.expected), load_jsonl(args.actual)
    return report(compare_streams(expected, actual, args.ignore, args.allow_extra_keys), expected, actual)


def cmd_encode_check(args):
    warnings = []
    expected, trailing = decode_file(args.file, warnings)
    for w in warnings:
        print("warning: %s" % w)
    rc = 0
    for o in expected:
        if "error" in o:
            print("kafka-python cannot decode the batch at position %d: %s" % (o["position"], o["error"]))
            rc = 1
    if trailing:
        print("kafka-python: %d trailing bytes after the last whole batch" % trailing)
        rc = 1
    actual = load_jsonl(args.jsonl)
    return report(compare_streams(expected, actual, args.ignore, args.allow_extra_keys),
                  expected, actual) or rc


# ----------------------------------------------------------------------------------------------
# build


def _gzip_mtime0(payload, compresslevel=None):
    """kafka-python's gzip_encode, but with the gzip header MTIME pinned to 0 so builds are
    byte-reproducible (kafka-python writes the current time there)."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=compresslevel or 9, mtime=0) as f:
        f.write(payload)
    return buf.getvalue()


# both record modules import gzip_encode by name
kp_default.gzip_encode = _gzip_mtime0
kp_legacy.gzip_encode = _gzip_mtime0

HEADER_SETS = [
    [],
    [("trace", b"t-0001")],
    [("a", b"1"), ("null-header", None)],
    [("ünïcødé-键", b"\x00\xff\x10"), ("empty", b""), ("a", b"dup-key")],
]


def make_records(n, tag, ts0, headers=True, legacy=False):
    """Deterministic inputs: keys, null keys, null values, empty values, headers (incl. a null
    header value), timestamps going up and down around ts0, repetitive (compressible) values."""
    recs = []
    for i in range(n):
        key = None if i % 7 == 3 else (b"key-%s-%d" % (tag.encode(), i % 13))
        if i % 11 == 5:
            value = None
        elif i % 17 == 9:
            value = b""
        else:
            value = (b"%s value #%d | " % (tag.encode(), i % 5)) * (3 + i % 6)
        ts = ts0 + i * 37 - (i % 3) * 1000
        if i == n - 2:
            ts = ts0 + 86400000  # a big positive delta
        hdrs = [] if (legacy or not headers) else [list(h) for h in HEADER_SETS[i % len(HEADER_SETS)]]
        recs.append({"offset_delta": i, "timestamp": ts, "key": key, "value": value, "headers": hdrs})
    return recs


def make_large_records(n, tag, ts0):
    """~4 KiB values, so the compressed stream spans several lz4 (64 KiB) and xerial snappy
    (32 KiB) blocks."""
    recs = []
    for i in range(n):
        body = b"".join(b"%s:%04d:%06d;" % (tag.encode(), i, j) for j in range(4096 // 20))
        recs.append({"offset_delta": i, "timestamp": ts0 + i, "key": b"big-%d" % i, "value": body,
                     "headers": [["i", b"%d" % i]]})
    return recs


def _inputs_json(recs):
    return [{"offset_delta": r["offset_delta"], "timestamp": r["timestamp"], "key": hx(r["key"]),
             "value": hx(r["value"]),
             "headers": [{"key": k, "value": hx(v)} for k, v in r["headers"]]} for r in recs]


def build_v2(codec, recs, producer_id=-1, producer_epoch=-1, base_sequence=-1, transactional=False):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=CODECS[codec], batch_size=1 << 30,
                                  is_transactional=transactional, producer_id=producer_id,
                                  producer_epoch=producer_epoch, base_sequence=base_sequence)
    for r in recs:
        md = b.append(r["offset_delta"], timestamp=r["timestamp"], key=r["key"], value=r["value"],
                      headers=[tuple(h) for h in r["headers"]])
        if md is None:
            raise OracleError("builder refused a record")
    raw = bytearray(b.build())
    got = DefaultRecordBatch(bytes(raw)).compression_type
    if got != CODECS[codec]:
        raise OracleError("kafka-python silently wrote codec %s instead of %s (compression did not "
                          "shrink the records): make the values more compressible"
                          % (codec_name(got), codec))
    return raw


def _v2_recrc(raw):
    struct.pack_into(">I", raw, 17, calc_crc32c(memoryview(raw)[21:]))


def patch_v2(raw, base_offset=None, leader_epoch=None, log_append_time=None, control=False):
    """Broker-side rewrites kafka-python's builder cannot do. baseOffset and partitionLeaderEpoch lie
    outside the CRC; LogAppendTime (attribute bit 3 + maxTimestamp, as Kafka's setMaxTimestamp) and
    the control bit (5) are inside it, so the CRC-32C is recomputed with kafka-python's calc_crc32c."""
    patches = []
    if base_offset is not None:
        struct.pack_into(">q", raw, 0, base_offset)
        patches.append("base_offset=%d" % base_offset)
    if leader_epoch is not None:
        struct.pack_into(">i", raw, 12, leader_epoch)
        patches.append("partition_leader_epoch=%d" % leader_epoch)
    recrc = False
    if log_append_time is not None:
        attrs = struct.unpack_from(">h", raw, 21)[0] | 0x08
        struct.pack_into(">h", raw, 21, attrs)
        struct.pack_into(">q", raw, 35, log_append_time)
        patches.append("attributes|=0x08 (LogAppendTime), max_timestamp=%d, crc recomputed" % log_append_time)
        recrc = True
    if control:
        attrs = struct.unpack_from(">h", raw, 21)[0] | 0x20
        struct.pack_into(">h", raw, 21, attrs)
        patches.append("attributes|=0x20 (control), crc recomputed")
        recrc = True
    if recrc:
        _v2_recrc(raw)
    return patches


def build_legacy(magic, codec, recs, base_offset):
    """A magic 0/1 message set. Uncompressed: one log entry per record, absolute offsets.
    Compressed: kafka-python writes one wrapper whose offset is 0 and (magic 1) timestamp is 0, with
    inner offsets as given (absolute for magic 0; relative 0..n-1 for magic 1, as Kafka producers
    do)."""
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=CODECS[codec], batch_size=1 << 30)
    compressed = codec != "none"
    for r in recs:
        off = r["offset_delta"] + (base_offset if (magic == 0 or not compressed) else 0)
        if b.append(off, timestamp=r["timestamp"], key=r["key"], value=r["value"]) is None:
            raise OracleError("builder refused a record")
    raw = bytearray(b.build())
    if compressed and (raw[17] & 0x07) != CODECS[codec]:
        raise OracleError("legacy builder did not compress with %s" % codec)
    return raw


def patch_legacy_wrapper(raw, magic, last_offset, timestamp=None, log_append_time=False):
    """Make kafka-python's compressed wrapper look like Kafka's: wrapper offset = last inner offset
    (outside the CRC) and, for magic 1, wrapper timestamp = max inner timestamp (CreateTime) or the
    append time (LogAppendTime, attribute bit 3); the CRC-32 over magic..end is recomputed."""
    patches = []
    struct.pack_into(">q", raw, 0, last_offset)
    patches.append("wrapper offset=%d (kafka-python writes 0)" % last_offset)
    if magic == 1:
        if log_append_time:
            raw[17] |= 0x08
            patches.append("wrapper attributes|=0x08 (LogAppendTime)")
        struct.pack_into(">q", raw, 18, timestamp)
        patches.append("wrapper timestamp=%d (kafka-python writes 0), crc recomputed" % timestamp)
        struct.pack_into(">I", raw, 12, calc_crc32(memoryview(raw)[16:]))
    return patches


def _expected_records_v2(recs, base_offset, lat):
    return [{"offset": base_offset + r["offset_delta"], "timestamp": lat if lat is not None else r["timestamp"],
             "key": hx(r["key"]), "value": hx(r["value"]),
             "headers": [{"key": k, "value": hx(v)} for k, v in r["headers"]]} for r in recs]


def _expected_records_legacy(recs, magic, base_offset, lat=None):
    return [{"offset": base_offset + r["offset_delta"],
             "timestamp": None if magic == 0 else (lat if lat is not None else r["timestamp"]),
             "key": hx(r["key"]), "value": hx(r["value"]), "headers": []} for r in recs]


def build_all(outdir):
    os.makedirs(outdir, exist_ok=True)
    files = []

    def emit(name, raw, magic, compression, description, inputs, patches, expect_records):
        """Write the file, decode it with kafka-python and check the decode agrees with the inputs."""
        raw = bytes(raw)
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(raw)
        objs, trailing = decode_bytes(raw)
        errors = [o for o in objs if "error" in o]
        if errors or trailing:
            raise OracleError("%s: kafka-python cannot decode what it built: %s (trailing %d)"
                              % (name, errors, trailing))
        for o in objs:
            if not o["crc_valid"]:
                raise OracleError("%s: bad CRC at position %d" % (name, o["position"]))
            if o["compression"] != compression and compression != "mixed":
                raise OracleError("%s: codec %s, wanted %s" % (name, o["compression"], compression))
        got_records = [r for o in objs for r in o["records"]]
        if expect_records is not None and got_records != expect_records:
            for a, b in zip(got_records, expect_records):
                if a != b:
                    raise OracleError("%s: decoded record %s != input %s" % (name, a, b))
            raise OracleError("%s: %d records decoded, %d input" % (name, len(got_records), len(expect_records)))
        entry = {
            "file": name, "magic": magic, "compression": compression, "description": description,
            "size": len(raw), "sha256": hashlib.sha256(raw).hexdigest(), "batch_count": len(objs),
            "inputs": inputs, "patches": patches,
            "expected": objs[0], "expected_lines": objs,
        }
        files.append(entry)
        return objs

    ts0 = 1700000000000
    # ---- v2, one batch per codec and producer kind
    counts = {"none": 20, "gzip": 57, "snappy": 101, "lz4": 150, "zstd": 200}
    for codec in CODECS:
        n = counts[codec]
        kinds = [
            ("plain", dict(), "plain producer (producer id -1, epoch -1, base sequence -1)"),
            ("idempotent", dict(producer_id=1000 + CODECS[codec], producer_epoch=2, base_sequence=42),
             "idempotent producer"),
            ("txn", dict(producer_id=2000 + CODECS[codec], producer_epoch=7, base_sequence=100, transactional=True),
             "transactional producer"),
        ]
        for kind, prod, what in kinds:
            recs = make_records(n, "%s-%s" % (kind, codec), ts0 + 1000 * CODECS[codec])
            raw = build_v2(codec, recs, **prod)
            patches = []
            base = 0
            if kind == "txn":
                base = 5000
                patches = patch_v2(raw, base_offset=base, leader_epoch=3)
            inputs = {"builder": "DefaultRecordBatchBuilder", "producer_id": prod.get("producer_id", -1),
                      "producer_epoch": prod.get("producer_epoch", -1),
                      "base_sequence": prod.get("base_sequence", -1),
                      "is_transactional": prod.get("transactional", False), "records": _inputs_json(recs)}
            emit("v2-%s-%s.bin" % (codec, kind), raw, 2, codec, "%s, %s, %d records" % (what, codec, n),
                 inputs, patches, _expected_records_v2(recs, base, None))
        # multi-block compressed streams
        if codec != "none":
            recs = make_large_records(40, "large-" + codec, ts0)
            raw = build_v2(codec, recs, producer_id=77, producer_epoch=0, base_sequence=0)
            emit("v2-%s-large.bin" % codec, raw, 2, codec,
                 "40 records of ~4 KiB: %s stream spans several blocks" % codec,
                 {"builder": "DefaultRecordBatchBuilder", "producer_id": 77, "producer_epoch": 0,
                  "base_sequence": 0, "is_transactional": False, "records": _inputs_json(recs)},
                 [], _expected_records_v2(recs, 0, None))

    # ---- sequence wrap: base sequence 2147483642, 20 records -> last sequence 13
    for codec in ("none", "zstd"):
        recs = make_records(20, "seqwrap-" + codec, ts0)
        prod = dict(producer_id=31337, producer_epoch=1, base_sequence=INT32_MAX - 5)
        raw = build_v2(codec, recs, **prod)
        emit("v2-%s-seqwrap.bin" % codec, raw, 2, codec,
             "idempotent, base sequence 2147483642 + 19 records: last_sequence wraps to 13",
             {"builder": "DefaultRecordBatchBuilder", "producer_epoch": 1, "producer_id": 31337,
              "base_sequence": INT32_MAX - 5, "is_transactional": False, "records": _inputs_json(recs)},
             [], _expected_records_v2(recs, 0, None))

    # ---- LogAppendTime (set by a broker; patched in)
    lat = ts0 + 999999
    for codec in ("none", "gzip", "lz4"):
        recs = make_records(25, "lat-" + codec, ts0)
        raw = build_v2(codec, recs)
        patches = patch_v2(raw, base_offset=700, log_append_time=lat)
        emit("v2-%s-logappendtime.bin" % codec, raw, 2, codec,
             "LogAppendTime batch: every record's timestamp reads as max_timestamp %d" % lat,
             {"builder": "DefaultRecordBatchBuilder", "producer_id": -1, "producer_epoch": -1,
              "base_sequence": -1, "is_transactional": False, "records": _inputs_json(recs)},
             patches, _expected_records_v2(recs, 700, lat))

    # ---- offset gaps (as after compaction)
    recs = make_records(30, "gaps", ts0)
    for i, r in enumerate(recs):
        r["offset_delta"] = i * 3 + (i % 2)
    raw = build_v2("gzip", recs)
    emit("v2-gzip-offset-gaps.bin", raw, 2, "gzip", "offset deltas with gaps (0,4,6,10,...), as after compaction",
         {"builder": "DefaultRecordBatchBuilder", "producer_id": -1, "producer_epoch": -1,
          "base_sequence": -1, "is_transactional": False, "records": _inputs_json(recs)},
         [], _expected_records_v2(recs, 0, None))

    # ---- control batches: kafka-python only reads them; built as a 1-record transactional batch
    # with Kafka's marker key/value, then the control bit patched in.
    controls = [("commit", 1, 4242, 3, True, 5020), ("abort", 0, 4242, 3, True, 5021),
                ("unknown9", 9, -1, -1, False, 5022)]
    for name, ctype, pid, epoch, txn, base in controls:
        key = struct.pack(">hh", 0, ctype)
        value = struct.pack(">hi", 0, 11) if ctype in (0, 1) else b"\x00\x00"
        recs = [{"offset_delta": 0, "timestamp": ts0 + 5, "key": key, "value": value, "headers": []}]
        raw = build_v2("none", recs, producer_id=pid, producer_epoch=epoch, base_sequence=-1, transactional=txn)
        patches = patch_v2(raw, base_offset=base, leader_epoch=3, control=True)
        emit("v2-control-%s.bin" % name, raw, 2, "none",
             "control batch, control record type %d (%s)" % (ctype, control_type_name(ctype)),
             {"builder": "DefaultRecordBatchBuilder", "producer_id": pid, "producer_epoch": epoch,
              "base_sequence": -1, "is_transactional": txn, "records": _inputs_json(recs)},
             patches, _expected_records_v2(recs, base, None))

    # ---- legacy message sets
    legacy_codecs = ("none", "gzip", "snappy", "lz4")  # zstd needs magic 2
    for magic in (0, 1):
        for codec in legacy_codecs:
            n = 6 if codec == "none" else 40
            base = 100 if magic == 0 else 300
            recs = make_records(n, "m%d-%s" % (magic, codec), ts0, legacy=True)
            raw = build_legacy(magic, codec, recs, base)
            patches = []
            if codec != "none":
                max_ts = max(r["timestamp"] for r in recs)
                patches = patch_legacy_wrapper(raw, magic, base + n - 1, max_ts)
                desc = "magic %d, one %s wrapper message holding %d messages" % (magic, codec, n)
                if magic == 0 and codec == "lz4":
                    desc += " (Kafka 0.8/0.9 LZ4 framing: header checksum computed over the magic too)"
            else:
                desc = "magic %d, uncompressed message set: %d log entries (%d decode lines)" % (magic, n, n)
            emit("legacy-m%d-%s.bin" % (magic, codec), raw, magic, codec, desc,
                 {"builder": "LegacyRecordBatchBuilder", "base_offset": base,
                  "inner_offsets": "absolute" if (magic == 0 or codec == "none") else "relative",
                  "records": _inputs_json(recs)},
                 patches, _expected_records_legacy(recs, magic, base))
    # magic 1 LogAppendTime wrapper
    recs = make_records(12, "m1-lat", ts0, legacy=True)
    raw = build_legacy(1, "gzip", recs, 0)
    patches = patch_legacy_wrapper(raw, 1, 400 + 11, lat, log_append_time=True)
    emit("legacy-m1-gzip-logappendtime.bin", raw, 1, "gzip",
         "magic 1 gzip wrapper with LogAppendTime: inner timestamps read as the wrapper's %d" % lat,
         {"builder": "LegacyRecordBatchBuilder", "base_offset": 400, "inner_offsets": "relative",
          "records": _inputs_json(recs)}, patches, _expected_records_legacy(recs, 1, 400, lat))

    # ---- multi-batch files
    parts, patches, exp_recs, next_off = [], [], [], 0
    for codec, prod, n in [("none", {}, 10), ("lz4", dict(producer_id=9, producer_epoch=0, base_sequence=0), 30),
                           ("snappy", dict(producer_id=9, producer_epoch=0, base_sequence=30), 25),
                           ("zstd", dict(producer_id=10, producer_epoch=1, base_sequence=0, transactional=True), 40)]:
        recs = make_records(n, "seg-" + codec, ts0 + next_off)
        raw = build_v2(codec, recs, **prod)
        patches += ["batch at offset %d: %s" % (next_off, p) for p in patch_v2(raw, base_offset=next_off, leader_epoch=1)]
        exp_recs += _expected_records_v2(recs, next_off, None)
        parts.append(bytes(raw))
        next_off += n
    ctl = [{"offset_delta": 0, "timestamp": ts0 + 99, "key": struct.pack(">hh", 0, 1),
            "value": struct.pack(">hi", 0, 0), "headers": []}]
    raw = build_v2("none", ctl, producer_id=10, producer_epoch=1, base_sequence=-1, transactional=True)
    patches += ["batch at offset %d: %s" % (next_off, p)
                for p in patch_v2(raw, base_offset=next_off, leader_epoch=1, control=True)]
    exp_recs += _expected_records_v2(ctl, next_off, None)
    parts.append(bytes(raw))
    emit("v2-segment-mixed.log", b"".join(parts), 2, "mixed",
         "5 contiguous v2 batches (none, lz4, snappy, zstd txn, COMMIT marker), offsets 0-105",
         {"builder": "DefaultRecordBatchBuilder", "note": "records of every batch, in order",
          "records": None}, patches, exp_recs)

    parts, patches, exp_recs = [], [], []
    r0 = make_records(5, "mix-m0", ts0, legacy=True)
    raw = build_legacy(0, "gzip", r0, 0)
    patches += patch_legacy_wrapper(raw, 0, 4)
    parts.append(bytes(raw)); exp_recs += _expected_records_legacy(r0, 0, 0)
    r1 = make_records(3, "mix-m1", ts0, legacy=True)
    parts.append(bytes(build_legacy(1, "none", r1, 5))); exp_recs += _expected_records_legacy(r1, 1, 5)
    r2 = make_records(5, "mix-m1s", ts0, legacy=True)
    raw = build_legacy(1, "snappy", r2, 0)
    patches += patch_legacy_wrapper(raw, 1, 12, max(r["timestamp"] for r in r2))
    parts.append(bytes(raw)); exp_recs += _expected_records_legacy(r2, 1, 8)
    r3 = make_records(20, "mix-v2", ts0)
    raw = build_v2("lz4", r3)
    patches += patch_v2(raw, base_offset=13)
    parts.append(bytes(raw)); exp_recs += _expected_records_v2(r3, 13, None)
    emit("mixed-magic-segment.log", b"".join(parts), None, "mixed",
         "a log after a message-format upgrade: magic 0 gzip wrapper (0-4), 3 magic 1 entries (5-7), "
         "magic 1 snappy wrapper (8-12), v2 lz4 batch (13-32)",
         {"note": "see expected_lines"}, patches, exp_recs)

    manifest = {
        "generator": "tests/oracle/oracle.py build",
        "kafka_python": kafka.__version__,
        "notes": [
            "expected is the first (for most files the only) object `oracle.py decode FILE` prints; "
            "expected_lines is all of them (uncompressed legacy sets and *.log files have several).",
            "inputs.records are what was handed to kafka-python's builder (bytes as hex, null = None).",
            "patches lists the broker-side rewrites applied after kafka-python built the bytes "
            "(kafka-python cannot write base offsets, leader epochs, LogAppendTime or control batches).",
            "gzip output has MTIME 0 (kafka-python would write the current time); compressed bytes "
            "depend on the codec library versions in tests/oracle/requirements.txt.",
        ],
        "files": files,
    }
    with open(os.path.join(outdir, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False)
        f.write("\n")
    return manifest


def cmd_build(args):
    m = build_all(args.outdir)
    for e in m["files"]:
        print("%-40s %7d bytes  %d batch(es)  %s" % (e["file"], e["size"], e["batch_count"], e["description"]))
    print("wrote %d files and manifest.json to %s" % (len(m["files"]), args.outdir))
    return 0


# ----------------------------------------------------------------------------------------------


def main(argv=None):
    if kafka.__version__ != KAFKA_PYTHON_VERSION:
        print("oracle.py: warning: kafka-python %s, expected %s" % (kafka.__version__, KAFKA_PYTHON_VERSION),
              file=sys.stderr)
    p = argparse.ArgumentParser(prog="oracle.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("decode", help="decode files of concatenated batches, one JSON line per batch")
    d.add_argument("files", nargs="+", metavar="FILE")
    d.add_argument("--allow-trailing", action="store_true",
                   help="exit 0 even if a file ends with a partial batch")
    d.set_defaults(fn=cmd_decode)
    b = sub.add_parser("build", help="build test batches with kafka-python into OUTDIR (+ manifest.json)")
    b.add_argument("outdir", metavar="OUTDIR")
    b.set_defaults(fn=cmd_build)
    for name, fn, a1, a2, h in [
        ("check-json", cmd_check_json, "expected", "actual", "compare two decode-style JSON-lines streams"),
        ("encode-check", cmd_encode_check, "file", "jsonl",
         "decode FILE with kafka-python and compare with JSONL (e.g. `klog dump --json --deep FILE`)"),
    ]:
        c = sub.add_parser(name, help=h)
        c.add_argument(a1, metavar=a1.upper() if a1 != "expected" else "EXPECTED_JSONL")
        c.add_argument(a2, metavar="JSONL" if a2 == "jsonl" else "ACTUAL_JSONL", help="'-' reads stdin")
        c.add_argument("--ignore", action="append", default=[], metavar="KEY",
                       help="skip a key; dotted for nested ones, without indices (crc, records.timestamp, "
                            "records.headers.value); repeatable")
        c.add_argument("--allow-extra-keys", action="store_true",
                       help="do not report keys that only the actual side has")
        c.set_defaults(fn=fn)
    args = p.parse_args(argv)
    try:
        return args.fn(args)
    except (OracleError, OSError) as e:
        print("oracle.py: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
