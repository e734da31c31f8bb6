package hab.bench;

import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;

/** Collections so far, from the JVM's own counters. */
final class Gc {
    private Gc() {}

    static long collections() {
        long total = 0;
        for (GarbageCollectorMXBean bean : ManagementFactory.getGarbageCollectorMXBeans()) {
            total += Math.max(0, bean.getCollectionCount());
        }
        return total;
    }
}
