package statekeeper.harness;

import java.io.File;
import java.io.FileInputStream;
import java.io.InputStream;
import java.util.Properties;

/**
 * Restore verifier: restores the deterministic job from a snapshot directory (possibly a copy),
 * runs until one new checkpoint completes into a fresh directory, cancels, and exits 0 only if
 * the state that came back is exactly what the input implies.
 *
 * <p>Usage: {@code Verify <plan.properties> <job> <snapshot-dir> <fresh-checkpoint-root>}. The
 * restore is always NO_CLAIM: verifying a snapshot must never delete any of its files.
 */
public final class Verify {
    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: Verify <plan.properties> <job> <snapshot-dir> <fresh-checkpoint-root>");
            System.exit(2);
        }
        Properties plan = new Properties();
        try (InputStream in = new FileInputStream(args[0])) {
            plan.load(in);
        }
        String job = args[1];
        plan.setProperty(job + ".checkpoints", "1");
        // One checkpoint is all we wait for: take it soon after the restored job runs.
        plan.setProperty(job + ".interval_ms", "300");
        plan.setProperty(job + ".claim_mode", "NO_CLAIM");
        plan.setProperty(job + ".savepoints", "");
        JobSpec spec = JobSpec.parse(job, plan);
        File fresh = new File(args[3]);
        File snapshot = new File(args[2]);
        JobRunner.Outcome out = JobRunner.run(spec, fresh, new File(fresh, "savepoints"),
                snapshot.getAbsolutePath());
        long restoredNext = Probe.GATE_RESTORED_NEXT.get();
        long firstElement = Probe.GATE_FIRST_ELEMENT.get();
        String verdict;
        if (out.failure != null) {
            verdict = "FAIL: restore or run failed: " + JobRunner.describe(out.failure);
        } else if (!Probe.VIOLATIONS.isEmpty()) {
            verdict = "FAIL: invariant violated: " + Probe.VIOLATIONS;
        } else if (restoredNext <= 0 || firstElement != restoredNext) {
            verdict = "FAIL: operator state not restored (restored next element " + restoredNext
                    + ", first element after restore " + firstElement + ")";
        } else if (Probe.KEYED_RESTORE_CHECKS.get() == 0) {
            verdict = "FAIL: no key found restored keyed state";
        } else if (Probe.TALLY_RESTORED.get() != spec.tallyParallelism
                || Probe.TALLY_UNION_OK.get() != spec.tallyParallelism) {
            verdict = "FAIL: tally union state restored in " + Probe.TALLY_UNION_OK.get() + " of "
                    + spec.tallyParallelism + " subtasks";
        } else if (out.completed.isEmpty()) {
            verdict = "FAIL: no checkpoint completed after restore";
        } else {
            verdict = "OK: restored at element " + restoredNext + "; " + Probe.KEYED_RESTORE_CHECKS.get()
                    + " keys matched restored count and map state (" + Probe.KEYED_FRESH_KEYS.get()
                    + " keys new); tally union complete in " + Probe.TALLY_UNION_OK.get()
                    + " subtasks; new checkpoint(s) " + out.completed + " in " + out.jobDir;
        }
        System.out.println("[verify] " + verdict);
        System.exit(verdict.startsWith("OK") ? 0 : 1);
    }
}
