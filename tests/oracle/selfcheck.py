#!/usr/bin/env python3
"""Self-check of the kafka-python oracle (oracle.py) against the shared fixtures.

    PY="$(scripts/setup-python.sh)"; "$PY" tests/oracle/selfcheck.py [--fixtures DIR]

1. Every batches/*.bin decodes to exactly one object that agrees, field by field and record by
   record, with batches/manifest.json (whose key names differ; mapped below), and its sha256 matches.
2. Every kafka-segments/**/*.log decodes without errors or trailing bytes, every CRC is valid,
   offsets are contiguous, and the batch/record counts and quirks in kafka-segments/README.md hold.
3. `build` into a temp dir: every file decodes to its manifest's expected_lines, builds are
   byte-reproducible, and the CLI (decode, check-json, encode-check) gives the right exit codes and
   catches planted differences (a changed field, a flipped byte, a truncated file).
Nothing is written outside a temp dir. The fixtures default to <repo>/../shared/fixtures
(override with --fixtures or KLOG_FIXTURES).
"""
import argparse
import glob
import hashlib
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # keep tests/oracle free of __pycache__
import oracle  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
ORACLE = os.path.join(HERE, "oracle.py")

passed = 0
failed = []


def check(cond, what):
    global passed
    if cond:
        passed += 1
    else:
        failed.append(what)
        print("FAIL: %s" % what)
    return cond


def eq(actual, expected, what):
    return check(actual == expected and type(actual) is type(expected),
                 "%s: expected %r, got %r" % (what, expected, actual))


# ---------------------------------------------------------------------------------------------
# 1. batches/manifest.json

def fixture_batches(fx):
    bdir = os.path.join(fx, "batches")
    manifest = json.load(open(os.path.join(bdir, "manifest.json")))
    listed = {f["file"] for f in manifest["files"]}
    on_disk = {os.path.basename(p) for p in glob.glob(os.path.join(bdir, "*.bin"))}
    eq(sorted(on_disk), sorted(listed), "batches/*.bin vs manifest files")
    tstype = {"CreateTime": "create_time", "LogAppendTime": "log_append_time"}
    for m in manifest["files"]:
        name = m["file"]
        raw = open(os.path.join(bdir, name), "rb").read()
        eq(hashlib.sha256(raw).hexdigest(), m["sha256"], name + " sha256")
        objs, trailing = oracle.decode_bytes(raw)
        if not (eq(len(objs), 1, name + " batch count") and eq(trailing, 0, name + " trailing")):
            continue
        o = objs[0]
        if not check("error" not in o, "%s: decode error %s" % (name, o.get("error"))):
            continue
        eq(tuple(o), oracle.DECODE_KEYS, name + " keys")
        # manifest key -> decode key / derived value
        mapped = {
            "position": 0,
            "base_offset": m["base_offset"],
            "last_offset": m["base_offset"] + m["last_offset_delta"],
            "batch_size": m["batch_length"] + 12,
            "magic": m["magic"],
            "partition_leader_epoch": m["partition_leader_epoch"],
            "crc": m["crc"],
            "crc_valid": True,
            "compression": m["codec"],
            "timestamp_type": tstype[m["timestamp_type"]],
            "is_transactional": m["is_transactional"],
            "is_control": m["is_control"],
            "control_type": m["control_type"],
            "producer_id": m["producer_id"],
            "producer_epoch": m["producer_epoch"],
            "base_sequence": m["base_sequence"],
            "last_sequence": (-1 if m["base_sequence"] == -1
                              else oracle.increment_sequence(m["base_sequence"], m["last_offset_delta"])),
            "record_count": m["record_count"],
            "base_timestamp": m["first_timestamp"],
            "max_timestamp": m["max_timestamp"],
        }
        eq(m["size"], mapped["batch_size"], name + " size vs batch_length")
        eq(int(m["crc_hex"], 16), m["crc"], name + " crc_hex")
        eq(int(m["attributes_hex"], 16), m["attributes"], name + " attributes_hex")
        attrs = m["attributes"]
        eq(oracle.CODEC_NAMES[attrs & 7], m["codec"], name + " attributes codec")
        eq(bool(attrs & 0x10), m["is_transactional"], name + " attributes txn bit")
        eq(bool(attrs & 0x20), m["is_control"], name + " attributes control bit")
        for k, v in mapped.items():
            eq(o[k], v, "%s %s" % (name, k))
        recs = [{"offset": r["offset"], "timestamp": r["timestamp"], "key": r["key"], "value": r["value"],
                 "headers": [{"key": hk, "value": hv} for hk, hv in r["headers"]]} for r in m["records"]]
        eq(len(o["records"]), len(recs), name + " record count")
        for i, (got, want) in enumerate(zip(o["records"], recs)):
            eq(got, want, "%s record %d" % (name, i))
        if "control" in m:
            c = m["control"]
            key = bytes.fromhex(o["records"][0]["key"])
            value = bytes.fromhex(o["records"][0]["value"])
            eq(int.from_bytes(key[0:2], "big", signed=True), c["key_version"], name + " control key version")
            eq(int.from_bytes(key[2:4], "big", signed=True), c["type"], name + " control type id")
            eq(oracle.control_type_name(c["type"]), o["control_type"], name + " control type name")
            eq(int.from_bytes(value[0:2], "big", signed=True), c["value_version"], name + " marker version")
            eq(int.from_bytes(value[2:6], "big", signed=True), c["coordinator_epoch"], name + " coordinator epoch")
        if m.get("snappy_framing"):
            payload = raw[61:]
            eq("xerial" if payload.startswith(b"\x82SNAPPY\x00") else "raw", m["snappy_framing"],
               name + " snappy framing")


