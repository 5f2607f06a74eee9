package dev.klog.bench;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.Stream;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.record.internal.ControlRecordType;
import org.apache.kafka.common.record.internal.EndTransactionMarker;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.MutableRecordBatch;
import org.apache.kafka.common.utils.internals.AppInfoParser;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.server.util.KafkaScheduler;
import org.apache.kafka.storage.internals.log.AppendOrigin;
import org.apache.kafka.storage.internals.log.Cleaner;
import org.apache.kafka.storage.internals.log.CleanerStats;
import org.apache.kafka.storage.internals.log.CompletedTxn;
import org.apache.kafka.storage.internals.log.LogConfig;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;
import org.apache.kafka.storage.internals.log.LogToClean;
import org.apache.kafka.storage.internals.log.LogOffsetMetadata;
import org.apache.kafka.storage.internals.log.ProducerAppendInfo;
import org.apache.kafka.storage.internals.log.ProducerStateManager;
import org.apache.kafka.storage.internals.log.ProducerStateManagerConfig;
import org.apache.kafka.storage.internals.log.SkimpyOffsetMap;
import org.apache.kafka.storage.internals.log.UnifiedLog;
import org.apache.kafka.storage.internals.utils.Throttler;
import org.apache.kafka.storage.log.metrics.BrokerTopicStats;

/**
 * Kafka's side of {@code klog bench}: the same work done by Apache Kafka's own storage code, timed in
 * this JVM after warm-up rounds, printed as one JSON object on stdout.
 *
 * <pre>
 *   append  BATCH_FILE COUNT ROUNDS WARMUP DIR SEGMENT_BYTES
 *           UnifiedLog.appendAsLeader of the batches in BATCH_FILE (cycled, COUNT appends) into a fresh
 *           log DIR/bench-0 (no flush), per round; MB/s of batch bytes.
 *   recover PARTITION_DIR ROUNDS WARMUP SEGMENT_BYTES
 *           UnifiedLog.create with lastShutdownClean=false and recovery point 0, which runs LogLoader:
 *           every segment rescanned, indexes rebuilt, producer state replayed; then close. Producer
 *           snapshots written by close are deleted before the next round, so each round redoes it all.
 *   durable BATCH_FILE COUNT ROUNDS WARMUP DIR SEGMENT_BYTES THREADS[,THREADS...]
 *           for each thread count T: T threads share a fresh log DIR/bench-0, each appending a batch of
 *           BATCH_FILE (appendAsLeader) then flushUptoOffsetExclusive(its last offset + 1), COUNT appends in
 *           all (rounded up to a multiple of T), per round; appends/s. `runs` holds the first count's
 *           rounds, `details.groups` every count's.
 *   recoverdir LOG_DIR THREADS ROUNDS WARMUP SEGMENT_BYTES
 *           every partition directory of LOG_DIR opened as recover does, on a pool of THREADS threads
 *           (LogManager.loadLogs' num.recovery.threads.per.data.dir pool: one UnifiedLog.create per
 *           partition, lastShutdownClean=false, recovery point 0); MB/s of all the .log bytes.
 *   psm     BATCHES PRODUCERS ROUNDS WARMUP DIR
 *           ProducerStateManager replay: per batch prepareUpdate(REPLICATION), appendDataBatch or
 *           appendEndTxnMarker, update, completeTxn, updateMapEndOffset. The batches come from the same
 *           generator as klog's (xorshift64*, every 10th producer transactional, COMMIT after 4 batches).
 *   clean   PARTITION_DIR WORK_DIR ROUNDS WARMUP SEGMENT_BYTES DEDUPE_BYTES NOW_MS
 *           per round a fresh copy of PARTITION_DIR in WORK_DIR (.log files hard-linked, the rest copied),
 *           opened with cleanup.policy=compact (clean shutdown, high watermark at the log end), then one
 *           Cleaner.doClean from the log start to the active segment at clean time NOW_MS, as LogCleaner's
 *           one cleaner thread runs it: a SkimpyOffsetMap of DEDUPE_BYTES (MD5), I/O buffers of
 *           log.cleaner.io.buffer.size / 2 growing to message.max.bytes, load factor 0.9, an unthrottled
 *           Throttler; MB/s of the segments' bytes (LogToClean.totalBytes).
 * </pre>
 */
