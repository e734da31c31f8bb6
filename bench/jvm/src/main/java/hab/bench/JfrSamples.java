package hab.bench;

import java.io.IOException;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import jdk.jfr.consumer.RecordedClass;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;

/**
 * What a JFR recording's allocation samples say: the {@code jdk.ObjectAllocationSample} events
 * of one thread (or of all), their weights summed (JFR weighs each sample by the bytes its
 * thread allocated since the one before, so the sum estimates the bytes allocated) and the
 * classes with the largest shares of the weight. Prints one line on standard output:
 * {@code jfr_samples=812 weight_bytes=1196425216 top=int[]:41.2%,...}. Arguments: the
 * recording, and optionally a thread name (else every thread).
 */
public final class JfrSamples {
    public static void main(String[] args) throws IOException {
        String thread = args.length > 1 ? args[1] : null;
        long samples = 0;
        long weight = 0;
        Map<String, Long> byClass = new HashMap<>();
        for (RecordedEvent event : RecordingFile.readAllEvents(Path.of(args[0]))) {
            if (!event.getEventType().getName().equals("jdk.ObjectAllocationSample")) {
                continue;
            }
            if (thread != null
                    && (event.getThread() == null || !thread.equals(event.getThread().getJavaName()))) {
                continue;
            }
            long bytes = event.getLong("weight");
            RecordedClass type = event.getClass("objectClass");
            samples++;
            weight += bytes;
            byClass.merge(type == null ? "?" : type.getName(), bytes, Long::sum);
        }
        StringBuilder top = new StringBuilder();
        long total = Math.max(weight, 1);
        byClass.entrySet().stream()
                .sorted(Map.Entry.<String, Long>comparingByValue().reversed())
                .limit(4)
                .forEach(entry -> top.append(top.length() == 0 ? "" : ",")
                        .append(entry.getKey())
                        .append(':')
                        .append(String.format("%.1f%%", 100.0 * entry.getValue() / total)));
        System.out.printf("jfr_samples=%d weight_bytes=%d top=%s%n", samples, weight, top);
    }
}
