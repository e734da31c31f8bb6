package hab.apps;

import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import java.util.stream.Stream;

/**
 * The suite's harness, DaCapo-style: {@code APP THREADS [--units N] [--warmup N]
 * [--iterations N] [--pre-iteration-gc on|off]}. Each iteration runs the application's units on
 * THREADS threads; warm-up iterations are untimed. Before each iteration a full collection
 * (System.gc(), untimed and left out of the counts), as DaCapo's harness does by default: an
 * application that promotes leaves the old generation fuller iteration by iteration, and young
 * pauses grow with it, so without it an iteration's time depends on how far the old generation
 * has filled since its last full collection, which differs from run to run. Every iteration's
 * checksum must equal the one recorded for stock HotSpot: an application whose output changed
 * has failed, however fast it ran. The last line on standard output is machine-readable:
 * {@code hab-apps: app=h2 threads=2 ... checksum=0x... checksum_status=ok}. Exit status 1 when a
 * checksum differs, 2 on bad arguments.
 */
public final class Main {
    private Main() {}

    /** The applications, by name. */
    static final Map<String, Supplier<Workload>> APPS = new TreeMap<>(Map.of(
            "h2", H2Oltp::new,
            "luindex", LuceneIndex::new,
            "lusearch", LuceneSearch::new,
            "kotlinc", KotlinCompile::new,
            "scalac", ScalaCompile::new,
            "jackson", JacksonRoundTrips::new,
            "javac", JavacCompile::new));

