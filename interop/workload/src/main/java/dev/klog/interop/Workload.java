package dev.klog.interop;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java side of klog's real-Kafka tests. Every command prints JSON lines on stdout and nothing else
 * (logging goes to stderr); keys, values and header values are lowercase hex or null.
 *
 * <pre>
 *   create-topic BOOTSTRAP TOPIC [KEY=VALUE...]   one partition, replication factor 1; prints {"topic_id"}
 *   produce BOOTSTRAP TOPIC RECORDS               the workload below; one line per record written
 *   consume BOOTSTRAP TOPIC ISOLATION             partition 0 from the beginning to the end offset
 *                                                 (the LSO for read_committed); one line per record
 *   delete-records BOOTSTRAP TOPIC OFFSET         Admin.deleteRecords on partition 0 below OFFSET;
 *                                                 prints {"low_watermark"}
 *   commit-offsets BOOTSTRAP TOPIC GROUP PROTOCOL a consumer of group GROUP (group.protocol classic or
 *                                                 consumer) reads TOPIC, commits its position and then an
 *                                                 offset with metadata; a transactional producer then
 *                                                 commits an offset for the group inside a transaction
 *                                                 (sendOffsetsToTransaction); prints {"committed"}
 *   group-consume BOOTSTRAP TOPIC GROUP COUNT [RESET]
 *                                                 a classic consumer of group GROUP subscribes to TOPIC
 *                                                 and reads COUNT records of partition 0 from its
 *                                                 committed offset (auto.offset.reset RESET, default
 *                                                 none: no committed offset is an error), then commits
 *                                                 the offset after the last one (with that record's
 *                                                 leader epoch); one line per record,
 *                                                 then {"group","committed"}
 *   create-topic-assigned BOOTSTRAP TOPIC ASSIGNMENT [KEY=VALUE...]
 *                                                 one partition per `/`-separated replica list
 *                                                 (`1,2/2,3/3,1`: partition 0 on brokers 1 and 2, its
 *                                                 first replica the preferred leader); prints {"topic_id"}
 *   send BOOTSTRAP TOPIC PARTITION COUNT ACKS [PAUSE_MS]
 *                                                 COUNT records to one partition, lz4: ACKS=all through
 *                                                 an idempotent producer, ACKS=1 through a plain one (no
 *                                                 producer id: what a leader accepts without its
 *                                                 followers); a flush and a pause every 10 records when
 *                                                 PAUSE_MS is given; one line per record written
 *   open-transactions BOOTSTRAP TOPIC COUNT PRODUCERS
 *                                                 PRODUCERS transactional producers (transactional.id
 *                                                 klog-open-N) each commit COUNT records to partition 0,
 *                                                 then send COUNT more in a transaction they leave open
 *                                                 (closed without committing; transaction.timeout.ms 15
 *                                                 min, so the broker does not abort it soon); one line per
 *                                                 record, {"offset","producer","committed"}
 *   compact-produce BOOTSTRAP TOPIC RECORDS KEYS  the produce workload for a compacted topic: every record
 *                                                 keyed, the key of record i is key-(i mod KEYS), so keys
 *                                                 repeat; null values are tombstones; same output lines
 *   alter-topic-config BOOTSTRAP TOPIC KEY=VALUE...
 *                                                 Admin.incrementalAlterConfigs SET of each pair on TOPIC;
 *                                                 prints {"topic","altered"}
 *   describe-topic BOOTSTRAP TOPIC                one line per partition: leader, replicas, isr
 *   elect-leaders BOOTSTRAP TOPIC PARTITION TYPE  Admin.electLeaders (TYPE unclean or preferred);
 *                                                 prints {"partition","error"} (error null or its name)
 *   fixture-batches BOOTSTRAP TOPIC               the single batches of fixtures/ (FixtureBatches)
 *   group-read BOOTSTRAP TOPIC GROUP MAX RESET    a read_committed classic consumer of group GROUP,
 *                                                 assigned every partition of TOPIC (no rebalance),
 *                                                 starting at the group's committed offsets (RESET:
 *                                                 auto.offset.reset, none/earliest), reads at most MAX
 *                                                 records, or fewer once every partition is at its end
 *                                                 (the LSO), then commits its positions (commitSync);
 *                                                 one line per record {"partition","offset","key","value"},
 *                                                 then {"positions":{"P":N,...}}
 * </pre>
 *
 * The workload: an idempotent producer per codec (none, gzip, snappy, lz4, zstd); a transactional producer
 * committing, aborting (with idempotent data written inside the aborted range) and committing again; and a
 * transactional.id re-initialised by a second producer while the first has a transaction open, which bumps
 * the epoch and aborts that transaction. Records have keys or null keys, headers (with null values) and null
 * values. Keys, values and headers are deterministic (seeded); timestamps are recent, so a load never expires
 * a producer (`producer.id.expiration.ms` counts from the batch's timestamp).
 */
public final class Workload {
    private static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};

    private Workload() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            usage();
        }
        switch (args[0]) {
            case "create-topic" -> createTopic(args[1], args[2], args);
            case "produce" -> new Producing(args[1], args[2], args.length > 3 ? Integer.parseInt(args[3]) : 60, 0).run();
            case "compact-produce" -> new Producing(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4])).run();
            case "alter-topic-config" -> alterTopicConfig(args[1], args[2], args);
            case "consume" -> consume(args[1], args[2], args.length > 3 ? args[3] : "read_uncommitted",
                    args.length > 4 ? Integer.parseInt(args[4]) : 0);
            case "delete-records" -> deleteRecords(args[1], args[2], Long.parseLong(args[3]));
            case "commit-offsets" -> commitOffsets(args[1], args[2], args[3], args[4]);
            case "group-consume" -> groupConsume(args[1], args[2], args[3], Integer.parseInt(args[4]),
                    args.length > 5 ? args[5] : "none");
            case "create-topic-assigned" -> createTopicAssigned(args[1], args[2], args);
            case "send" -> send(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]), args[5],
                    args.length > 6 ? Long.parseLong(args[6]) : 0);
            case "open-transactions" -> openTransactions(args[1], args[2], Integer.parseInt(args[3]),
                    Integer.parseInt(args[4]), args.length > 5 ? args[5] : null, args.length > 6 ? args[6] : "klog-open-");
            case "describe-topic" -> describeTopic(args[1], args[2]);
            case "elect-leaders" -> electLeaders(args[1], args[2], Integer.parseInt(args[3]), args[4]);
            case "fixture-batches" -> FixtureBatches.run(args[1], args[2]);
            case "filter-to" -> FilterTo.run(args[1], Integer.parseInt(args[2]), Integer.parseInt(args[3]));
            case "filter-to-bytes" -> FilterTo.runBytes(args[1], args[2]);
            case "group-read" -> groupRead(args[1], args[2], args[3], Integer.parseInt(args[4]), args[5]);
            default -> usage();
        }
    }

    private static void usage() {
        System.err.println("usage: Workload create-topic|create-topic-assigned|produce|send|consume|delete-records|"
                + "describe-topic|elect-leaders|commit-offsets|open-transactions|fixture-batches BOOTSTRAP TOPIC [...]"
                + " | filter-to SCENARIO RECORDS VALUE_BYTES | filter-to-bytes DROP HEX");
        System.exit(2);
    }

    private static void createTopic(String bootstrap, String topic, String[] args) throws Exception {
        Map<String, String> configs = new HashMap<>();
        for (int i = 3; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            configs.put(kv[0], kv[1]);
        }
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(p)) {
            CreateTopicsResult r = admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1).configs(configs)));
            r.all().get();
            System.out.println("{\"topic\":" + str(topic) + ",\"topic_id\":" + str(r.topicId(topic).get().toString()) + "}");
        }
    }

    private static void alterTopicConfig(String bootstrap, String topic, String[] args) throws Exception {
        List<AlterConfigOp> ops = new ArrayList<>();
        for (Map.Entry<String, String> e : configs(args, 3).entrySet()) {
            ops.add(new AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue()), AlterConfigOp.OpType.SET));
        }
        try (Admin admin = admin(bootstrap)) {
            admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.TOPIC, topic), ops)).all().get();
            System.out.println("{\"topic\":" + str(topic) + ",\"altered\":" + ops.size() + "}");
        }
    }

    private static Map<String, String> configs(String[] args, int from) {
        Map<String, String> configs = new HashMap<>();
        for (int i = from; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            configs.put(kv[0], kv[1]);
        }
        return configs;
    }

    private static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return Admin.create(p);
    }

    private static void createTopicAssigned(String bootstrap, String topic, String[] args) throws Exception {
        Map<Integer, List<Integer>> assignment = new HashMap<>();
        String[] partitions = args[3].split("/");
        for (int partition = 0; partition < partitions.length; partition++) {
            List<Integer> replicas = new ArrayList<>();
            for (String id : partitions[partition].split(",")) {
                replicas.add(Integer.parseInt(id));
            }
            assignment.put(partition, replicas);
        }
        try (Admin admin = admin(bootstrap)) {
            CreateTopicsResult r = admin.createTopics(List.of(new NewTopic(topic, assignment).configs(configs(args, 4))));
            r.all().get();
            System.out.println("{\"topic\":" + str(topic) + ",\"topic_id\":" + str(r.topicId(topic).get().toString()) + "}");
        }
    }

    private static void send(String bootstrap, String topic, int partition, int count, String acks, long pauseMs)
            throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.ACKS_CONFIG, acks);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, Boolean.toString(acks.equals("all")));
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        // Metadata again soon after a leader moves, so a send waits for the new leader, not the old one.
        p.put(ProducerConfig.METADATA_MAX_AGE_CONFIG, "1000");
        Random random = new Random(0x73656e64L + partition);
        long baseTimestamp = System.currentTimeMillis() - 60_000L;
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                byte[] key = ("key-" + i).getBytes(StandardCharsets.UTF_8);
                byte[] value = new byte[40 + random.nextInt(400)];
                for (int k = 0; k < value.length; k++) {
                    value[k] = (byte) ('a' + random.nextInt(26));
                }
                sent.add(producer.send(new ProducerRecord<>(topic, partition, baseTimestamp + i, key, value)));
                if (pauseMs > 0 && i % 10 == 9) {
                    producer.flush();
                    Thread.sleep(pauseMs);
                }
            }
            producer.flush();
        }
        for (Future<RecordMetadata> f : sent) {
            RecordMetadata m = f.get();
            System.out.println("{\"partition\":" + m.partition() + ",\"offset\":" + m.offset() + "}");
        }
    }

    private static void describeTopic(String bootstrap, String topic) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            for (TopicPartitionInfo p : d.partitions()) {
                System.out.println("{\"partition\":" + p.partition() + ",\"leader\":"
                        + (p.leader() == null ? -1 : p.leader().id()) + ",\"replicas\":" + ids(p.replicas())
                        + ",\"isr\":" + ids(p.isr()) + "}");
            }
        }
    }

    private static String ids(List<Node> nodes) {
        StringBuilder s = new StringBuilder("[");
        for (Node n : nodes) {
            if (s.length() > 1) {
                s.append(',');
            }
            s.append(n.id());
        }
        return s.append(']').toString();
    }

    private static void electLeaders(String bootstrap, String topic, int partition, String type) throws Exception {
        TopicPartition tp = new TopicPartition(topic, partition);
        ElectionType election = type.equals("unclean") ? ElectionType.UNCLEAN : ElectionType.PREFERRED;
        try (Admin admin = admin(bootstrap)) {
            Optional<Throwable> error = admin.electLeaders(election, Set.of(tp)).partitions().get().get(tp);
            String name = error.map(e -> str(e.getClass().getSimpleName())).orElse("null");
            System.out.println("{\"partition\":" + partition + ",\"error\":" + name + "}");
        }
    }

    private static void deleteRecords(String bootstrap, String topic, long offset) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin admin = Admin.create(p)) {
            long low = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(offset)))
                    .lowWatermarks().get(tp).get().lowWatermark();
            System.out.println("{\"topic\":" + str(topic) + ",\"low_watermark\":" + low + "}");
        }
    }

    /** One written record, printed once its offset is known. */
    private record Sent(String producer, String txn, Future<RecordMetadata> meta, ProducerRecord<byte[], byte[]> rec) {}

    private static final class Producing {
        private final String bootstrap;
        private final String topic;
        private final int records;
        /** Distinct keys of a compacted topic's workload (every record keyed), or 0: the plain workload. */
        private final int keySpace;
        private final Random random = new Random(0x6b6c6f67L);
        private final List<Sent> sent = new ArrayList<>();
        private int next;
        /** Recent (ten minutes ago), so no producer is old enough to expire when the log is loaded again. */
        private final long baseTimestamp = System.currentTimeMillis() - 600_000L;

        Producing(String bootstrap, String topic, int records, int keySpace) {
            this.keySpace = keySpace;
            this.bootstrap = bootstrap;
            this.topic = topic;
            this.records = records;
        }

        private Properties props(String codec) {
            Properties p = new Properties();
            p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
            p.put(ProducerConfig.ACKS_CONFIG, "all");
            p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
            p.put(ProducerConfig.LINGER_MS_CONFIG, "20");
            p.put(ProducerConfig.BATCH_SIZE_CONFIG, "16384");
            return p;
        }

        private KafkaProducer<byte[], byte[]> transactional(String codec, String txnId) {
            Properties p = props(codec);
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
            KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
            producer.initTransactions();
            return producer;
        }

        /** Sends `n` records; their outcome (`txn`) is fixed up by `settle` for transactions. */
        private void send(KafkaProducer<byte[], byte[]> producer, String name, String txn, int n) {
            for (int k = 0; k < n; k++) {
                int i = next++;
                byte[] key = keySpace > 0 ? ("key-" + (i % keySpace)).getBytes(StandardCharsets.UTF_8)
                        : i % 7 == 3 ? null : ("key-" + i).getBytes(StandardCharsets.UTF_8);
                byte[] value = i % 11 == 5 ? null : letters(40 + random.nextInt(700));
                List<Header> headers = new ArrayList<>();
                if (i % 3 == 1) {
                    headers.add(new RecordHeader("h1", ("v" + i).getBytes(StandardCharsets.UTF_8)));
                } else if (i % 3 == 2) {
                    headers.add(new RecordHeader("h1", null));
                    headers.add(new RecordHeader("trace", letters(8)));
                }
                ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(topic, 0, baseTimestamp + i, key, value, headers);
                sent.add(new Sent(name, txn, producer.send(rec), rec));
            }
        }

        private byte[] letters(int n) {
            byte[] b = new byte[n];
            for (int i = 0; i < n; i++) {
                b[i] = (byte) ('a' + random.nextInt(26));
            }
            return b;
        }

        private void settle(String name, String outcome) {
            for (int i = 0; i < sent.size(); i++) {
                Sent s = sent.get(i);
                if (s.producer.equals(name) && s.txn.equals("open")) {
                    sent.set(i, new Sent(s.producer, outcome, s.meta, s.rec));
                }
            }
        }

        void run() throws Exception {
            Map<String, KafkaProducer<byte[], byte[]>> idempotent = new HashMap<>();
            for (String codec : CODECS) {
                idempotent.put(codec, new KafkaProducer<>(props(codec)));
            }
            for (String codec : CODECS) {
                send(idempotent.get(codec), "idempotent-" + codec, "none", records);
                idempotent.get(codec).flush();
            }

            // A transactional producer: commit, abort (with idempotent data inside the aborted range), commit.
            KafkaProducer<byte[], byte[]> a = transactional("lz4", "klog-txn-a");
            a.beginTransaction();
            send(a, "txn-a", "open", records / 2);
            a.commitTransaction();
            settle("txn-a", "committed");
            a.beginTransaction();
            send(a, "txn-a", "open", records / 2);
            a.flush();
            send(idempotent.get("zstd"), "idempotent-zstd", "none", 5);
            idempotent.get("zstd").flush();
            send(a, "txn-a", "open", 3);
            a.flush(); // abortTransaction fails batches not yet sent: these must reach the log first
            a.abortTransaction();
            settle("txn-a", "aborted");
            a.beginTransaction();
            send(a, "txn-a", "open", records / 4);
            a.commitTransaction();
            settle("txn-a", "committed");
            a.close();

            // The same transactional.id initialised again while a transaction is open: the coordinator bumps the
            // epoch and aborts the open transaction; the new producer commits.
            KafkaProducer<byte[], byte[]> b1 = transactional("gzip", "klog-txn-b");
            b1.beginTransaction();
            send(b1, "txn-b", "open", records / 4);
            b1.commitTransaction();
            settle("txn-b", "committed");
            b1.beginTransaction();
            send(b1, "txn-b", "open", records / 4);
            b1.flush();
            KafkaProducer<byte[], byte[]> b2 = transactional("snappy", "klog-txn-b");
            settle("txn-b", "aborted");
            b1.close(Duration.ZERO);
            b2.beginTransaction();
            send(b2, "txn-b2", "open", records / 4);
            b2.commitTransaction();
            settle("txn-b2", "committed");
            b2.close();

            send(idempotent.get("none"), "idempotent-none", "none", 10);
            for (KafkaProducer<byte[], byte[]> p : idempotent.values()) {
                p.close();
            }
            for (Sent s : sent) {
                RecordMetadata m = s.meta.get();
                System.out.println("{\"offset\":" + m.offset() + ",\"producer\":" + str(s.producer) + ",\"txn\":"
                        + str(s.txn) + "," + recordJson(s.rec.timestamp(), s.rec.key(), s.rec.value(), s.rec.headers()) + "}");
            }
        }
    }

    /** Every record of one partition (0 unless named), from its start to its end offset at ISOLATION. */
    private static void consume(String bootstrap, String topic, String isolation, int partition) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, "65536");
        TopicPartition tp = new TopicPartition(topic, partition);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long end = consumer.endOffsets(List.of(tp)).get(tp);
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (consumer.position(tp) < end) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("no progress to the end offset " + end + " from " + consumer.position(tp));
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    System.out.println("{\"offset\":" + r.offset() + "," + recordJson(r.timestamp(), r.key(), r.value(), r.headers()) + "}");
                }
            }
            System.out.println("{\"end_offset\":" + end + ",\"position\":" + consumer.position(tp) + "}");
        }
    }

    /**
     * Transactions left open at the source: each producer commits COUNT records, then sends COUNT more in a
     * transaction it never ends. The producer is closed at once, so neither a commit nor an abort is sent;
     * the broker keeps the transaction open until transaction.timeout.ms. Every producer writes to partition
     * 0, unless PARTITIONS (a comma-separated list) is given: producer n then writes to the n-th entry (cycling)
     * and each line names its partition. Transactional ids are PREFIX + n ("klog-open-" unless given).
     */
    private static void openTransactions(String bootstrap, String topic, int count, int producers, String partitions,
            String prefix) throws Exception {
        List<String> lines = new ArrayList<>();
        String[] chosen = partitions == null ? new String[] {"0"} : partitions.split(",");
        for (int n = 0; n < producers; n++) {
            int partition = Integer.parseInt(chosen[n % chosen.length]);
            String named = partitions == null ? "" : ",\"partition\":" + partition;
            Properties p = new Properties();
            p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, prefix + n);
            p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "900000");
            p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
            KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
            producer.initTransactions();
            for (boolean commit : new boolean[] {true, false}) {
                producer.beginTransaction();
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                for (int i = 0; i < count; i++) {
                    byte[] key = ("open-" + n + "-" + i).getBytes(StandardCharsets.UTF_8);
                    byte[] value = ("value-" + n + "-" + i + (commit ? "-committed" : "-open")).getBytes(StandardCharsets.UTF_8);
                    sent.add(producer.send(new ProducerRecord<>(topic, partition, key, value)));
                }
                producer.flush();
                if (commit) {
                    producer.commitTransaction();
                }
                for (Future<RecordMetadata> f : sent) {
                    lines.add("{\"offset\":" + f.get().offset() + named + ",\"producer\":" + n + ",\"committed\":" + commit + "}");
                }
            }
            producer.close(Duration.ZERO);
        }
        lines.forEach(System.out::println);
    }

    /** A group member that resumes where its group committed, reads COUNT records and commits after them. */
    private static void groupConsume(String bootstrap, String topic, String group, int count, String reset) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, reset);
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, Integer.toString(count));
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            int read = 0;
            long next = -1;
            java.util.Optional<Integer> epoch = java.util.Optional.empty();
            while (read < count) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("group " + group + " read " + read + " of " + count + " records");
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    if (read == count) {
                        break;
                    }
                    read++;
                    next = r.offset() + 1;
                    epoch = r.leaderEpoch();
                    System.out.println("{\"offset\":" + r.offset() + "}");
                }
            }
            // With the leader epoch of the last record read, as the consumer's own position commit does.
            consumer.commitSync(Map.of(tp, new OffsetAndMetadata(next, epoch, "")));
            System.out.println("{\"group\":" + str(group) + ",\"committed\":" + next + "}");
        }
    }

    private static void groupRead(String bootstrap, String topic, String group, int max, String reset) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, reset);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            List<TopicPartition> parts = new ArrayList<>();
            for (var info : consumer.partitionsFor(topic, Duration.ofSeconds(60))) {
                parts.add(new TopicPartition(topic, info.partition()));
            }
            parts.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
            consumer.assign(parts);
            Map<TopicPartition, Long> ends = consumer.endOffsets(parts, Duration.ofSeconds(60));
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            int read = 0;
            java.util.Set<TopicPartition> rewound = new java.util.HashSet<>();
            while (read < max) {
                boolean atEnd = true;
                for (TopicPartition tp : parts) {
                    atEnd &= consumer.position(tp, Duration.ofSeconds(60)) >= ends.get(tp);
                }
                if (atEnd) {
                    break;
                }
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("group " + group + " read " + read + " records and is not at the end");
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    if (read == max) {
                        // Not read: the position goes back to the first of them, so the commit is
                        // exactly what was printed.
                        if (rewound.add(tp)) {
                            consumer.seek(tp, r.offset());
                        }
                        continue;
                    }
                    read++;
                    System.out.println("{\"partition\":" + r.partition() + ",\"offset\":" + r.offset()
                            + ",\"key\":" + hex(r.key()) + ",\"value\":" + hex(r.value()) + "}");
                }
            }
            consumer.commitSync();
            StringBuilder out = new StringBuilder("{\"positions\":{");
            for (int i = 0; i < parts.size(); i++) {
                TopicPartition tp = parts.get(i);
                out.append(i == 0 ? "" : ",").append('"').append(tp.partition()).append("\":")
                        .append(consumer.position(tp, Duration.ofSeconds(60)));
            }
            System.out.println(out.append("}}"));
        }
    }

    /** Fills __consumer_offsets (and __transaction_state) with what a group and a transaction write there. */
    private static void commitOffsets(String bootstrap, String topic, String group, String protocol) throws Exception {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, group + "-client");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            int read = 0;
            while (read == 0) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("group " + group + " read nothing from " + topic);
                }
                read += consumer.poll(Duration.ofMillis(500)).count();
            }
            consumer.commitSync();
            long position = consumer.position(tp);
            consumer.commitSync(Map.of(tp, new OffsetAndMetadata(position, "klog \"metadata\"\n")));

            Properties tx = new Properties();
            tx.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            tx.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            tx.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            tx.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, group + "-txn");
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(tx)) {
                producer.initTransactions();
                producer.beginTransaction();
                producer.send(new ProducerRecord<>(topic, 0, null, "from-a-transaction".getBytes(StandardCharsets.UTF_8))).get();
                producer.sendOffsetsToTransaction(Map.of(tp, new OffsetAndMetadata(position + 1)), consumer.groupMetadata());
                producer.commitTransaction();
            }
            System.out.println("{\"group\":" + str(group) + ",\"committed\":" + position + "}");
        }
    }

    static String recordJson(long timestamp, byte[] key, byte[] value, Iterable<Header> headers) {
        StringBuilder h = new StringBuilder("[");
        for (Header header : headers) {
            if (h.length() > 1) {
                h.append(',');
            }
            h.append("{\"key\":").append(str(header.key())).append(",\"value\":").append(hex(header.value())).append('}');
        }
        h.append(']');
        return "\"timestamp\":" + timestamp + ",\"key\":" + hex(key) + ",\"value\":" + hex(value) + ",\"headers\":" + h;
    }

    private static String hex(byte[] b) {
        if (b == null) {
            return "null";
        }
        StringBuilder s = new StringBuilder(b.length * 2 + 2).append('"');
        for (byte x : b) {
            s.append(Character.forDigit((x >> 4) & 0xf, 16)).append(Character.forDigit(x & 0xf, 16));
        }
        return s.append('"').toString();
    }

    private static String str(String s) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }
}
