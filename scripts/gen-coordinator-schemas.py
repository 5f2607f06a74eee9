#!/usr/bin/env python3
"""Transcribes Kafka's coordinator record schemas (the `common/message/*.json` files of the
kafka-group-coordinator, kafka-transaction-coordinator and kafka-clients jars) into
log/src/coordinator/schemas.rs: static tables in the form of klog's one schema engine (log/src/schema/).

    scripts/gen-coordinator-schemas.py SCHEMA_DIR > log/src/coordinator/schemas.rs

(one table entry a line: `mod schemas` is `#[rustfmt::skip]`).

SCHEMA_DIR holds the JSON files, e.g. unzipped from the pinned release's jars:
    unzip -o ~/.m2/repository/org/apache/kafka/kafka-group-coordinator/V/*.jar 'common/message/*' -d DIR
    (the same for kafka-transaction-coordinator, and kafka-clients for ConsumerProtocol*.json)
"""
import glob
import json
import os
import re
import sys

KINDS = {
    "coordinator-key": "SchemaKind::CoordinatorKey",
    "coordinator-value": "SchemaKind::CoordinatorValue",
    "data": "SchemaKind::Data",
}
WANTED_DATA = {"ConsumerProtocolSubscription", "ConsumerProtocolAssignment"}
PRIMITIVES = {
    "int8": "Int8", "int16": "Int16", "uint16": "Uint16", "int32": "Int32", "int64": "Int64",
    "string": "String", "bytes": "Bytes", "uuid": "Uuid",
}


def load(path):
    text = re.sub(r"^\s*//.*$", "", open(path).read(), flags=re.M)
    return json.loads(text)


def versions(spec):
    if spec is None or spec == "none":
        return "Versions::NONE"
    if spec.endswith("+"):
        return f"Versions::from({int(spec[:-1])})"
    if "-" in spec:
        lo, hi = spec.split("-")
        return f"Versions::new({int(lo)}, {int(hi)})"
    return f"Versions::new({int(spec)}, {int(spec)})"


def snake(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


def camel(name):
    return name[0].lower() + name[1:]


class Gen:
    def __init__(self, out):
        self.out = out
        self.emitted = set()

    def struct_const(self, owner, struct_name):
        return f"{snake(owner)}_{snake(struct_name)}"

    def field_type(self, owner, ty, commons, inline_fields):
        if ty.startswith("[]"):
            inner = self.field_type(owner, ty[2:], commons, inline_fields)
            return f"Type::Array(&{inner})"
        if ty in PRIMITIVES:
            return f"Type::{PRIMITIVES[ty]}"
        fields = inline_fields if inline_fields is not None else commons[ty]
        const = self.struct_const(owner, ty)
        self.fields_static(owner, const, fields, commons)
        return f"Type::Struct({const})"

    def default(self, f):
        d = f.get("default")
        if d is None:
            return "Default::Zero"
        if d == "null":
            return "Default::Null"
        if isinstance(d, str):
            d = d.strip()
            if d == "":
                return "Default::Zero"
            return f"Default::Int({int(d, 0)})"
        if isinstance(d, bool):
            return f"Default::Int({int(d)})"
        return f"Default::Int({int(d)})"

    def field(self, owner, f, commons):
        ty = self.field_type(owner, f["type"], commons, f.get("fields"))
        vers = f.get("versions", f.get("taggedVersions"))
        tag = f.get("tag")
        return (
            f"Field {{ name: {json.dumps(camel(f['name']))}, ty: {ty}, versions: {versions(vers)}, "
            f"nullable: {versions(f.get('nullableVersions'))}, "
            f"tag: {'None' if tag is None else f'Some({tag})'}, "
            f"tagged: {versions(f.get('taggedVersions'))}, default: {self.default(f)} }}"
        )

    def fields_static(self, owner, const, fields, commons):
        if const in self.emitted:
            return
        self.emitted.add(const)
        body = [self.field(owner, f, commons) for f in fields]
        self.out.append(f"static {const}: &[Field] = &[\n    " + ",\n    ".join(body) + ",\n];\n")

    def schema(self, j):
        commons = {s["name"]: s["fields"] for s in j.get("commonStructs", [])}
        const = snake(j["name"])
        fields_const = f"{const}_FIELDS"
        self.fields_static(j["name"], fields_const, j["fields"], commons)
        api_key = j.get("apiKey", -1)
        self.out.append(
            f"/// Kafka's `{j['name']}` ({j['type']}{'' if api_key < 0 else f', record type {api_key}'}).\n"
            f"pub static {const}: MessageSchema = MessageSchema {{ name: {json.dumps(j['name'])}, type_name: \"\", "
            f"kind: {KINDS[j['type']]}, api_key: {api_key}, "
            f"valid: {versions(j['validVersions'])}, flexible: {versions(j.get('flexibleVersions'))}, "
            f"fields: {fields_const} }};\n"
        )
        return const


def main():
    schema_dir = sys.argv[1]
    out = []
    gen = Gen(out)
    group_keys, group_values, txn = {}, {}, {}
    for path in sorted(glob.glob(os.path.join(schema_dir, "*.json"))):
        j = load(path)
        t = j["type"]
        if t == "data" and j["name"] not in WANTED_DATA:
            continue
        if t not in ("data", "coordinator-key", "coordinator-value"):
            continue
        const = gen.schema(j)
        if j["name"].startswith("TransactionLog"):
            txn[t] = const
        elif t == "coordinator-key":
            group_keys[j["apiKey"]] = const
        elif t == "coordinator-value":
            group_values[j["apiKey"]] = const
    head = [
        "//! Kafka's coordinator record schemas as tables: `__consumer_offsets` (the group coordinator's record",
        "//! types), `__transaction_state` (the transaction coordinator's) and the consumer protocol's",
        "//! subscription and assignment. Transcribed from the pinned Kafka release's `common/message/*.json`",
        "//! by `scripts/gen-coordinator-schemas.py`; regenerate, never edit by hand.",
        "",
        "use crate::schema::{Default, Field, MessageSchema, SchemaKind, Type, Versions};",
        "",
    ]
    types = sorted(group_keys)
    assert types == sorted(group_values), "every group record type has a key and a value"
    out.append("/// The group coordinator's record types (`__consumer_offsets`): (type, key schema, value schema).")
    out.append("pub static GROUP_RECORD_TYPES: &[(i16, &MessageSchema, &MessageSchema)] = &[")
    for k in types:
        out.append(f"    ({k}, &{group_keys[k]}, &{group_values[k]}),")
    out.append("];\n")
    out.append("/// The transaction coordinator's record types (`__transaction_state`): (type, key schema, value schema).")
    out.append("pub static TRANSACTION_RECORD_TYPES: &[(i16, &MessageSchema, &MessageSchema)] = &[")
    out.append(f"    (0, &{txn['coordinator-key']}, &{txn['coordinator-value']}),")
    out.append("];")
    print("\n".join(head + out))


main()
