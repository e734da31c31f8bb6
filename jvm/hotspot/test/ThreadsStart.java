/*
 * Part of Hab's checks of HotSpot with HABs (jvm/hotspot/flip-check.sh). Free software under the
 * GNU General Public License version 2 only, with the Classpath exception; see
 * jvm/hotspot/LICENSE in Hab's repository.
 */

/**
 * The main thread allocates alone for ALONE_MS milliseconds, so that HotSpot sizes TLABs for one
 * allocating thread; then THREADS threads start at once and allocate for RUN_MS milliseconds,
 * each at most about 25 KB a millisecond (a pause of 1 ms every 256 arrays), so that every one
 * of them runs in every cycle. At the first collection after they start, their TLABs, sized for
 * one thread, leave large tails once; at that collection HotSpot resizes them for the threads
 * that ran, and the tails after it are the threads' steady state. Each thread keeps a few of
 * its arrays alive.
 */
public final class ThreadsStart {
    /**
     * Allocates small arrays until `deadline` (System.nanoTime), pausing 1 ms every 256 if
     * `paced`; returns a sum of what it allocated.
     */
    static long allocate(long seed, long deadline, boolean paced) throws InterruptedException {
        Object[] ring = new Object[64];
        long sum = 0;
        for (int i = 1; (i & 255) != 0 || System.nanoTime() < deadline; i++) {
            seed = seed * 6364136223846793005L + 1442695040888963407L;
            int[] array = new int[(int) ((seed >>> 58) + 2)];
            array[0] = i;
            ring[i & 63] = array;
            sum += array.length;
            if (paced && (i & 255) == 0) {
                Thread.sleep(1);
            }
        }
        return sum + ring.length;
    }

    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        long aloneMillis = Long.parseLong(args[1]);
        long runMillis = Long.parseLong(args[2]);
        long total = allocate(1, System.nanoTime() + aloneMillis * 1_000_000L, false);
        Thread[] workers = new Thread[threads];
        long[] sums = new long[threads];
        long deadline = System.nanoTime() + runMillis * 1_000_000L;
        for (int t = 0; t < threads; t++) {
            int own = t;
            workers[t] = new Thread(() -> {
                try {
                    sums[own] = allocate(own + 2, deadline, true);
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            });
        }
        for (Thread worker : workers) {
            worker.start();
        }
        for (int t = 0; t < threads; t++) {
            workers[t].join();
            total += sums[t];
        }
        System.out.println("threads-start: threads=" + threads + " allocated_ints=" + total);
    }
}
