# Writes <root>/big-0/00000000000000000000.log: one v2 batch of `records` records with `value` bytes each,
# repeated to `total` bytes with the base offset moved on (it is outside the CRC).
import struct, sys, os
root, total, records, value = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
T = [0]*256
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    T[i] = c
def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c = T[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF
def varint(n):
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        if z < 0x80:
            out.append(z); return bytes(out)
        out.append((z & 0x7F) | 0x80); z >>= 7
ts = 1_700_000_000_000
recs = bytearray()
for i in range(records):
    body = bytes([0]) + varint(0) + varint(i) + varint(3) + b"key" + varint(value) + b"v"*value + varint(0)
    recs += varint(len(body)) + body
after_crc = struct.pack(">hiqqqhii", 0, records-1, ts, ts, -1, -1, -1, records) + recs
crc = crc32c(after_crc)
batch_len = 4 + 1 + 4 + len(after_crc)
head = struct.pack(">qiibI", 0, batch_len, 0, 2, crc)
batch = bytearray(head + after_crc)
d = os.path.join(root, "big-0"); os.makedirs(d, exist_ok=True)
n = total // len(batch)
with open(os.path.join(d, "00000000000000000000.log"), "wb") as f:
    for i in range(n):
        batch[0:8] = struct.pack(">q", i*records)
        f.write(batch)
print(len(batch), n, n*records)
