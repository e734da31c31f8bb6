/*
 * Part of Hab's checks of HotSpot with HABs (jvm/hotspot/features.sh). Free software under the
 * GNU General Public License version 2 only, with the Classpath exception; see
 * jvm/hotspot/LICENSE in Hab's repository.
 */

import java.util.concurrent.Executors;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
import java.util.ArrayList;
import java.util.List;

/**
 * Objects of every shape the allocation paths make (instances of 0 to 6 fields, arrays of four
 * element types and many lengths, some over HABCPULABObjectLimit), each checked as soon as it
 * is made and again later: its class, its length, its fields still zero or still what was
 * written, its identity hash and its lock (both kept in the mark word), so that a wrong header
 * from any tier (the interpreter, C1, C2 and HAB's stubs) fails here or in the heap
 * verification. Run by THREADS platform threads or, with "virtual", by THREADS virtual threads
 * that yield every YIELD_EVERY objects (each may resume on another carrier, in another TLAB and
 * on another CPU). Prints "checksum 0x..." (the same whatever the scheduling) and exits 1 at
 * the first wrong object.
 *
 * Usage: java Headers platform|virtual THREADS OBJECTS_PER_THREAD YIELD_EVERY
 */
public final class Headers {
    static final class F0 {
        int tag() { return 0; }
    }

    static final class F1 {
        long a;
        int tag() { return 1; }
    }

    static final class F3 {
        long a; int b; Object c;
        int tag() { return 3; }
    }

    static final class F6 {
        long a, b, c; int d; Object e, f;
        int tag() { return 6; }
    }

    static void fail(String what) {
        System.out.println("wrong object: " + what);
        System.out.flush();
        Runtime.getRuntime().halt(1);
    }

    /** One thread's work: `objects` objects from `seed`; returns its checksum. */
    static long run(long seed, int objects, int yieldEvery) {
        Object[] kept = new Object[97];
        long sum = 0;
        for (int i = 1; i <= objects; i++) {
            seed = seed * 6364136223846793005L + 1442695040888963407L;
            int kind = (int) ((seed >>> 60) & 7);
            int length = (int) ((seed >>> 40) & 63) + ((seed & 0xf00) == 0 ? 300 : 0);
            Object made;
            switch (kind) {
                case 0: {
                    F0 o = new F0();
                    if (o.getClass() != F0.class || o.tag() != 0) fail("F0");
                    made = o;
                    break;
                }
                case 1: {
                    F1 o = new F1();
                    if (o.a != 0) fail("F1 not zero");
                    o.a = i;
                    made = o;
                    break;
                }
                case 2: {
                    F3 o = new F3();
                    if (o.a != 0 || o.b != 0 || o.c != null) fail("F3 not zero");
                    o.a = i; o.b = i; o.c = o;
                    made = o;
                    break;
                }
                case 3: {
                    F6 o = new F6();
                    if (o.a != 0 || o.b != 0 || o.c != 0 || o.d != 0 || o.e != null || o.f != null) {
                        fail("F6 not zero");
                    }
                    o.a = i; o.f = o;
                    made = o;
                    break;
                }
                case 4: {
                    int[] a = new int[length];
                    for (int j = 0; j < a.length; j++) if (a[j] != 0) fail("int[] not zero");
                    if (length > 0) a[length - 1] = i;
                    made = a;
                    break;
                }
                case 5: {
                    long[] a = new long[length];
                    for (int j = 0; j < a.length; j++) if (a[j] != 0) fail("long[] not zero");
                    if (length > 0) a[0] = i;
                    made = a;
                    break;
                }
                case 6: {
                    byte[] a = new byte[length * 3 + 1];
                    for (int j = 0; j < a.length; j++) if (a[j] != 0) fail("byte[] not zero");
                    a[a.length - 1] = (byte) i;
                    made = a;
                    break;
                }
                default: {
                    Object[] a = new Object[length];
                    for (int j = 0; j < a.length; j++) if (a[j] != null) fail("Object[] not null");
                    if (length > 0) a[length / 2] = a;
                    made = a;
                    break;
                }
            }
            // The mark word: an identity hash and a lock on a fresh object.
            int hash = System.identityHashCode(made);
            synchronized (made) {
                sum += kind;
            }
            if (System.identityHashCode(made) != hash) fail("identity hash changed");
            Object old = kept[i % kept.length];
            if (old != null) sum += check(old);
            kept[i % kept.length] = made;
            if (yieldEvery > 0 && i % yieldEvery == 0) Thread.yield();
        }
        for (Object o : kept) if (o != null) sum += check(o);
        return sum;
    }

    /** What an object kept for a while still holds. */
    static long check(Object o) {
        if (o instanceof F0 f) return f.tag();
        if (o instanceof F1 f) return f.a + f.tag();
        if (o instanceof F3 f) {
            if (f.c != f || f.a != f.b) fail("F3 fields");
            return f.a + f.tag();
        }
        if (o instanceof F6 f) {
            if (f.f != f || f.e != null) fail("F6 fields");
            return f.a + f.tag();
        }
        if (o instanceof int[] a) return a.length + (a.length > 0 ? a[a.length - 1] : 0);
        if (o instanceof long[] a) return a.length + (a.length > 0 ? a[0] : 0);
        if (o instanceof byte[] a) return a.length + a[a.length - 1];
        if (o instanceof Object[] a) {
            if (a.length > 0 && a[a.length / 2] != a) fail("Object[] element");
            return a.length;
        }
        fail("unknown class " + o.getClass());
        return 0;
    }

    public static void main(String[] args) throws Exception {
        boolean virtual = args[0].equals("virtual");
        int threads = Integer.parseInt(args[1]);
        int objects = Integer.parseInt(args[2]);
        int yieldEvery = Integer.parseInt(args[3]);
        long total = 0;
        try (ExecutorService pool = virtual ? Executors.newVirtualThreadPerTaskExecutor()
                                            : Executors.newFixedThreadPool(threads)) {
            List<Future<Long>> results = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                final long seed = 0x9e3779b97f4a7c15L * (t + 1);
                results.add(pool.submit(() -> run(seed, objects, yieldEvery)));
            }
            for (Future<Long> r : results) total += r.get();
        }
        System.out.printf("checksum 0x%x%n", total);
    }
}
