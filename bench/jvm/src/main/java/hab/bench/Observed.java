package hab.bench;

import java.lang.management.ManagementFactory;
import java.util.Arrays;

/**
 * One thread allocating small objects and arrays as fast as it can, the loop that shows an
 * allocation path's cost per object (and what an observer of the allocations adds to it): per
 * object an instance of 16 or 24 bytes or an {@code int[]} of 0 to 7 elements, the last 64
 * kept in a ring so that the compiler cannot drop them. Prints one line per round on standard
 * error ({@code round=1 ns_per_object=3.02}), then the median, the thread's allocated bytes
 * over the rounds and since it started ({@code ThreadMXBean.getThreadAllocatedBytes}) and a
 * checksum of what the objects held, the same in every configuration. Arguments: rounds, objects per round in millions.
 */
public final class Observed {
    static final class Small {
        int value;

        Small(int value) {
            this.value = value;
        }
    }

    static final class Pair {
        final long first;
        final int second;

        Pair(long first, int second) {
            this.first = first;
            this.second = second;
        }
    }

    private static final Object[] RING = new Object[64];

    /** Allocates {@code count} objects; returns a checksum of what they held. */
    static long allocate(long count, long seed) {
        long sum = 0;
        int at = 0;
        for (long i = 0; i < count; i++) {
            int kind = (int) ((i + seed) % 3);
            int value = (int) (i & 7);
            Object object;
            if (kind == 0) {
                Small small = new Small(value);
                sum += small.value;
                object = small;
            } else if (kind == 1) {
                Pair pair = new Pair(i, value);
                sum += pair.second;
                object = pair;
            } else {
                int[] array = new int[value];
                sum += array.length;
                object = array;
            }
            RING[at] = object;
            at = (at + 1) & 63;
        }
        return sum;
    }

    public static void main(String[] args) {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 10;
        long objects = (long) ((args.length > 1 ? Double.parseDouble(args[1]) : 10) * 1_000_000);
        com.sun.management.ThreadMXBean threads =
                (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        long thread = Thread.currentThread().getId();
        // Warm-up: C2 compiles the loop.
        long checksum = allocate(objects, 0);
        long allocatedBefore = threads.getThreadAllocatedBytes(thread);
        double[] nanosPerObject = new double[rounds];
        for (int round = 0; round < rounds; round++) {
            long start = System.nanoTime();
            checksum += allocate(objects, round);
            nanosPerObject[round] = (double) (System.nanoTime() - start) / objects;
            System.err.printf("round=%d ns_per_object=%.2f%n", round + 1, nanosPerObject[round]);
        }
        long allocated = threads.getThreadAllocatedBytes(thread) - allocatedBefore;
        double[] sorted = nanosPerObject.clone();
        Arrays.sort(sorted);
        System.err.printf("ns_per_object_median=%.2f allocated_bytes=%d thread_allocated_bytes=%d "
                + "checksum=%d%n", sorted[rounds / 2], allocated,
                threads.getThreadAllocatedBytes(thread), checksum);
    }
}
