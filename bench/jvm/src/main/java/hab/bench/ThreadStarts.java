package hab.bench;

import java.util.Arrays;

/**
 * What a thread's start costs: {@code ThreadStarts THREADS ROUNDS} starts THREADS threads one
 * after another, each allocating one small object (so that it gets its TLAB, and with HABs its
 * rseq registration where Hab owns it) before it ends, and joins each before starting the next;
 * prints {@code us_per_thread=} (the median over ROUNDS, after one round of warm-up) and every
 * round's figure on {@code rounds_us_per_thread=}.
 */
public final class ThreadStarts {
    private static volatile Object sink;

    public static void main(String[] args) throws InterruptedException {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 2000;
        int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 5;
        double[] perThreadMicros = new double[rounds];
        for (int round = -1; round < rounds; round++) {
            long started = System.nanoTime();
            for (int t = 0; t < threads; t++) {
                Thread thread = new Thread(() -> sink = new int[4]);
                thread.start();
                thread.join();
            }
            double micros = (System.nanoTime() - started) / 1e3 / threads;
            if (round >= 0) {
                perThreadMicros[round] = micros;
            }
        }
        double[] sorted = perThreadMicros.clone();
        Arrays.sort(sorted);
        System.out.printf("us_per_thread=%.2f%n", sorted[rounds / 2]);
        System.out.println("rounds_us_per_thread=" + Arrays.toString(perThreadMicros));
    }
}
