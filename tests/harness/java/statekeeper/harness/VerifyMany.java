package statekeeper.harness;

import java.io.BufferedWriter;
import java.io.File;
import java.io.FileInputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardOpenOption;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

/**
 * Batch restore verifier: {@link Verify} for many snapshots in ONE JVM (the JVM start and class
 * loading dominate a single verification). Each case runs exactly as {@code Verify} runs it, one
 * after another: NO_CLAIM restore into the case's fresh checkpoint directory, one new checkpoint,
 * cancel, the same verdict rules. Each case gets its own per-job MiniCluster (JobRunner's local
 * environment) and {@link Probe} is reset before it.
 *
 * <p>Usage: {@code VerifyMany <cases.tsv> <results.jsonl>}. One case per line, tab separated:
 * {@code <id> <plan.properties> <job> <snapshot-dir> <fresh-checkpoint-root>}. One JSON line
 * {@code {"id", "ok", "verdict"}} per case is appended (and flushed) to the results file as soon as
 * the case ends, in input order. A failing case never stops the others: everything a case throws
 * becomes its FAIL verdict. Exit code 0 if every case is OK, 1 otherwise, 2 on bad usage/input.
 *
 * <p>Kept separate from {@code Verify} (whose verdict rules it repeats) so that neither the fixture
 * hash nor {@code Verify}'s behaviour changes; see {@code _NOT_GENERATOR} in flink.py.
 */
public final class VerifyMany {
    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: VerifyMany <cases.tsv> <results.jsonl>");
            System.exit(2);
        }
        S3Plugins.initialize();
        List<String> lines = Files.readAllLines(new File(args[0]).toPath(), StandardCharsets.UTF_8);
        File results = new File(args[1]);
        boolean allOk = true;
        int n = 0;
        try (BufferedWriter w = Files.newBufferedWriter(results.toPath(), StandardCharsets.UTF_8,
                StandardOpenOption.CREATE, StandardOpenOption.TRUNCATE_EXISTING, StandardOpenOption.WRITE)) {
            for (String line : lines) {
                if (line.isBlank()) {
                    continue;
                }
                String[] f = line.split("\t", -1);
                String id = f[0];
                String verdict;
                long start = System.currentTimeMillis();
                if (f.length != 5) {
                    verdict = "FAIL: malformed case line (" + f.length + " fields, want 5)";
                } else {
                    try {
                        verdict = verifyOne(f[1], f[2], f[3], f[4]);
                    } catch (Throwable t) {
                        verdict = "FAIL: verifier error: " + JobRunner.describe(t);
                    }
                }
                boolean ok = verdict.startsWith("OK");
                allOk &= ok;
                n++;
                System.out.println("[verify-many] case " + id + " (" + (System.currentTimeMillis() - start)
                        + " ms) " + verdict);
                System.out.flush();
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("id", id);
                m.put("ok", ok);
                m.put("verdict", verdict);
                w.write(Json.write(m));
                w.newLine();
                w.flush();
            }
        }
        System.out.println("[verify-many] " + n + " case(s), " + (allOk ? "all OK" : "some FAILED"));
        System.exit(allOk ? 0 : 1);
    }

    /** One {@code Verify} run without the exit: the verdict line ("OK: ..." or "FAIL: ..."). */
    static String verifyOne(String planFile, String job, String snapshotDir, String freshRoot) throws Exception {
        Probe.reset();
        Properties plan = new Properties();
        try (InputStream in = new FileInputStream(planFile)) {
            plan.load(in);
        }
        plan.setProperty(job + ".checkpoints", "1");
        // One checkpoint is all we wait for: take it soon after the restored job runs.
        plan.setProperty(job + ".interval_ms", "300");
        plan.setProperty(job + ".claim_mode", "NO_CLAIM");
        plan.setProperty(job + ".savepoints", "");
        JobSpec spec = JobSpec.parse(job, plan);
        File fresh = new File(freshRoot);
        File snapshot = new File(snapshotDir);
        JobRunner.Outcome out;
        // The options the job was written with (ForSt in checkpoint storage, changelog): a snapshot
        // restores as it would in the job's own deployment, except where a restore in NO_CLAIM mode
        // needs otherwise (`verify.flink.*`: the changelog backend refuses NO_CLAIM's full first
        // checkpoint, so a changelog snapshot is restored with the changelog switched off).
        java.util.Map<String, String> extra = ExtraOptions.of(job, plan);
        extra.putAll(ExtraOptions.of(job, plan, ExtraOptions.VERIFY_PREFIX));
        if (!extra.isEmpty()) {
            ExtraOptions.install(extra);
        }
        try {
            out = JobRunner.run(spec, fresh, new File(fresh, "savepoints"), S3Plugins.isRemote(snapshotDir) ? snapshotDir : snapshot.getAbsolutePath());
        } catch (Exception e) {
            // Where Verify dies with the exception (exit 1): e.g. an unreadable _metadata fails
            // the job's submission (JobInitializationException) before it ever runs.
            return "FAIL: restore or run failed (job not started): " + JobRunner.describe(e);
        } finally {
            if (!extra.isEmpty()) {
                ExtraOptions.uninstall();
            }
        }
        long restoredNext = Probe.GATE_RESTORED_NEXT.get();
        long firstElement = Probe.GATE_FIRST_ELEMENT.get();
        // The same rules, in the same order, as Verify.main.
        if (out.failure != null) {
            return "FAIL: restore or run failed: " + JobRunner.describe(out.failure);
        } else if (!Probe.VIOLATIONS.isEmpty()) {
            return "FAIL: invariant violated: " + Probe.VIOLATIONS;
        } else if (restoredNext <= 0 || firstElement != restoredNext) {
            return "FAIL: operator state not restored (restored next element " + restoredNext
                    + ", first element after restore " + firstElement + ")";
        } else if (Probe.KEYED_RESTORE_CHECKS.get() == 0) {
            return "FAIL: no key found restored keyed state";
        } else if (Probe.TALLY_RESTORED.get() != spec.tallyParallelism
                || Probe.TALLY_UNION_OK.get() != spec.tallyParallelism) {
            return "FAIL: tally union state restored in " + Probe.TALLY_UNION_OK.get() + " of "
                    + spec.tallyParallelism + " subtasks";
        } else if (out.completed.isEmpty()) {
            return "FAIL: no checkpoint completed after restore";
        }
        return "OK: restored at element " + restoredNext + "; " + Probe.KEYED_RESTORE_CHECKS.get()
                + " keys matched restored count and map state (" + Probe.KEYED_FRESH_KEYS.get()
                + " keys new); tally union complete in " + Probe.TALLY_UNION_OK.get()
                + " subtasks; new checkpoint(s) " + out.completed + " in " + out.jobDir;
    }
}
