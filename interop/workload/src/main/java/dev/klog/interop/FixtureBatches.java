package dev.klog.interop;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The single batches of klog's committed fixtures (`fixtures/batches/`, made by `scripts/make-fixtures.sh`):
 * five records per producer batch, so the tests that append them can count offsets.
 *
 * <pre>
 *   fixture-batches BOOTSTRAP TOPIC
 * </pre>
 *
 * In order: an idempotent producer per codec (five records, one batch each, a new producer id each); a
 * transactional producer per codec committing five records (one batch, then the COMMIT marker); one more
 * transactional producer aborting five records (one batch, then the ABORT marker). A long linger and a flush
 * after the fifth record make each five records one batch whatever the machine's speed. Prints one JSON line
 * per record (offset, producer, the record's fields as hex), as `produce` does.
 */
final class FixtureBatches {
    private static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};
    private static final int RECORDS = 5;

    private record Sent(String producer, Future<RecordMetadata> meta, ProducerRecord<byte[], byte[]> rec) {}

    private final String bootstrap;
    private final String topic;
    private final List<Sent> sent = new ArrayList<>();
    /** Recent (ten minutes ago): the broker refuses timestamps an hour ahead, not old ones. */
    private final long baseTimestamp = System.currentTimeMillis() - 600_000L;
    private int next;

    private FixtureBatches(String bootstrap, String topic) {
        this.bootstrap = bootstrap;
        this.topic = topic;
    }

    static void run(String bootstrap, String topic) throws Exception {
        new FixtureBatches(bootstrap, topic).produce();
    }

    private Properties props(String codec) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        // Nothing leaves before the flush: the five records are one batch.
        p.put(ProducerConfig.LINGER_MS_CONFIG, "60000");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "65536");
        return p;
    }

    private void produce() throws Exception {
        for (String codec : CODECS) {
            try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(props(codec))) {
                sendFive(p, "idempotent-" + codec);
            }
        }
        for (String codec : CODECS) {
            try (KafkaProducer<byte[], byte[]> p = transactional(codec, "klog-fixture-txn-" + codec)) {
                p.beginTransaction();
                sendFive(p, "txn-" + codec);
                p.commitTransaction();
            }
        }
        try (KafkaProducer<byte[], byte[]> p = transactional("none", "klog-fixture-txn-aborted")) {
            p.beginTransaction();
            sendFive(p, "txn-aborted-none");
            p.abortTransaction();
        }
        for (Sent s : sent) {
            RecordMetadata m = s.meta.get();
            ProducerRecord<byte[], byte[]> r = s.rec;
            System.out.println("{\"offset\":" + m.offset() + ",\"producer\":\"" + s.producer + "\","
                    + Workload.recordJson(r.timestamp(), r.key(), r.value(), r.headers()) + "}");
        }
    }

    private KafkaProducer<byte[], byte[]> transactional(String codec, String txnId) {
        Properties p = props(codec);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
        producer.initTransactions();
        return producer;
    }

    /** Five records (a null key, a null value, headers with and without values among them), then a flush. */
    private void sendFive(KafkaProducer<byte[], byte[]> producer, String name) {
        for (int k = 0; k < RECORDS; k++) {
            int i = next++;
            byte[] key = k == 3 ? null : (name + "-key-" + k).getBytes(StandardCharsets.UTF_8);
            byte[] value = k == 4 ? null : (name + " value " + k + " ").repeat(1 + k * 3).getBytes(StandardCharsets.UTF_8);
            List<Header> headers = new ArrayList<>();
            headers.add(new RecordHeader("h", ("v" + k).getBytes(StandardCharsets.UTF_8)));
            if (k == 2) {
                headers.add(new RecordHeader("no-value", null));
            }
            ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(topic, 0, baseTimestamp + i, key, value, headers);
            sent.add(new Sent(name, producer.send(rec), rec));
        }
        producer.flush();
    }
}
