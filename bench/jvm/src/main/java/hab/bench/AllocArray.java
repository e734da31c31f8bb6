package hab.bench;

import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.*;

/**
 * Shipilëv's experiment: allocate {@code size} 16-byte objects and keep each in an array, so
 * that nothing dies and the time is the allocation path's (run it with Epsilon GC and
 * {@code -XX:EpsilonTLABSize}, or {@code -XX:-UseTLAB}).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SingleShotTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
public class AllocArray {
    @Param("50000000")
    public int size;

    @Benchmark
    public Object[] allocate() {
        Object[] objects = new Object[size];
        for (int i = 0; i < objects.length; i++) {
            objects[i] = new Object();
        }
        return objects;
    }
}
