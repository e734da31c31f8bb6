package hab.bench;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * The Computer Language Benchmarks Game's binary-trees: prints the reference lines on standard
 * output and {@code elapsed_ms=...} on standard error. {@code BinaryTrees DEPTH [THREADS]}: with
 * several threads the depths are shared among them, as in the C example runtime's program.
 */
public final class BinaryTrees {
    private static final int MIN_DEPTH = 4;

    private static final class Node {
        Node left, right;

        Node(Node left, Node right) {
            this.left = left;
            this.right = right;
        }

        int check() {
            return left == null ? 1 : 1 + left.check() + right.check();
        }
    }

    private static Node bottomUp(int depth) {
        return depth > 0 ? new Node(bottomUp(depth - 1), bottomUp(depth - 1)) : new Node(null, null);
    }

    public static void main(String[] args) {
        int n = args.length > 0 ? Integer.parseInt(args[0]) : 10;
        int threads = args.length > 1 ? Math.max(1, Integer.parseInt(args[1])) : 1;
        System.err.println("timed_round=start");
        long collections = Gc.collections();
        long started = System.nanoTime();
        int maxDepth = Math.max(MIN_DEPTH + 2, n);
        int stretchDepth = maxDepth + 1;
        System.out.println("stretch tree of depth " + stretchDepth + "\t check: " + bottomUp(stretchDepth).check());
        Node longLived = bottomUp(maxDepth);
        long[] checks = new long[maxDepth + 1];
        AtomicInteger nextDepth = new AtomicInteger(MIN_DEPTH);
        Runnable worker = () -> {
            for (int depth = nextDepth.getAndAdd(2); depth <= maxDepth; depth = nextDepth.getAndAdd(2)) {
                int iterations = 1 << (maxDepth - depth + MIN_DEPTH);
                long check = 0;
                for (int i = 0; i < iterations; i++) {
                    check += bottomUp(depth).check();
                }
                checks[depth] = check;
            }
        };
        Thread[] workers = new Thread[threads];
        for (int i = 0; i < threads; i++) {
            workers[i] = new Thread(worker);
            workers[i].start();
        }
        for (Thread thread : workers) {
            try {
                thread.join();
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        }
        for (int depth = MIN_DEPTH; depth <= maxDepth; depth += 2) {
            int iterations = 1 << (maxDepth - depth + MIN_DEPTH);
            System.out.println(iterations + "\t trees of depth " + depth + "\t check: " + checks[depth]);
        }
        System.out.println("long lived tree of depth " + maxDepth + "\t check: " + longLived.check());
        double elapsedMs = (System.nanoTime() - started) / 1e6;
        System.err.println("timed_round=end");
        System.err.println("elapsed_ms=" + elapsedMs);
        System.err.println("collections=" + (Gc.collections() - collections));
    }
}
