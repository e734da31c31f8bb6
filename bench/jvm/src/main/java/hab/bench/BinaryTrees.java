package hab.bench;

/**
 * The Computer Language Benchmarks Game's binary-trees, single-threaded: prints the reference
 * lines on standard output and {@code elapsed_ms=...} on standard error.
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
        System.err.println("timed_round=start");
        long started = System.nanoTime();
        int maxDepth = Math.max(MIN_DEPTH + 2, n);
        int stretchDepth = maxDepth + 1;
        System.out.println("stretch tree of depth " + stretchDepth + "\t check: " + bottomUp(stretchDepth).check());
        Node longLived = bottomUp(maxDepth);
        for (int depth = MIN_DEPTH; depth <= maxDepth; depth += 2) {
            int iterations = 1 << (maxDepth - depth + MIN_DEPTH);
            long check = 0;
            for (int i = 0; i < iterations; i++) {
                check += bottomUp(depth).check();
            }
            System.out.println(iterations + "\t trees of depth " + depth + "\t check: " + check);
        }
        System.out.println("long lived tree of depth " + maxDepth + "\t check: " + longLived.check());
        double elapsedMs = (System.nanoTime() - started) / 1e6;
        System.err.println("timed_round=end");
        System.err.println("elapsed_ms=" + elapsedMs);
        System.err.println("collections=" + Gc.collections());
    }
}