# ---------------------------------------------------------------------------------------------
# 2. kafka-segments

SEGMENTS = {  # from kafka-segments/README.md: batches, records
    "nomanazeem/__cluster_metadata-0": (1842, 2067),
    "nomanazeem/__consumer_offsets-15": (88, 256),
    "panic08/test-0": (28, 97),
    "bheem/cities-0": (11, 11),
}


def fixture_segments(fx):
    sdir = os.path.join(fx, "kafka-segments")
    logs = sorted(glob.glob(os.path.join(sdir, "**", "*.log"), recursive=True))
    check(len(logs) >= len(SEGMENTS), "found %d .log files under %s" % (len(logs), sdir))
    for path in logs:
        rel = os.path.relpath(path, sdir)
        objs, trailing = oracle.decode_file(path)
        errs = [o for o in objs if "error" in o]
        check(not errs, "%s decodes without errors: %s" % (rel, errs[:3]))
        eq(trailing, 0, rel + " trailing bytes")
        if errs:
            continue
        check(all(o["crc_valid"] for o in objs), rel + " all CRCs valid")
        pos, nxt, ok = 0, objs[0]["base_offset"], True
        for o in objs:
            ok &= o["position"] == pos and o["base_offset"] == nxt
            ok &= [r["offset"] for r in o["records"]] == list(range(o["base_offset"], o["last_offset"] + 1))
            pos += o["batch_size"]
            nxt = o["last_offset"] + 1
        check(ok, rel + " positions and offsets contiguous")
        eq(pos, os.path.getsize(path), rel + " batches cover the file")
        part = os.path.dirname(rel)
        if part in SEGMENTS:
            nb, nr = SEGMENTS[part]
            eq(len(objs), nb, rel + " batch count")
            eq(sum(o["record_count"] for o in objs), nr, rel + " record count")
        if part.endswith("__cluster_metadata-0"):
            o = objs[0]
            eq((o["is_control"], o["is_transactional"], o["control_type"]), (True, False, "leader_change"),
               rel + " batch 0 is a LeaderChange control batch")
            check(all((o["producer_id"], o["producer_epoch"], o["base_sequence"], o["partition_leader_epoch"])
                      == (-1, -1, -1, 1) for o in objs), rel + " pid/epoch/seq -1, PLE 1")
        if part.endswith("__consumer_offsets-15"):
            check(all(o["producer_id"] == -1 and o["base_sequence"] == 0 for o in objs),
                  rel + " pid -1 with base sequence 0 (group coordinator quirk)")
            check(all(o["last_sequence"] == o["last_offset"] - o["base_offset"] for o in objs),
                  rel + " last_sequence = 0 + last offset delta")
        if part.endswith("panic08/test-0"):
            check(all(o["producer_id"] == 0 and o["base_sequence"] == o["base_offset"] for o in objs),
                  rel + " idempotent: base sequence == base offset")


