package dev.klog.interop;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.record.internal.CompressionType;
import org.apache.kafka.common.record.internal.ControlRecordType;
import org.apache.kafka.common.record.internal.EndTransactionMarker;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.MemoryRecordsBuilder;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.utils.internals.BufferSupplier;

/**
 * Kafka's own {@code MemoryRecords.filterTo} on one batch per codec, for klog's filter to be compared with
 * (tests/kafka_filter.rs): the batch is built by Kafka's {@code MemoryRecordsBuilder}, the decisions are
 * given (which records stay, the batch's retention, whether it is a marker of an empty transaction), and
 * what Kafka writes for them (verbatim copy, rebuilt batch with or without a delete horizon, empty header)
 * is printed. The cleaner's own rules for reaching those decisions are klog's to get right; this tool
 * judges the bytes written for them.
 *
 * <pre>
 *   filter-to SCENARIO RECORDS VALUE_BYTES
 * </pre>
 *
 * SCENARIO: {@code drop-tombstones} (tombstones go, the rest is rebuilt), {@code drop-tombstones-lat}
 * (the same over a LogAppendTime batch), {@code keep-all} (nothing goes; the tombstones make filterTo set
 * the delete horizon), {@code retain-empty} (nothing stays; RETAIN_EMPTY), {@code marker} (a COMMIT marker
 * of an empty transaction, kept: the horizon is set; uncompressed only). Record i has key {@code k<i>}, a value of
 * VALUE_BYTES seeded letters (null, a tombstone, when i % 7 == 0), timestamp 1000 + 3i and, for even i, one
 * header. Prints one JSON line per codec: codec, scenario, source and filtered bytes as hex.
 */
final class FilterTo {
    static final long NOW = 1_700_000_000_000L;
    static final long DELETE_RETENTION_MS = 86_400_000L;
    private static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};

    private FilterTo() {}

    static void run(String scenario, int records, int valueBytes) {
        for (String codec : scenario.equals("marker") ? new String[] {"none"} : CODECS) {
            MemoryRecords source = scenario.equals("marker")
                    ? marker()
                    : batch(codec, records, valueBytes, scenario.endsWith("-lat"));
            ByteBuffer out = ByteBuffer.allocate(source.sizeInBytes() * 2 + 1024);
            source.filterTo(filter(scenario), out, BufferSupplier.NO_CACHING, Integer.MAX_VALUE);
            out.flip();
            System.out.println("{\"codec\":\"" + codec + "\",\"scenario\":\"" + scenario + "\",\"source\":\""
                    + hex(source.buffer()) + "\",\"filtered\":\"" + hex(out) + "\"}");
        }
    }

    /**
     * {@code filter-to-bytes DROP HEX}: Kafka's filterTo over the batch whose bytes are HEX (built by the
     * test, for what Kafka's builder cannot make: header keys that are not UTF-8, a batch that already has
     * a delete horizon), dropping the records whose offsets are in DROP (comma-separated, or {@code -}),
     * DELETE_EMPTY. Prints one JSON line: the filtered bytes as hex.
     */
    static void runBytes(String drop, String hex) {
        java.util.Set<Long> dropped = new java.util.HashSet<>();
        if (!drop.equals("-")) {
            for (String o : drop.split(",")) {
                dropped.add(Long.parseLong(o));
            }
        }
        byte[] bytes = new byte[hex.length() / 2];
        for (int i = 0; i < bytes.length; i++) {
            bytes[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        }
        MemoryRecords source = MemoryRecords.readableRecords(ByteBuffer.wrap(bytes));
        ByteBuffer out = ByteBuffer.allocate(bytes.length * 2 + 1024);
        source.filterTo(new MemoryRecords.RecordFilter(NOW, DELETE_RETENTION_MS) {
            @Override
            protected BatchRetentionResult checkBatchRetention(RecordBatch batch) {
                return new BatchRetentionResult(BatchRetention.DELETE_EMPTY, false);
            }

            @Override
            protected boolean shouldRetainRecord(RecordBatch batch,
                                                 org.apache.kafka.common.record.internal.Record record) {
                return !dropped.contains(record.offset());
            }
        }, out, BufferSupplier.NO_CACHING, Integer.MAX_VALUE);
        out.flip();
        System.out.println("{\"filtered\":\"" + hex(out) + "\"}");
    }

    private static MemoryRecords batch(String codec, int records, int valueBytes, boolean logAppendTime) {
        ByteBuffer buf = ByteBuffer.allocate(records * (valueBytes + 64) + 1024);
        Compression compression = Compression.of(CompressionType.forName(codec)).build();
        TimestampType type = logAppendTime ? TimestampType.LOG_APPEND_TIME : TimestampType.CREATE_TIME;
        long appendTime = logAppendTime ? 99_999L : RecordBatch.NO_TIMESTAMP;
        MemoryRecordsBuilder b = MemoryRecords.builder(buf, RecordBatch.CURRENT_MAGIC_VALUE, compression, type,
                100L, appendTime, 42L, (short) 1, 10, false, false, 7);
        long seed = 12345;
        for (int i = 0; i < records; i++) {
            byte[] key = ("k" + i).getBytes(StandardCharsets.UTF_8);
            byte[] value = null;
            if (i % 7 != 0) {
                StringBuilder s = new StringBuilder("value-" + i + "-");
                for (int j = 0; j < valueBytes; j++) {
                    seed = seed * 6364136223846793005L + 1442695040888963407L;
                    s.append((char) ('a' + (int) ((seed >>> 33) % 12)));
                }
                value = s.toString().getBytes(StandardCharsets.UTF_8);
            }
            Header[] headers = i % 2 == 0
                    ? new Header[] {new RecordHeader("h" + i, ("hv" + i).getBytes(StandardCharsets.UTF_8))}
                    : new Header[0];
            b.appendWithOffset(100L + i, 1000L + i * 3L, key, value, headers);
        }
        return b.build();
    }

    private static MemoryRecords marker() {
        return MemoryRecords.withEndTransactionMarker(300L, 4_000L, 7, 42L, (short) 1,
                new EndTransactionMarker(ControlRecordType.COMMIT, 6));
    }

    private static MemoryRecords.RecordFilter filter(String scenario) {
        return new MemoryRecords.RecordFilter(NOW, DELETE_RETENTION_MS) {
            @Override
            protected BatchRetentionResult checkBatchRetention(RecordBatch batch) {
                BatchRetention retention = scenario.equals("retain-empty")
                        ? BatchRetention.RETAIN_EMPTY : BatchRetention.DELETE_EMPTY;
                return new BatchRetentionResult(retention, scenario.equals("marker"));
            }

            @Override
            protected boolean shouldRetainRecord(RecordBatch batch,
                                                 org.apache.kafka.common.record.internal.Record record) {
                return switch (scenario) {
                    case "drop-tombstones", "drop-tombstones-lat" -> record.hasValue();
                    case "retain-empty" -> false;
                    default -> true;
                };
            }
        };
    }

    private static String hex(ByteBuffer buffer) {
        ByteBuffer b = buffer.duplicate();
        StringBuilder s = new StringBuilder(b.remaining() * 2);
        while (b.hasRemaining()) {
            s.append(String.format("%02x", b.get()));
        }
        return s.toString();
    }
}
