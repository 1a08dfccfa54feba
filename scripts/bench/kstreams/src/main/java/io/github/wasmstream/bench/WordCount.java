package io.github.wasmstream.bench;

import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.regex.Pattern;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * The Kafka Streams side of wasmstream's side-by-side benchmark: the word
 * count of the Kafka Streams documentation (WordCountDemo), lines in, the
 * running count of every word out.
 *
 * <pre>
 * input (key ignored, value a line)
 *   -> flatMapValues(lowercase, split on non-word characters)
 *   -> groupBy(word)             (a repartition topic keyed by word)
 *   -> count()                   (store "counts", changelogged)
 *   -> toStream -> to(output)    (key: word as UTF-8, value: count as an
 *                                 8-byte big-endian long, LongSerializer)
 * </pre>
 *
 * Flags (all "-name value"): -bootstrap, -app-id, -input, -output,
 * -guarantee (at_least_once | exactly_once_v2), -commit-ms, -cache-bytes
 * ("default" leaves statestore.cache.max.bytes at Kafka Streams' default,
 * 10 MiB; 0 turns the record cache off), -threads (num.stream.threads),
 * -state-dir. The process runs until SIGTERM or SIGINT and exits 1 if the
 * Kafka Streams client fails.
 */
public final class WordCount {
    /** Words are runs of word characters, as in WordCountDemo. */
    private static final Pattern NON_WORD = Pattern.compile("\\W+");

    private WordCount() {}

    public static void main(String[] args) throws InterruptedException {
        Map<String, String> flags = parse(args);
        String input = required(flags, "input");
        String output = required(flags, "output");

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, required(flags, "app-id"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, required(flags, "bootstrap"));
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, required(flags, "guarantee"));
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, required(flags, "commit-ms"));
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, flags.getOrDefault("threads", "1"));
        props.put(StreamsConfig.STATE_DIR_CONFIG, required(flags, "state-dir"));
        String cache = flags.getOrDefault("cache-bytes", "default");
        if (!cache.equals("default")) {
            props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, cache);
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.ByteArray(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(NON_WORD.split(line.toLowerCase(Locale.ROOT))))
                .filter((key, word) -> !word.isEmpty())
                .groupBy((key, word) -> word, Grouped.with(Serdes.String(), Serdes.String()))
                .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts")
                        .withKeySerde(Serdes.String())
                        .withValueSerde(Serdes.Long()))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        Topology topology = builder.build();
        System.out.println("wordcount-kstreams: " + props);
        System.out.println(topology.describe());

        KafkaStreams streams = new KafkaStreams(topology, props);
        CountDownLatch done = new CountDownLatch(1);
        int[] status = {0};
        streams.setUncaughtExceptionHandler(e -> {
            System.err.println("wordcount-kstreams: stream thread failed: " + e);
            e.printStackTrace();
            status[0] = 1;
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.setStateListener((now, before) -> {
            System.out.println(java.time.Instant.now() + " wordcount-kstreams: state " + before + " -> " + now);
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                if (now == KafkaStreams.State.ERROR) {
                    status[0] = 1;
                }
                done.countDown();
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(10));
            done.countDown();
        }, "shutdown"));
        streams.start();
        done.await();
        streams.close(Duration.ofSeconds(10));
        System.exit(status[0]);
    }

    private static Map<String, String> parse(String[] args) {
        Map<String, String> flags = new HashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            if (!args[i].startsWith("-") || i + 1 >= args.length) {
                usage("expected -name value pairs, got " + String.join(" ", args));
            }
            flags.put(args[i].substring(1), args[i + 1]);
        }
        return flags;
    }

    private static String required(Map<String, String> flags, String name) {
        String v = flags.get(name);
        if (v == null || v.isEmpty()) {
            usage("-" + name + " is required");
        }
        return v;
    }

    private static void usage(String problem) {
        System.err.println("wordcount-kstreams: " + problem);
        System.err.println("usage: java -jar wordcount-kstreams.jar -bootstrap HOST:PORT -app-id ID"
                + " -input TOPIC -output TOPIC -guarantee at_least_once|exactly_once_v2"
                + " -commit-ms MS -state-dir DIR [-cache-bytes default|N] [-threads N]");
        System.exit(2);
    }
}