# ---------------------------------------------------------------------------------------------
# 3. build + CLI


def run(*args, stdin=None):
    p = subprocess.run([sys.executable, ORACLE] + list(args), input=stdin, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def built(tmp):
    out1, out2 = os.path.join(tmp, "b1"), os.path.join(tmp, "b2")
    rc, so, se = run("build", out1)
    if not eq(rc, 0, "build exit code (%s)" % se.strip()[-500:]):
        return
    oracle.build_all(out2)
    manifest = json.load(open(os.path.join(out1, "manifest.json")))
    files = manifest["files"]
    check(len(files) >= 30, "build wrote %d files" % len(files))
    names = {f["file"] for f in files}
    for codec in oracle.CODECS:
        for kind in ("plain", "idempotent", "txn"):
            check("v2-%s-%s.bin" % (codec, kind) in names, "built v2-%s-%s.bin" % (codec, kind))
    for f in files:
        name = f["file"]
        raw = open(os.path.join(out1, name), "rb").read()
        eq(raw, open(os.path.join(out2, name), "rb").read(), name + " byte-reproducible")
        eq(hashlib.sha256(raw).hexdigest(), f["sha256"], name + " sha256")
        objs, trailing = oracle.decode_bytes(raw)
        eq(trailing, 0, name + " trailing")
        eq(oracle.compare_streams(f["expected_lines"], objs), [], name + " decode == manifest expected_lines")
        eq(f["expected"], f["expected_lines"][0], name + " expected == expected_lines[0]")
        eq(len(objs), f["batch_count"], name + " batch_count")
        check(all(o.get("crc_valid") for o in objs), name + " CRCs valid")
        if f["compression"] not in ("mixed",):
            check(all(o["compression"] == f["compression"] for o in objs), name + " really " + f["compression"])
        if f["magic"] is not None:
            check(all(o["magic"] == f["magic"] for o in objs), name + " magic")
    by = {f["file"]: f["expected"] for f in files}
    eq(by["v2-none-seqwrap.bin"]["last_sequence"], 13, "seqwrap last_sequence")
    lat = by["v2-gzip-logappendtime.bin"]
    check(lat["timestamp_type"] == "log_append_time"
          and all(r["timestamp"] == lat["max_timestamp"] for r in lat["records"]), "LogAppendTime timestamps")
    eq(by["v2-control-commit.bin"]["control_type"], "commit", "built commit marker")
    eq(by["v2-control-unknown9.bin"]["control_type"], "unknown_9", "unknown control type name")
    check(any(r["key"] is None for r in by["v2-zstd-txn.bin"]["records"]), "some null keys")
    check(any(r["value"] is None for r in by["v2-zstd-txn.bin"]["records"]), "some null values")
    check(any(h["value"] is None for r in by["v2-zstd-txn.bin"]["records"] for h in r["headers"]),
          "a null header value")
    check(raw_payload_startswith(out1, "v2-snappy-plain.bin", 61, b"\x82SNAPPY\x00"), "snappy is xerial-framed")

    # CLI: decode, check-json, encode-check
    target = os.path.join(out1, "v2-lz4-txn.bin")
    rc, dec, _ = run("decode", target)
    eq(rc, 0, "decode exit code")
    eq([json.loads(l) for l in dec.splitlines()], by["v2-lz4-txn.bin"] and [by["v2-lz4-txn.bin"]],
       "decode CLI output == manifest expected")
    exp_path = os.path.join(tmp, "exp.jsonl")
    open(exp_path, "w").write(dec)
    eq(run("check-json", exp_path, exp_path)[0], 0, "check-json identical -> 0")
    eq(run("encode-check", target, exp_path)[0], 0, "encode-check agreeing -> 0")
    eq(run("encode-check", target, "-", stdin=dec)[0], 0, "encode-check from stdin -> 0")
    bad = json.loads(dec)
    bad["records"][3]["value"] = "00"
    bad["producer_epoch"] = 8
    bad["records"][1]["headers"].append({"key": "x", "value": None})
    bad["extra"] = 1
    bad_path = os.path.join(tmp, "bad.jsonl")
    open(bad_path, "w").write(json.dumps(bad) + "\n")
    rc, out, _ = run("check-json", exp_path, bad_path)
    eq(rc, 1, "check-json different -> 1")
    for needle in ("records[3].value", "producer_epoch", "records[1].headers.length", "extra"):
        check(needle in out, "check-json reports %s" % needle)
    rc, out, _ = run("encode-check", target, bad_path, "--ignore", "records.value", "--ignore", "producer_epoch",
                     "--ignore", "records.headers", "--allow-extra-keys")
    eq(rc, 0, "encode-check with --ignore/--allow-extra-keys -> 0 (%s)" % out.strip())
    eq(run("check-json", exp_path, os.path.join(tmp, "missing.jsonl"))[0], 2, "check-json missing file -> 2")
    # booleans are not numbers
    b2 = json.loads(dec)
    b2["crc_valid"] = 1
    check(oracle.compare_streams([json.loads(dec)], [b2]) != [], "true != 1")
    two = os.path.join(tmp, "two.jsonl")
    open(two, "w").write(dec + dec)
    eq(run("check-json", exp_path, two)[0], 1, "batch count difference -> 1")

    # planted corruption
    raw = bytearray(open(target, "rb").read())
    raw[100] ^= 0x01  # inside the lz4 stream: the CRC-32C must catch it
    objs, _ = oracle.decode_bytes(raw)
    check(objs[0].get("crc_valid") is False or "error" in objs[0], "flipped v2 byte -> bad CRC or error")
    raw = bytearray(open(target, "rb").read())
    raw[12] ^= 0x01  # partitionLeaderEpoch is outside the CRC
    eq(oracle.decode_bytes(raw)[0][0]["crc_valid"], True, "PLE is outside the CRC")
    raw = bytearray(open(os.path.join(out1, "legacy-m1-gzip.bin"), "rb").read())
    raw[20] ^= 0x01  # wrapper timestamp: covered by the CRC-32
    eq(oracle.decode_bytes(raw)[0][0]["crc_valid"], False, "flipped legacy byte -> bad CRC")
    cut = os.path.join(tmp, "cut.log")
    seg = open(os.path.join(out1, "v2-segment-mixed.log"), "rb").read()
    open(cut, "wb").write(seg[:-10])
    rc, out, err = run("decode", cut)
    eq((rc, len(out.splitlines())), (1, 4), "truncated segment: 4 batches, exit 1")
    check("trailing" in err, "truncated segment reports trailing bytes")
    eq(run("decode", "--allow-trailing", cut)[0], 0, "--allow-trailing -> 0")
    rc, out, err = run("decode", os.path.join(out1, "legacy-m0-none.bin"), os.path.join(out1, "legacy-m1-lz4.bin"))
    eq((rc, len(out.splitlines())), (0, 7), "decode of two files: 6 + 1 lines")


def raw_payload_startswith(d, name, off, prefix):
    return open(os.path.join(d, name), "rb").read()[off:].startswith(prefix)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", default=os.environ.get("KLOG_FIXTURES",
                                                          os.path.join(ROOT, "..", "shared", "fixtures")))
    args = ap.parse_args()
    fx = os.path.abspath(args.fixtures)
    if not os.path.isdir(os.path.join(fx, "batches")):
        print("selfcheck: no fixtures at %s (use --fixtures or KLOG_FIXTURES)" % fx)
        return 2
    fixture_batches(fx)
    fixture_segments(fx)
    with tempfile.TemporaryDirectory(prefix="klog-oracle-") as tmp:
        built(tmp)
    print("selfcheck: %d passed, %d failed" % (passed, len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
