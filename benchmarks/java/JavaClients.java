import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java client's side of benchmarks/security.py: produces COUNT records of SIZE bytes to
 * TOPIC (acks=all, idempotent, linger.ms=5, the client's other defaults), then reads them back
 * from offset 0. Each clock starts once the client is connected and logged in (its first record
 * acknowledged, its first records read). Prints two lines, "produce RECORDS_PER_S" and
 * "consume RECORDS_PER_S".
 *
 * <p>Run by the benchmark as a single-file program (java -cp KAFKA_CLIENTS_JAR:SLF4J_API_JAR
 * JavaClients.java BOOTSTRAP PROTOCOL CA USER PASSWORD COUNT SIZE TOPIC); PROTOCOL is PLAINTEXT
 * or SASL_SSL (SCRAM-SHA-256, the CA's PEM as the truststore).
 */
public final class JavaClients {
    public static void main(String[] arguments) throws Exception {
        String bootstrap = arguments[0];
        String protocol = arguments[1];
        int count = Integer.parseInt(arguments[5]);
        int size = Integer.parseInt(arguments[6]);
        String topic = arguments[7];
        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);
        if (protocol.equals("SASL_SSL")) {
            common.put("security.protocol", "SASL_SSL");
            common.put("sasl.mechanism", "SCRAM-SHA-256");
            common.put(
                    "sasl.jaas.config",
                    "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                            + arguments[3] + "\" password=\"" + arguments[4] + "\";");
            common.put("ssl.truststore.type", "PEM");
            common.put("ssl.truststore.location", arguments[2]);
        }
        System.out.printf("produce %.0f%n", produce(common, topic, count, size));
        System.out.printf("consume %.0f%n", consume(common, topic, count + 1));
    }

    private static double produce(Properties common, String topic, int count, int size)
            throws Exception {
        Properties settings = new Properties();
        settings.putAll(common);
        settings.put("acks", "all");
        settings.put("enable.idempotence", "true");
        settings.put("linger.ms", "5");
        settings.put("key.serializer", ByteArraySerializer.class.getName());
        settings.put("value.serializer", ByteArraySerializer.class.getName());
        byte[] value = new byte[size];
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(settings)) {
            producer.send(new ProducerRecord<>(topic, value)).get();
            long started = System.nanoTime();
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, value));
            }
            producer.flush();
            return count / ((System.nanoTime() - started) / 1e9);
        }
    }

    private static double consume(Properties common, String topic, int count) {
        Properties settings = new Properties();
        settings.putAll(common);
        settings.put("group.id", "bench-java");
        settings.put("enable.auto.commit", "false");
        settings.put("key.deserializer", ByteArrayDeserializer.class.getName());
        settings.put("value.deserializer", ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(settings)) {
            TopicPartition partition = new TopicPartition(topic, 0);
            consumer.assign(List.of(partition));
            consumer.seek(partition, 0);
            long received = 0;
            long deadline = System.nanoTime() + 120_000_000_000L;
            while (received == 0 && System.nanoTime() < deadline) {
                received += consumer.poll(Duration.ofSeconds(1)).count();
            }
            long first = received;
            long started = System.nanoTime();
            while (received < count && System.nanoTime() < deadline) {
                received += consumer.poll(Duration.ofSeconds(1)).count();
            }
            if (received < count) {
                throw new IllegalStateException("read " + received + " of " + count + " records");
            }
            return (received - first) / ((System.nanoTime() - started) / 1e9);
        }
    }
}
