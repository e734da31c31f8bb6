package hab.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.LinkedBlockingQueue;

/**
 * A VolanoMark-like chat, as in Hab's VM: rooms of 20 connection threads, each blocked on its
 * inbox most of the time; each sends its messages one per turn to the 19 others, copies every
 * message it receives into a new object and keeps the last 4. Prints
 * {@code messages_per_sec=...} on standard error. Arguments: rooms, messages per connection.
 */
public final class Chat {
    static final int ROOM_SIZE = 20;
    static final int KEPT = 4;

    record Message(byte[] text, long length) {}

    static long connection(int id, int messages, List<BlockingQueue<byte[]>> peers, BlockingQueue<byte[]> inbox)
            throws InterruptedException {
        Warehouses.Rng rng = new Warehouses.Rng(id + 1);
        Message[] history = new Message[KEPT];
        long expected = (long) peers.size() * messages;
        long received = 0;
        int sent = 0;
        while (sent < messages || received < expected) {
            if (sent < messages) {
                byte[] text = new byte[32 + rng.below(160)];
                for (int i = 0; i < text.length; i++) {
                    text[i] = (byte) (id + sent + i);
                }
                for (BlockingQueue<byte[]> peer : peers) {
                    peer.put(text.clone());
                }
                sent++;
            }
            if (received < expected) {
                byte[] bytes = inbox.take();
                history[(int) (received % KEPT)] = new Message(bytes.clone(), bytes.length);
                received++;
                for (byte[] more; (more = inbox.poll()) != null; received++) {
                    history[(int) (received % KEPT)] = new Message(more.clone(), more.length);
                }
            }
        }
        return received;
    }

    public static void main(String[] args) throws Exception {
        int rooms = args.length > 0 ? Integer.parseInt(args[0]) : 10;
        int messages = args.length > 1 ? Integer.parseInt(args[1]) : 40;
        // An untimed round first, so that the timed one runs compiled code, as Hab's does.
        round(rooms, messages);
        System.err.println("timed_round=start");
        long collections = Gc.collections();
        double rate = round(rooms, messages);
        System.err.println("timed_round=end");
        System.err.println("messages_per_sec=" + rate);
        System.err.println("collections=" + (Gc.collections() - collections));
    }

    /** One round; returns the messages delivered per second. */
    static double round(int rooms, int messages) throws Exception {
        int connections = rooms * ROOM_SIZE;
        // The clock is read by the barriers' actions, in the last thread to arrive before any
        // is released: with more threads than CPUs the main thread may run only after the
        // connections have begun (or ended), so it cannot read the clock itself.
        long[] startedNanos = new long[1];
        long[] finishedNanos = new long[1];
        CyclicBarrier start = new CyclicBarrier(connections + 1, () -> startedNanos[0] = System.nanoTime());
        CyclicBarrier done = new CyclicBarrier(connections, () -> finishedNanos[0] = System.nanoTime());
        long[] received = new long[connections];
        List<Thread> threads = new ArrayList<>();
        for (int room = 0; room < rooms; room++) {
            List<BlockingQueue<byte[]>> inboxes = new ArrayList<>();
            for (int seat = 0; seat < ROOM_SIZE; seat++) {
                inboxes.add(new LinkedBlockingQueue<>());
            }
            for (int seat = 0; seat < ROOM_SIZE; seat++) {
                int id = room * ROOM_SIZE + seat;
                List<BlockingQueue<byte[]>> peers = new ArrayList<>(inboxes);
                BlockingQueue<byte[]> inbox = peers.remove(seat);
                Thread thread = new Thread(null, () -> {
                    try {
                        start.await();
                        received[id] = connection(id, messages, peers, inbox);
                        done.await();
                    } catch (Exception e) {
                        // Release the others: a broken barrier ends the round (checked below).
                        start.reset();
                        done.reset();
                        throw new RuntimeException(e);
                    }
                }, "chat-" + id, 256 << 10);
                thread.start();
                threads.add(thread);
            }
        }
        start.await();
        for (Thread thread : threads) {
            thread.join();
        }
        if (finishedNanos[0] == 0) {
            throw new IllegalStateException("a connection failed: the round has no time");
        }
        double seconds = (finishedNanos[0] - startedNanos[0]) / 1e9;
        long delivered = 0;
        for (long r : received) {
            delivered += r;
        }
        System.out.println(rooms + " rooms, " + connections + " connections: " + delivered + " messages delivered");
        return delivered / seconds;
    }
}
