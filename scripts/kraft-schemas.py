#!/usr/bin/env python3
"""Writes log/src/kraft/schemas.rs: the KRaft metadata record schemas as a Rust table.

The schemas are Kafka's message definitions (`common/metadata/*.json` in the kafka-metadata jar, and the
KRaft control records `SnapshotHeaderRecord`, `SnapshotFooterRecord`, `KRaftVersionRecord`, `VotersRecord`
in the kafka-clients jar). They are read from the jars of the pinned Kafka release that
`interop/kafka-tools.sh` resolves, so the table follows the release klog is checked against:

    scripts/kraft-schemas.py > log/src/kraft/schemas.rs && cargo fmt --all

The table is in the form of klog's one schema engine (`log/src/schema/`); each schema carries its
`flexibleVersions` (every metadata record is flexible in all its versions).
"""

import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile

CONTROL_RECORDS = [
    "SnapshotHeaderRecord",
    "SnapshotFooterRecord",
    "KRaftVersionRecord",
    "VotersRecord",
]
PRIMITIVES = {
    "bool": "Bool",
    "int8": "Int8",
    "int16": "Int16",
    "uint16": "Uint16",
    "int32": "Int32",
    "uint32": "Uint32",
    "int64": "Int64",
    "float64": "Float64",
    "string": "String",
    "uuid": "Uuid",
    "bytes": "Bytes",
}


def jars():
    version = subprocess.run(
        ["interop/kafka-tools.sh", "version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    classpath = subprocess.run(
        ["interop/kafka-tools.sh", "classpath"], capture_output=True, text=True, check=True
    ).stdout.strip()
    wanted = {}
    for jar in classpath.split(":"):
        name = os.path.basename(jar)
        for artifact in ("kafka-metadata", "kafka-clients"):
            if name == f"{artifact}-{version}.jar":
                wanted[artifact] = jar
    if len(wanted) != 2:
        sys.exit(f"kafka-metadata and kafka-clients {version} not on the classpath: {wanted}")
    return version, wanted


def load(path):
    text = open(path).read()
    text = re.sub(r"^\s*//.*$", "", text, flags=re.M)
    return json.loads(text)


def versions(spec):
    """'0+', '1-3', '2', 'none' or None -> (lo, hi) with hi = i16::MAX for '+' and (1, 0) for none."""
    if spec is None or spec == "none":
        return (1, 0)
    if spec.endswith("+"):
        return (int(spec[:-1]), 32767)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


def rs_range(spec):
    lo, hi = versions(spec)
    return f"{lo}, {'MAX' if hi == 32767 else hi}"


def snake_upper(name):
    """Kafka's `MessageGenerator.toSnakeCase`, upper-cased: `MetadataRecordType`'s names."""
    out, prev_capital = [], True
    for c in name:
        if c.isupper():
            if not prev_capital:
                out.append("_")
            out.append(c)
            prev_capital = True
        else:
            out.append(c.upper())
            prev_capital = False
    return "".join(out)


def camel(name):
    return name[0].lower() + name[1:]


def rs_type(field, common):
    ty = field["type"]
    array = ty.startswith("[]")
    base = ty[2:] if array else ty
    if base in PRIMITIVES:
        inner = f"Type::{PRIMITIVES[base]}"
    else:
        fields = field.get("fields") or common.get(base)
        if fields is None:
            sys.exit(f"unknown type {ty} of field {field['name']}")
        inner = f"Type::Struct(&[{rs_fields(fields, common)}])"
    return f"Type::Array(&{inner})" if array else inner


def rs_default(field):
    d = field.get("default")
    ty = field["type"]
    if d is None:
        return "Default::Zero"
    if d == "null":
        return "Default::Null"
    if ty in ("bool",):
        return f"Default::Bool({d})"
    if ty in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        return f"Default::Int({int(d, 0)})"
    if ty == "float64":
        return f"Default::Float({float(d)!r})"
    if ty == "string":
        return f"Default::Str({json.dumps(d)})"
    sys.exit(f"unsupported default {d!r} for {field['name']}")


def rs_fields(fields, common):
    out = []
    for f in fields:
        field = f"Field::new({json.dumps(camel(f['name']))}, {rs_type(f, common)}, {rs_range(f['versions'])})"
        if f.get("nullableVersions"):
            field += f".nullable({rs_range(f['nullableVersions'])})"
        if "tag" in f:
            field += f".tagged({f['tag']}, {rs_range(f['taggedVersions'])})"
        default = rs_default(f)
        if default != "Default::Zero":
            field += f".default({default})"
        out.append(field)
    return ", ".join(out)


def rs_message(schema, kind):
    common = {c["name"]: c["fields"] for c in schema.get("commonStructs", [])}
    api_key = schema.get("apiKey")
    return (
        "MessageSchema { "
        f"name: {json.dumps(schema['name'])}, "
        f"type_name: {json.dumps(snake_upper(schema['name']))}, "
        f"kind: {kind}, "
        f"api_key: {api_key if api_key is not None else -1}, "
        f"valid: Versions::new({rs_range(schema['validVersions'])}), "
        f"flexible: Versions::new({rs_range(schema.get('flexibleVersions'))}), "
        f"fields: &[{rs_fields(schema['fields'], common)}] "
        "}"
    )


def main():
    version, paths = jars()
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(paths["kafka-metadata"]) as z:
            z.extractall(tmp, [n for n in z.namelist() if n.startswith("common/metadata/")])
        with zipfile.ZipFile(paths["kafka-clients"]) as z:
            z.extractall(tmp, [f"common/message/{n}.json" for n in CONTROL_RECORDS])
        metadata = sorted(
            (load(p) for p in glob.glob(f"{tmp}/common/metadata/*.json")),
            key=lambda s: s["apiKey"],
        )
        control = [load(f"{tmp}/common/message/{n}.json") for n in CONTROL_RECORDS]
    print(f"//! The KRaft record schemas of Apache Kafka {version}: generated by `scripts/kraft-schemas.py` from")
    print("//! the release's own schema files (kafka-metadata: `common/metadata/*.json`; kafka-clients: the KRaft")
    print("//! control records). Do not edit.")
    print()
    print("use crate::schema::{Default, Field, MessageSchema, SchemaKind, Type, Versions, MAX};")
    print()
    print(f"/// The Kafka release these schemas come from.")
    print(f'pub const KAFKA_VERSION: &str = "{version}";')
    print()
    print("/// Every metadata record type, by api key.")
    print("pub static METADATA_RECORDS: &[MessageSchema] = &[")
    for s in metadata:
        print(f"    {rs_message(s, 'SchemaKind::Metadata')},")
    print("];")
    print()
    print("/// The KRaft control records' values (`SnapshotHeader`, `SnapshotFooter`, `KRaftVersion`, `Voters`).")
    print("pub static CONTROL_RECORDS: &[MessageSchema] = &[")
    for s in control:
        print(f"    {rs_message(s, 'SchemaKind::Control')},")
    print("];")


if __name__ == "__main__":
    main()
