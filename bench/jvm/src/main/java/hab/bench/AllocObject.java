package hab.bench;

import java.util.concurrent.TimeUnit;
import java.util.function.IntSupplier;
import org.openjdk.jmh.annotations.*;
import org.openjdk.jmh.infra.Blackhole;

/**
 * Jaffer's experiment: allocate an object of 16, 48 or 144 bytes (with compressed class
 * pointers: a 12-byte header and int fields) and drop it; the collector reclaims the space.
 * The blackhole keeps the allocation from being optimised away.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class AllocObject {
    /** 12-byte header, padded to 16. */
    static final class Object16 {}

    /** 12-byte header and 9 ints: 48 bytes. */
    static final class Object48 {
        int a0, a1, a2, a3, a4, a5, a6, a7, a8;
    }

    /** 12-byte header and 33 ints: 144 bytes. */
    static final class Object144 {
        int a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16;
        int b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15;
    }

    @Benchmark
    public void bytes16(Blackhole hole) {
        hole.consume(new Object16());
    }

    @Benchmark
    public void bytes48(Blackhole hole) {
        hole.consume(new Object48());
    }

    @Benchmark
    public void bytes144(Blackhole hole) {
        hole.consume(new Object144());
    }

    int captured;

    /**
     * A capturing lambda (16 bytes): C2 allocates it inline, C1 through a call of
     * Unsafe.allocateInstance, that is, in the runtime, as the VM allocates its own objects.
     */
    @Benchmark
    public void lambda16(Blackhole hole) {
        int value = captured++;
        IntSupplier supplier = () -> value;
        hole.consume(supplier);
    }
}
