package statekeeper.harness;

import java.io.File;
import java.io.FileInputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

/**
 * Generator entry point: runs the jobs of a plan one after another in this JVM.
 *
 * <p>Usage: {@code Generate <plan.properties> <result.jsonl>}. The plan names the jobs
 * ({@code jobs=A,B,...}), the store roots ({@code checkpoint_root}, {@code savepoint_root}) and each
 * job's {@link JobSpec}. {@code <job>.restore=@A} restores from A's newest completed checkpoint of
 * this run. One JSON line per job is appended to the result file as soon as the job ends.
 */
public final class Generate {
    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: Generate <plan.properties> <result.jsonl>");
            System.exit(2);
        }
        Properties plan = new Properties();
        try (InputStream in = new FileInputStream(args[0])) {
            plan.load(in);
        }
        File result = new File(args[1]);
        File checkpointRoot = new File(plan.getProperty("checkpoint_root"));
        File savepointRoot = new File(plan.getProperty("savepoint_root"));
        Map<String, JobRunner.Outcome> done = new HashMap<>();
        List<String> lines = new ArrayList<>();
        int exit = 0;
        for (String name : plan.getProperty("jobs").split(",")) {
            JobSpec spec = JobSpec.parse(name.trim(), plan);
            String restore = resolveRestore(spec.restore, done);
            JobRunner.Outcome out = JobRunner.run(spec, checkpointRoot, savepointRoot, restore);
            done.put(spec.name, out);
            lines.add(Json.write(out.toJson()));
            Files.write(result.toPath(), lines, StandardCharsets.UTF_8);
            System.err.println("[harness] job " + spec.name + " " + out.jobId + " checkpoints=" + out.completed
                    + " in " + out.durationMs + " ms" + (out.failure == null ? "" : " FAILED"));
            if (out.failure != null) {
                System.err.println("[harness] " + JobRunner.describe(out.failure));
                exit = 1;
                break;
            }
        }
        System.exit(exit);
    }

    static String resolveRestore(String restore, Map<String, JobRunner.Outcome> done) {
        if (restore == null || restore.isBlank()) {
            return null;
        }
        if (!restore.startsWith("@")) {
            return restore;
        }
        JobRunner.Outcome source = done.get(restore.substring(1));
        if (source == null) {
            throw new IllegalArgumentException("restore source " + restore + " has not run yet");
        }
        // Newest checkpoint whose _metadata exists (completed and still retained).
        for (int i = source.completed.size() - 1; i >= 0; i--) {
            File chk = new File(source.jobDir, "chk-" + source.completed.get(i));
            if (new File(chk, "_metadata").isFile()) {
                return chk.getAbsolutePath();
            }
        }
        throw new IllegalStateException("job " + source.name + " has no retained checkpoint to restore");
    }
}
