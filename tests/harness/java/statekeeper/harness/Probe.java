package statekeeper.harness;

import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentSkipListSet;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;

/**
 * What the running job observed, shared with the driver thread.
 *
 * <p>The MiniCluster runs tasks in this JVM and, with no user jars, its user-code class loader
 * delegates to the application class loader, so these statics are the same ones the driver reads.
 * Reset before every job.
 */
public final class Probe {
    /** Checkpoint ids for which the job received notifyCheckpointComplete. */
    public static final Set<Long> COMPLETED = new ConcurrentSkipListSet<>();
    /** Invariant violations (the operator also throws, failing the job). */
    public static final List<String> VIOLATIONS = new CopyOnWriteArrayList<>();
    /** Sequence gate: next element restored from operator state (-1: not restored). */
    public static final AtomicLong GATE_RESTORED_NEXT = new AtomicLong(-1);
    /** Sequence gate: first element seen after (re)start (-1: none yet). */
    public static final AtomicLong GATE_FIRST_ELEMENT = new AtomicLong(-1);
    /** Keys whose first element after restore found restored state matching the input. */
    public static final AtomicLong KEYED_RESTORE_CHECKS = new AtomicLong();
    /** Keys whose first element after restore found NO state (only legal for a fresh job). */
    public static final AtomicLong KEYED_FRESH_KEYS = new AtomicLong();
    /** Tally subtasks whose union state held every subtask of the snapshot. */
    public static final AtomicLong TALLY_UNION_OK = new AtomicLong();
    /** Tally subtasks that were restored (context.isRestored()). */
    public static final AtomicLong TALLY_RESTORED = new AtomicLong();

    private Probe() {}

    public static void reset() {
        COMPLETED.clear();
        VIOLATIONS.clear();
        GATE_RESTORED_NEXT.set(-1);
        GATE_FIRST_ELEMENT.set(-1);
        KEYED_RESTORE_CHECKS.set(0);
        KEYED_FRESH_KEYS.set(0);
        TALLY_UNION_OK.set(0);
        TALLY_RESTORED.set(0);
    }

    static void violation(String message) {
        VIOLATIONS.add(message);
        throw new IllegalStateException("statekeeper harness invariant violated: " + message);
    }
}
