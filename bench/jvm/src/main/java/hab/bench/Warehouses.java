package hab.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CyclicBarrier;

/**
 * SPECjbb-like warehouses, as in Hab's VM: each thread creates orders of 5 to 15 lines over
 * its stock, keeps the last {@code live} orders, updates one at random and computes. Prints
 * {@code orders_per_sec=...} on standard error. Arguments: threads, orders per thread, live
 * orders.
 */
public final class Warehouses {
    static final int STOCK_ITEMS = 100;

    record Item(long price, long inStock) {}

    static final class Line {
        final Item item;
        final long quantity, amount;

        Line(Item item, long quantity) {
            this.item = item;
            this.quantity = quantity;
            this.amount = quantity * item.price();
        }
    }

    static final class Customer {
        final byte[] name;

        Customer(int length) {
            this.name = new byte[length];
        }
    }

    static final class Order {
        final Line[] lines;
        final Customer customer;
        final long id;
        long total;

        Order(Line[] lines, Customer customer, long id) {
            this.lines = lines;
            this.customer = customer;
            this.id = id;
            this.total = total();
        }

        long total() {
            long sum = 0;
            for (Line line : lines) {
                sum += line.amount;
            }
            return sum;
        }
    }

    /** xorshift64*, as Hab's workloads. */
    static final class Rng {
        long state;

        Rng(long seed) {
            state = (seed * 0x9e3779b97f4a7c15L) | 1;
        }

        long next() {
            long x = state;
            x ^= x >>> 12;
            x ^= x << 25;
            x ^= x >>> 27;
            state = x;
            return x * 0x2545f4914f6cdd1dL;
        }

        int below(int n) {
            return (int) Long.remainderUnsigned(next(), n);
        }
    }

    static long warehouse(int index, long orders, int live) {
        Rng rng = new Rng(index + 1);
        Item[] stock = new Item[STOCK_ITEMS];
        for (int i = 0; i < STOCK_ITEMS; i++) {
            stock[i] = new Item(100 + i, 1_000_000);
        }
        Order[] kept = new Order[live];
        for (long id = 0; id < orders; id++) {
            Line[] lines = new Line[5 + rng.below(11)];
            for (int i = 0; i < lines.length; i++) {
                lines[i] = new Line(stock[rng.below(STOCK_ITEMS)], 1 + rng.below(10));
            }
            Order order = new Order(lines, new Customer(16 + rng.below(32)), id);
            kept[rng.below(live)] = order;
            Order other = kept[rng.below(live)];
            if (other != null) {
                other.total = other.total();
            }
            long x = rng.next();
            for (int i = 0; i < 200; i++) {
                x = Long.rotateLeft(x, 7) ^ (x * 31);
            }
            if (x == 42) {
                System.out.print("");
            }
        }
        long checksum = 0;
        for (Order order : kept) {
            if (order != null) {
                checksum += order.total();
            }
        }
        return checksum;
    }

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 8;
        long orders = args.length > 1 ? Long.parseLong(args[1]) : 20_000;
        int live = args.length > 2 ? Integer.parseInt(args[2]) : 25;
        // An untimed round first, so that the timed one runs compiled code, as Hab's does.
        round(threads, orders, live);
        System.err.println("timed_round=start");
        long collections = Gc.collections();
        double seconds = round(threads, orders, live);
        System.err.println("timed_round=end");
        System.err.println("orders_per_sec=" + threads * orders / seconds);
        System.err.println("collections=" + (Gc.collections() - collections));
    }

    /** One round: every warehouse on its own thread; returns the seconds it took. */
    static double round(int threads, long orders, int live) throws Exception {
        // The clock is read by the barriers' actions, in the last thread to arrive before any
        // is released: with more threads than CPUs the main thread may run only after the
        // warehouses have begun (or ended), so it cannot read the clock itself.
        long[] startedNanos = new long[1];
        long[] finishedNanos = new long[1];
        CyclicBarrier start = new CyclicBarrier(threads + 1, () -> startedNanos[0] = System.nanoTime());
        CyclicBarrier done = new CyclicBarrier(threads, () -> finishedNanos[0] = System.nanoTime());
        long[] checksums = new long[threads];
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int index = t;
            Thread worker = new Thread(() -> {
                try {
                    start.await();
                    checksums[index] = warehouse(index, orders, live);
                    done.await();
                } catch (Exception e) {
                    // Release the others: a broken barrier ends the round (checked below).
                    start.reset();
                    done.reset();
                    throw new RuntimeException(e);
                }
            });
            worker.start();
            workers.add(worker);
        }
        start.await();
        for (Thread worker : workers) {
            worker.join();
        }
        if (finishedNanos[0] == 0) {
            throw new IllegalStateException("a warehouse failed: the round has no time");
        }
        double seconds = (finishedNanos[0] - startedNanos[0]) / 1e9;
        long checksum = 0;
        for (long c : checksums) {
            checksum += c;
        }
        System.out.println(threads + " warehouses processed " + threads * orders + " orders (checksum 0x" + Long.toHexString(checksum) + ")");
        return seconds;
    }
}