    public static void main(String[] args) throws Exception {
        if (args.length < 2 || !APPS.containsKey(args[0])) {
            usage("name an application and a thread count");
        }
        Workload app = APPS.get(args[0]).get();
        int threads = positive("THREADS", args[1]);
        int units = app.defaultUnits();
        int warmup = 2;
        int iterations = 3;
        boolean preIterationGc = true;
        for (int i = 2; i < args.length; i += 2) {
            if (i + 1 >= args.length) {
                usage(args[i] + " needs a value");
            }
            switch (args[i]) {
                case "--units" -> units = positive("--units", args[i + 1]);
                case "--warmup" -> warmup = nonNegative("--warmup", args[i + 1]);
                case "--iterations" -> iterations = positive("--iterations", args[i + 1]);
                case "--pre-iteration-gc" -> preIterationGc = onOff("--pre-iteration-gc", args[i + 1]);
                default -> usage("unknown option " + args[i]);
            }
        }
        Path scratch = Files.createTempDirectory("hab-apps-" + app.name());
        try {
            run(app, threads, units, warmup, iterations, preIterationGc, scratch);
        } finally {
            try (Stream<Path> paths = Files.walk(scratch)) {
                paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }

    private static void run(Workload app, int threads, int units, int warmup, int iterations,
            boolean preIterationGc, Path scratch) throws Exception {
        app.setUp(scratch);
        int rounds = warmup + iterations;
        long[] checksums = new long[rounds];
        long[] elapsedNanos = new long[rounds];
        // The timed iterations' young and full collections and collection time, each
        // iteration's own (the collections before them left out), and each one's start.
        long[] timedCounts = new long[3];
        long[] countsAtStart = new long[3];
        long[] roundStart = new long[1];
        int[] round = new int[1];
        AtomicInteger next = new AtomicInteger();
        AtomicLong checksum = new AtomicLong();
        AtomicLong allocatedBytes = new AtomicLong();
        List<Throwable> failures = java.util.Collections.synchronizedList(new ArrayList<>());
        // The barrier's action runs in the last thread to arrive, before any is released: it
        // closes one round and opens the next, so the clock cannot be read late by a main
        // thread the scheduler left behind.
        CyclicBarrier barrier = new CyclicBarrier(threads, () -> {
            long now = System.nanoTime();
            int r = round[0];
            if (r > 0) {
                elapsedNanos[r - 1] = now - roundStart[0];
                checksums[r - 1] = checksum.getAndSet(0);
                if (r - 1 >= warmup) {
                    long[] counts = counts();
                    for (int k = 0; k < counts.length; k++) {
                        timedCounts[k] += counts[k] - countsAtStart[k];
                    }
                }
            }
            if (r == warmup) {
                allocatedBytes.set(0);
            }
            if (r < rounds) {
                if (preIterationGc) {
                    System.gc();
                }
                System.arraycopy(counts(), 0, countsAtStart, 0, countsAtStart.length);
            }
            next.set(0);
            round[0] = r + 1;
            roundStart[0] = System.nanoTime();
        });
        com.sun.management.ThreadMXBean counters =
                (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Path own = Files.createDirectories(scratch.resolve("worker-" + t));
            Thread worker = new Thread(() -> {
                try {
                    for (int r = 0; r <= rounds; r++) {
                        barrier.await();
                        if (r == rounds) {
                            break;
                        }
                        for (int u = next.getAndIncrement(); u < units; u = next.getAndIncrement()) {
                            long before = counters.getCurrentThreadAllocatedBytes();
                            long value = app.unit(u, own);
                            allocatedBytes.addAndGet(counters.getCurrentThreadAllocatedBytes() - before);
                            checksum.addAndGet(Checksums.placed(u, value));
                        }
                    }
                } catch (Throwable e) {
                    failures.add(e);
                    barrier.reset();
                }
            }, "app-worker-" + t);
            workers.add(worker);
            worker.start();
        }
        for (Thread worker : workers) {
            worker.join();
        }
        if (!failures.isEmpty()) {
            Throwable first = failures.stream()
                    .filter(e -> !(e instanceof java.util.concurrent.BrokenBarrierException))
                    .findFirst().orElse(failures.get(0));
            first.printStackTrace();
            System.exit(1);
        }
        long young = timedCounts[0];
        long full = timedCounts[1];
        long gcMillis = timedCounts[2];
        long[] timedMillis = new long[iterations];
        long timedNanos = 0;
        for (int i = 0; i < iterations; i++) {
            timedMillis[i] = elapsedNanos[warmup + i] / 1_000_000;
            timedNanos += elapsedNanos[warmup + i];
        }
        long[] sorted = timedMillis.clone();
        Arrays.sort(sorted);
        long first = checksums[0];
        boolean consistent = Arrays.stream(checksums).allMatch(c -> c == first);
        Long expected = Checksums.expected(app.name(), units);
        boolean ok = consistent && expected != null && expected == first;
        String status = !consistent ? "varies" : expected == null ? "unrecorded" : ok ? "ok" : "differs";
        StringBuilder line = new StringBuilder("hab-apps:");
        line.append(" app=").append(app.name())
            .append(" threads=").append(threads)
            .append(" units=").append(units)
            .append(" warmup=").append(warmup)
            .append(" iterations=").append(iterations)
            .append(" pre_iteration_gc=").append(preIterationGc ? "on" : "off")
            .append(" iteration_ms=").append(join(timedMillis))
            .append(" median_ms=").append(sorted[sorted.length / 2])
            .append(" young_collections=").append(young)
            .append(" full_collections=").append(full)
            .append(" gc_ms=").append(gcMillis)
            .append(" allocated_bytes=").append(allocatedBytes.get())
            .append(" allocated_mb_per_s=")
            .append(String.format(Locale.ROOT, "%.1f", allocatedBytes.get() / 1e6 / (timedNanos / 1e9)))
            .append(" checksum=0x").append(Long.toHexString(first))
            .append(" expected=").append(expected == null ? "none" : "0x" + Long.toHexString(expected))
            .append(" checksum_status=").append(status);
        if (!consistent) {
            for (int r = 0; r < rounds; r++) {
                System.err.println("round " + r + ": checksum 0x" + Long.toHexString(checksums[r]));
            }
        }
        System.out.println(line);
        if (!consistent || (expected != null && !ok)) {
            System.exit(1);
        }
    }

    /** Young collections, old and full ones, and the collections' milliseconds so far. */
    private static long[] counts() {
        return new long[] {collections(true), collections(false), gcMillis()};
    }

    /** Young (or old and full) collections so far, from the collectors' own counters. */
    static long collections(boolean young) {
        long total = 0;
        for (GarbageCollectorMXBean bean : ManagementFactory.getGarbageCollectorMXBeans()) {
            String name = bean.getName();
            boolean isYoung = name.contains("Scavenge") || name.contains("Young") || name.equals("Copy");
            if (isYoung == young) {
                total += Math.max(0, bean.getCollectionCount());
            }
        }
        return total;
    }

    static long gcMillis() {
        long total = 0;
        for (GarbageCollectorMXBean bean : ManagementFactory.getGarbageCollectorMXBeans()) {
            total += Math.max(0, bean.getCollectionTime());
        }
        return total;
    }

    private static String join(long[] values) {
        StringBuilder out = new StringBuilder();
        for (long v : values) {
            out.append(out.length() == 0 ? "" : ",").append(v);
        }
        return out.toString();
    }

    private static int positive(String what, String text) {
        int value = nonNegative(what, text);
        if (value == 0) {
            usage(what + " must be at least 1");
        }
        return value;
    }

    private static int nonNegative(String what, String text) {
        try {
            int value = Integer.parseInt(text);
            if (value >= 0 && value <= 100_000) {
                return value;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        usage(what + " must be a whole number from 0 to 100000, not '" + text + "'");
        return 0;
    }

    private static boolean onOff(String what, String text) {
        if (text.equals("on") || text.equals("off")) {
            return text.equals("on");
        }
        usage(what + " must be on or off, not '" + text + "'");
        return false;
    }

    private static void usage(String why) {
        System.err.println("hab.apps.Main: " + why);
        System.err.println("usage: hab.apps.Main APP THREADS [--units N] [--warmup N] [--iterations N] [--pre-iteration-gc on|off]");
        System.err.println("applications: " + String.join(", ", APPS.keySet()));
        System.exit(2);
    }
}
