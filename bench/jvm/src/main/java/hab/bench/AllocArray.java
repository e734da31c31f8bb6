package hab.bench;

import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.*;

/**
 * Shipilëv's experiment: allocate {@code size} 16-byte objects and keep each in an array, so
 * that nothing dies and the time is the allocation path's (run it with Epsilon GC and
 * {@code -XX:EpsilonTLABSize}, or {@code -XX:-UseTLAB}). The array is allocated once, before
 * the timed invocations, as Hab's {@code alloc-array} allocates its own: each invocation times
 * the objects and the stores of their references, nothing else.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SingleShotTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
public class AllocArray {
    @Param("50000000")
    public int size;

    private Object[] objects;

    @Setup(Level.Trial)
    public void allocateArray() {
        objects = new Object[size];
    }

    @Benchmark
    public Object[] allocate() {
        Object[] objects = this.objects;
        for (int i = 0; i < objects.length; i++) {
            objects[i] = new Object();
        }
        return objects;
    }
}
