package hab.apps;

import java.nio.file.Path;

/**
 * One application of the suite. An iteration runs {@link #units()} units of work, taken by the
 * worker threads from a shared counter; each unit is deterministic and self-contained (its own
 * database, index or compile), so its checksum is the same whichever thread runs it and however
 * many threads there are.
 */
interface Workload {
    /** The name the harness and the report use. */
    String name();

    /** Units of work in one iteration unless the command line says otherwise. */
    int defaultUnits();

    /** Prepares what every unit reads (untimed): generated input, a shared index. */
    void setUp(Path scratch) throws Exception;

    /** Runs unit {@code index}; its checksum. {@code scratch} is this thread's own folder. */
    long unit(int index, Path scratch) throws Exception;
}