public final class KafkaBench {
    private static final int MAX_TXN_TIMEOUT_MS = 15 * 60 * 1000;
    private static final int PRODUCER_ID_EXPIRATION_MS = 86_400_000;
    private static final int PRODUCER_ID_EXPIRATION_CHECK_MS = 600_000;

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            usage();
        }
        String out;
        switch (args[0]) {
            case "append" -> {
                need(args, 7);
                out = append(Path.of(args[1]), Long.parseLong(args[2]), Integer.parseInt(args[3]),
                        Integer.parseInt(args[4]), Path.of(args[5]), Integer.parseInt(args[6]));
            }
            case "recover" -> {
                need(args, 5);
                out = recover(Path.of(args[1]), Integer.parseInt(args[2]), Integer.parseInt(args[3]),
                        Integer.parseInt(args[4]));
            }
            case "durable" -> {
                need(args, 8);
                out = durable(Path.of(args[1]), Long.parseLong(args[2]), Integer.parseInt(args[3]),
                        Integer.parseInt(args[4]), Path.of(args[5]), Integer.parseInt(args[6]), args[7]);
            }
            case "recoverdir" -> {
                need(args, 6);
                out = recoverDir(Path.of(args[1]), Integer.parseInt(args[2]), Integer.parseInt(args[3]),
                        Integer.parseInt(args[4]), Integer.parseInt(args[5]));
            }
            case "clean" -> {
                need(args, 8);
                out = clean(Path.of(args[1]), Path.of(args[2]), Integer.parseInt(args[3]), Integer.parseInt(args[4]),
                        Integer.parseInt(args[5]), Integer.parseInt(args[6]), Long.parseLong(args[7]));
            }
            case "psm" -> {
                need(args, 6);
                out = psm(Integer.parseInt(args[1]), Integer.parseInt(args[2]), Integer.parseInt(args[3]),
                        Integer.parseInt(args[4]), Path.of(args[5]));
            }
            default -> {
                usage();
                return;
            }
        }
        System.out.println(out);
        System.out.flush();
        // The scheduler and metrics threads are not daemons in every release.
        System.exit(0);
    }

    private static void usage() {
        System.err.println("usage: KafkaBench append BATCH_FILE COUNT ROUNDS WARMUP DIR SEGMENT_BYTES\n"
                + "       KafkaBench recover PARTITION_DIR ROUNDS WARMUP SEGMENT_BYTES\n"
                + "       KafkaBench durable BATCH_FILE COUNT ROUNDS WARMUP DIR SEGMENT_BYTES THREADS[,THREADS...]\n"
                + "       KafkaBench recoverdir LOG_DIR THREADS ROUNDS WARMUP SEGMENT_BYTES\n"
                + "       KafkaBench psm BATCHES PRODUCERS ROUNDS WARMUP DIR\n"
                + "       KafkaBench clean PARTITION_DIR WORK_DIR ROUNDS WARMUP SEGMENT_BYTES DEDUPE_BYTES NOW_MS");
        System.exit(2);
    }

    private static void need(String[] args, int n) {
        if (args.length != n) {
            usage();
        }
    }

    // ----------------------------------------------------------------------------------------------
    // UnifiedLog

    private static UnifiedLog openLog(Path dir, int segmentBytes, boolean clean, KafkaScheduler scheduler,
                                      BrokerTopicStats stats) throws IOException {
        return openLog(dir, Map.of("segment.bytes", segmentBytes), clean, scheduler, stats);
    }

    private static UnifiedLog openLog(Path dir, Map<String, Object> props, boolean clean, KafkaScheduler scheduler,
                                      BrokerTopicStats stats) throws IOException {
        LogConfig config = new LogConfig(props);
        return UnifiedLog.create(dir.toFile(), config, 0L, 0L, scheduler, stats, Time.SYSTEM, MAX_TXN_TIMEOUT_MS,
                new ProducerStateManagerConfig(PRODUCER_ID_EXPIRATION_MS, false), PRODUCER_ID_EXPIRATION_CHECK_MS,
                new LogDirFailureChannel(10), clean, Optional.empty());
    }

    private static List<ByteBuffer> readBatches(Path file) throws IOException {
        ByteBuffer all = ByteBuffer.wrap(Files.readAllBytes(file));
        List<ByteBuffer> batches = new ArrayList<>();
        for (MutableRecordBatch b : MemoryRecords.readableRecords(all).batches()) {
            ByteBuffer one = ByteBuffer.allocate(b.sizeInBytes());
            b.writeTo(one);
            one.flip();
            batches.add(one);
        }
        if (batches.isEmpty()) {
            throw new IOException("no batches in " + file);
        }
        return batches;
    }

    private static String append(Path batchFile, long count, int rounds, int warmup, Path dir, int segmentBytes)
            throws Exception {
        List<ByteBuffer> batches = readBatches(batchFile);
        KafkaScheduler scheduler = new KafkaScheduler(1);
        scheduler.startup();
        BrokerTopicStats stats = new BrokerTopicStats(false);
        Path logDir = dir.resolve("bench-0");
        List<Double> runs = new ArrayList<>();
        long bytes = 0;
        for (int round = 0; round < warmup + rounds; round++) {
            deleteRecursively(logDir);
            UnifiedLog log = openLog(logDir, segmentBytes, true, scheduler, stats);
            bytes = 0;
            long start = System.nanoTime();
            for (long i = 0; i < count; i++) {
                ByteBuffer b = batches.get((int) (i % batches.size()));
                b.putLong(0, 0L); // a producer batch again: the leader assigns the offsets
                bytes += b.remaining();
                log.appendAsLeader(MemoryRecords.readableRecords(b.duplicate()), 0);
            }
            long elapsed = System.nanoTime() - start;
            log.flush(true);
            log.close();
            if (round >= warmup) {
                runs.add(bytes / (elapsed / 1e9) / 1e6);
            }
        }
        deleteRecursively(logDir);
        scheduler.shutdown();
        return json("append", "MB/s", runs, warmup, "\"appends\":" + count + ",\"bytes\":" + bytes);
    }

    private static String recover(Path partitionDir, int rounds, int warmup, int segmentBytes) throws Exception {
        KafkaScheduler scheduler = new KafkaScheduler(1);
        scheduler.startup();
        BrokerTopicStats stats = new BrokerTopicStats(false);
        long bytes = logBytes(partitionDir);
        List<Double> runs = new ArrayList<>();
        long leo = -1;
        for (int round = 0; round < warmup + rounds; round++) {
            deleteSnapshots(partitionDir);
            long start = System.nanoTime();
            UnifiedLog log = openLog(partitionDir, segmentBytes, false, scheduler, stats);
            long elapsed = System.nanoTime() - start;
            leo = log.logEndOffset();
            log.close();
            if (round >= warmup) {
                runs.add(bytes / (elapsed / 1e9) / 1e6);
            }
        }
        deleteSnapshots(partitionDir);
        scheduler.shutdown();
        return json("recover", "MB/s", runs, warmup, "\"log_bytes\":" + bytes + ",\"log_end_offset\":" + leo);
    }

    /** One round of `threads` appenders sharing a fresh log: appends/s. */
    private static double durableRound(List<ByteBuffer> batches, long perThread, int threads, Path logDir,
                                       int segmentBytes, KafkaScheduler scheduler, BrokerTopicStats stats)
            throws Exception {
        deleteRecursively(logDir);
        UnifiedLog log = openLog(logDir, segmentBytes, true, scheduler, stats);
        CyclicBarrier barrier = new CyclicBarrier(threads + 1);
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        List<Future<Void>> done = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            // Each appender owns its copy: the leader rewrites the base offset in place.
            ByteBuffer own = ByteBuffer.allocate(batches.get(t % batches.size()).remaining());
            own.put(batches.get(t % batches.size()).duplicate()).flip();
            done.add(pool.submit(() -> {
                barrier.await();
                for (long i = 0; i < perThread; i++) {
                    own.putLong(0, 0L);
                    long last = log.appendAsLeader(MemoryRecords.readableRecords(own.duplicate()), 0).lastOffset();
                    log.flushUptoOffsetExclusive(last + 1);
                }
                return null;
            }));
        }
        barrier.await();
        long start = System.nanoTime();
        for (Future<Void> f : done) {
            f.get();
        }
        long elapsed = System.nanoTime() - start;
        pool.shutdown();
        log.close();
        return perThread * threads / (elapsed / 1e9);
    }

    private static String durable(Path batchFile, long count, int rounds, int warmup, Path dir, int segmentBytes,
                                  String threadList) throws Exception {
        List<ByteBuffer> batches = readBatches(batchFile);
        KafkaScheduler scheduler = new KafkaScheduler(1);
        scheduler.startup();
        BrokerTopicStats stats = new BrokerTopicStats(false);
        Path logDir = dir.resolve("bench-0");
        StringBuilder groups = new StringBuilder();
        List<Double> first = null;
        for (String item : threadList.split(",")) {
            int threads = Integer.parseInt(item.trim());
            long perThread = (count + threads - 1) / threads;
            List<Double> runs = new ArrayList<>();
            for (int round = 0; round < warmup + rounds; round++) {
                double rate = durableRound(batches, perThread, threads, logDir, segmentBytes, scheduler, stats);
                if (round >= warmup) {
                    runs.add(rate);
                }
            }
            if (first == null) {
                first = runs;
            }
            groups.append(groups.length() == 0 ? "" : ",").append('"').append(threads).append("\":")
                    .append(runs);
        }
        deleteRecursively(logDir);
        scheduler.shutdown();
        return json("durable", "appends/s", first, warmup,
                "\"appends\":" + count + ",\"flush\":\"flushUptoOffsetExclusive\",\"groups\":{" + groups + "}");
    }

    private static String recoverDir(Path logDir, int threads, int rounds, int warmup, int segmentBytes)
            throws Exception {
        KafkaScheduler scheduler = new KafkaScheduler(1);
        scheduler.startup();
        BrokerTopicStats stats = new BrokerTopicStats(false);
        List<Path> partitions;
        try (Stream<Path> s = Files.list(logDir)) {
            partitions = s.filter(Files::isDirectory).sorted().toList();
        }
        long bytes = 0;
        for (Path p : partitions) {
            bytes += logBytes(p);
        }
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            return recoverDirRounds(partitions, pool, bytes, segmentBytes, rounds, warmup, threads, scheduler, stats);
        } finally {
            // Also on a failure: the pool's threads must not keep the JVM alive.
            pool.shutdownNow();
            scheduler.shutdown();
        }
    }

    private static String recoverDirRounds(List<Path> partitions, ExecutorService pool, long bytes,
                                           int segmentBytes, int rounds, int warmup, int threads,
                                           KafkaScheduler scheduler, BrokerTopicStats stats) throws Exception {
        List<Double> runs = new ArrayList<>();
        long leo = 0;
        for (int round = 0; round < warmup + rounds; round++) {
            for (Path p : partitions) {
                deleteSnapshots(p);
            }
            long start = System.nanoTime();
            List<Future<UnifiedLog>> opened = new ArrayList<>();
            for (Path p : partitions) {
                opened.add(pool.submit(() -> openLog(p, segmentBytes, false, scheduler, stats)));
            }
            List<UnifiedLog> logs = new ArrayList<>();
            for (Future<UnifiedLog> f : opened) {
                logs.add(f.get());
            }
            long elapsed = System.nanoTime() - start;
            leo = 0;
            for (UnifiedLog log : logs) {
                leo += log.logEndOffset();
                log.close();
            }
            if (round >= warmup) {
                runs.add(bytes / (elapsed / 1e9) / 1e6);
            }
        }
        for (Path p : partitions) {
            deleteSnapshots(p);
        }
        return json("recoverdir", "MB/s", runs, warmup, "\"log_bytes\":" + bytes + ",\"partitions\":"
                + partitions.size() + ",\"threads\":" + threads + ",\"log_end_offsets_sum\":" + leo);
    }

    // ----------------------------------------------------------------------------------------------
    // ProducerStateManager

    private static final long BASE_TIMESTAMP = 1_800_000_000_000L;
    private static final long PRODUCER_ID_BASE = 4_000_000L;
    private static final int RECORDS_PER_BATCH = 15;
    private static final int TXN_DATA_BATCHES = 4;

    /** One batch as the log's replay sees it (klog's BatchSummary). */
    private record Summary(long producerId, int firstSequence, int lastSequence, long firstOffset,
                           long lastOffset, long timestamp, boolean transactional, boolean commit) {
    }

    /** The generator of klog's `benches/psm.rs` and `klog bench psm`, step for step. */
    private static Summary[] summaries(int producers, int batches) {
        int[] seq = new int[producers];
        int[] open = new int[producers];
        long rng = 0x9e3779b97f4a7c15L;
        long next = 0;
        Summary[] out = new Summary[batches];
        for (int i = 0; i < batches; i++) {
            rng ^= rng >>> 12;
            rng ^= rng << 25;
            rng ^= rng >>> 27;
            long r = rng * 0x2545f4914f6cdd1dL;
            int p = (int) Long.remainderUnsigned(r, producers);
            boolean txn = p % 10 == 0;
            long pid = PRODUCER_ID_BASE + 3L * p;
            long ts = BASE_TIMESTAMP + i;
            Summary s;
            if (txn && open[p] == TXN_DATA_BATCHES) {
                open[p] = 0;
                s = new Summary(pid, -1, -1, next, next, ts, true, true);
            } else {
                int first = seq[p];
                seq[p] += RECORDS_PER_BATCH;
                if (txn) {
                    open[p]++;
                }
                s = new Summary(pid, first, first + RECORDS_PER_BATCH - 1, next, next + RECORDS_PER_BATCH - 1, ts,
                        txn, false);
            }
            next = s.lastOffset + 1;
            out[i] = s;
        }
        return out;
    }

    private static int replay(ProducerStateManager psm, Summary[] summaries) {
        int completed = 0;
        EndTransactionMarker commit = new EndTransactionMarker(ControlRecordType.COMMIT, 0);
        for (Summary s : summaries) {
            ProducerAppendInfo info = psm.prepareUpdate(s.producerId, AppendOrigin.REPLICATION);
            Optional<CompletedTxn> done = Optional.empty();
            if (s.commit) {
                done = info.appendEndTxnMarker(commit, (short) 0, s.firstOffset, s.timestamp, (short) 0);
            } else {
                info.appendDataBatch((short) 0, s.firstSequence, s.lastSequence, s.timestamp,
                        new LogOffsetMetadata(s.firstOffset), s.lastOffset, s.transactional);
            }
            psm.update(info);
            if (done.isPresent()) {
                psm.completeTxn(done.get());
                completed++;
            }
            psm.updateMapEndOffset(s.lastOffset + 1);
        }
        return completed;
    }

    private static String psm(int batches, int producers, int rounds, int warmup, Path dir) throws Exception {
        Summary[] summaries = summaries(producers, batches);
        TopicPartition tp = new TopicPartition("bench", 0);
        Files.createDirectories(dir);
        List<Double> runs = new ArrayList<>();
        int completed = 0;
        int count = 0;
        for (int round = 0; round < warmup + rounds; round++) {
            ProducerStateManager psm = new ProducerStateManager(tp, dir.toFile(), MAX_TXN_TIMEOUT_MS,
                    new ProducerStateManagerConfig(PRODUCER_ID_EXPIRATION_MS, false), Time.SYSTEM);
            long start = System.nanoTime();
            completed = replay(psm, summaries);
            long elapsed = System.nanoTime() - start;
            count = psm.producerIdCount();
            if (round >= warmup) {
                runs.add(batches / (elapsed / 1e9));
            }
        }
        return json("psm", "batches/s", runs, warmup,
                "\"batches\":" + batches + ",\"producers\":" + count + ",\"completed_transactions\":" + completed);
    }

    // ----------------------------------------------------------------------------------------------
    // Cleaner

    /** CleanerConfig's defaults for one thread: log.cleaner.io.buffer.size / threads / 2, message.max.bytes. */
    private static final int CLEANER_IO_BUFFER_SIZE = 512 * 1024 / 2;
    private static final int MESSAGE_MAX_BYTES = 1048588;
    private static final double DEDUPE_LOAD_FACTOR = 0.9;

    private static String clean(Path partitionDir, Path workDir, int rounds, int warmup, int segmentBytes,
                                int dedupeBytes, long nowMs) throws Exception {
        KafkaScheduler scheduler = new KafkaScheduler(1);
        scheduler.startup();
        BrokerTopicStats stats = new BrokerTopicStats(false);
        // LogCleaner's: one map for the cleaner thread's whole life, cleared by each pass.
        Cleaner cleaner = new Cleaner(0, new SkimpyOffsetMap(dedupeBytes, "MD5"), CLEANER_IO_BUFFER_SIZE,
                MESSAGE_MAX_BYTES, DEDUPE_LOAD_FACTOR,
                new Throttler(Double.MAX_VALUE, 300L, "cleaner-io", "bytes", Time.SYSTEM), Time.SYSTEM, tp -> { });
        Map<String, Object> props = Map.of("segment.bytes", segmentBytes, "cleanup.policy", "compact");
        Path copy = workDir.resolve(partitionDir.getFileName());
        List<Double> runs = new ArrayList<>();
        List<Double> onCpu = new ArrayList<>();
        List<Double> runqueue = new ArrayList<>();
        List<Double> cpuRates = new ArrayList<>();
        com.sun.management.OperatingSystemMXBean os =
                (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        String details = "";
        try {
            for (int round = 0; round < warmup + rounds; round++) {
                deleteRecursively(copy);
                linkCopy(partitionDir, copy);
                UnifiedLog log = openLog(copy, props, true, scheduler, stats);
                log.updateHighWatermark(log.logEndOffset());
                LogToClean toClean = new LogToClean(log, log.logStartOffset(), log.activeSegment().baseOffset(), false);
                int segmentsBefore = log.numberOfSegments();
                long start = System.nanoTime();
                long[] sched = schedstat();
                long processCpu = os.getProcessCpuTime();
                Map.Entry<Long, CleanerStats> done = cleaner.doClean(toClean, nowMs);
                long elapsed = System.nanoTime() - start;
                long[] after = schedstat();
                processCpu = os.getProcessCpuTime() - processCpu;
                CleanerStats s = done.getValue();
                details = "\"bytes\":" + toClean.totalBytes() + ",\"end_offset\":" + done.getKey()
                        + ",\"segments_before\":" + segmentsBefore + ",\"segments_after\":" + log.numberOfSegments()
                        + ",\"log_bytes_after\":" + log.size() + ",\"bytes_read\":" + s.bytesRead()
                        + ",\"bytes_written\":" + s.bytesWritten() + ",\"map_messages_read\":" + s.mapMessagesRead()
                        + ",\"messages_read\":" + s.messagesRead() + ",\"messages_written\":" + s.messagesWritten()
                        + ",\"dedupe_buffer_size\":" + dedupeBytes;
                log.close();
                if (round >= warmup) {
                    runs.add(toClean.totalBytes() / (elapsed / 1e9) / 1e6);
                    cpuRates.add(toClean.totalBytes() / (processCpu / 1e9) / 1e6);
                    if (sched != null && after != null) {
                        onCpu.add((double) (after[0] - sched[0]) / elapsed);
                        runqueue.add((double) (after[1] - sched[1]) / elapsed);
                    }
                }
            }
        } finally {
            deleteRecursively(copy);
            scheduler.shutdown();
        }
        return json("clean", "MB/s", runs, warmup,
                details + ",\"on_cpu_shares\":" + onCpu + ",\"runqueue_shares\":" + runqueue
                        + ",\"cpu_mb_per_s\":" + cpuRates);
    }

    /** This thread's time on a CPU and waiting for one so far, in ns (/proc/thread-self/schedstat), or null. */
    private static long[] schedstat() {
        try {
            String[] f = Files.readString(Path.of("/proc/thread-self/schedstat")).trim().split("\\s+");
            return new long[] {Long.parseLong(f[0]), Long.parseLong(f[1])};
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    /** A fresh copy of a partition directory: each .log hard-linked (no cleaner writes an old .log), the rest copied. */
    private static void linkCopy(Path from, Path to) throws IOException {
        Files.createDirectories(to);
        try (Stream<Path> s = Files.list(from)) {
            for (Path p : s.filter(Files::isRegularFile).toList()) {
                Path target = to.resolve(p.getFileName());
                if (p.toString().endsWith(".log")) {
                    Files.createLink(target, p);
                } else {
                    Files.copy(p, target, StandardCopyOption.COPY_ATTRIBUTES);
                }
            }
        }
    }

    // ----------------------------------------------------------------------------------------------

    private static String json(String workload, String unit, List<Double> runs, int warmup, String details) {
        StringBuilder sb = new StringBuilder();
        sb.append("{\"kafka_version\":\"").append(AppInfoParser.getVersion()).append('"');
        sb.append(",\"java_version\":\"").append(System.getProperty("java.version")).append('"');
        sb.append(",\"workload\":\"").append(workload).append('"');
        sb.append(",\"unit\":\"").append(unit).append('"');
        sb.append(",\"warmup_rounds\":").append(warmup);
        sb.append(",\"runs\":[");
        for (int i = 0; i < runs.size(); i++) {
            sb.append(i == 0 ? "" : ",").append(runs.get(i));
        }
        sb.append("],\"details\":{").append(details).append("}}");
        return sb.toString();
    }

    private static long logBytes(Path dir) throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            long total = 0;
            for (Path p : s.filter(p -> p.toString().endsWith(".log")).toList()) {
                total += Files.size(p);
            }
            return total;
        }
    }

    private static void deleteSnapshots(Path dir) throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            for (Path p : s.filter(p -> p.toString().endsWith(".snapshot")).toList()) {
                Files.delete(p);
            }
        }
    }

    private static void deleteRecursively(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return;
        }
        try (Stream<Path> s = Files.walk(dir)) {
            for (Path p : s.sorted(Comparator.reverseOrder()).toList()) {
                Files.delete(p);
            }
        }
    }
}
