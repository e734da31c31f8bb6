/*
 * Part of Hab's checks of HotSpot with HABs (jvm/hotspot/flip-check.sh). Free software under the
 * GNU General Public License version 2 only, with the Classpath exception; see
 * jvm/hotspot/LICENSE in Hab's repository.
 */

import java.util.concurrent.atomic.AtomicBoolean;

/**
 * THREADS threads allocate small arrays, keeping a few alive, each at most about 25 KB a
 * millisecond (a pause of 1 ms every 256 arrays), while the main thread asks for
 * COLLECTIONS explicit collections (System.gc()), one every PAUSE_MS milliseconds, the first as
 * soon as the threads have started: each cuts a cycle short, with the threads' TLABs just
 * refilled and mostly unused.
 */
public final class ExplicitCollections {
    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        int collections = Integer.parseInt(args[1]);
        int pauseMillis = Integer.parseInt(args[2]);
        AtomicBoolean done = new AtomicBoolean();
        Thread[] workers = new Thread[threads];
        long[] sums = new long[threads];
        for (int t = 0; t < threads; t++) {
            int own = t;
            workers[t] = new Thread(() -> {
                Object[] ring = new Object[64];
                long seed = own + 1;
                long sum = 0;
                for (int i = 0; !done.get(); i++) {
                    seed = seed * 6364136223846793005L + 1442695040888963407L;
                    int[] array = new int[(int) ((seed >>> 58) + 2)];
                    array[0] = i;
                    ring[i & 63] = array;
                    sum += array.length;
                    if ((i & 255) == 255) {
                        try {
                            Thread.sleep(1);
                        } catch (InterruptedException e) {
                            return;
                        }
                    }
                }
                sums[own] = sum + ring.length;
            });
            workers[t].start();
        }
        for (int c = 0; c < collections; c++) {
            System.gc();
            Thread.sleep(pauseMillis);
        }
        done.set(true);
        long total = 0;
        for (int t = 0; t < threads; t++) {
            workers[t].join();
            total += sums[t];
        }
        System.out.println("explicit-collections: threads=" + threads + " collections=" + collections
                + " allocated_ints=" + total);
    }
}
