package statekeeper.harness;

import java.io.File;
import java.io.FileInputStream;
import java.io.InputStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.flink.core.fs.FileSystem;
import org.apache.flink.core.fs.Path;

/**
 * {@link Generate} for a store on S3: the same plan, the same jobs through {@link JobRunner}, with the checkpoint
 * and savepoint roots {@code s3://} URIs that Flink writes through its S3 plugin ({@link S3Plugins}). Kept apart
 * from {@code Generate} so that no local fixture's hash changes (flink.py, {@code _NOT_GENERATOR}); the S3 stores
 * are generated per test session (tests/harness/s3_store.py), never cached.
 *
 * <p>Usage: {@code S3Generate <plan.properties> <result.jsonl>}; {@code checkpoint_root} and
 * {@code savepoint_root} in the plan are URIs. Result lines as {@code Generate}'s, {@code job_dir} a URI.
 */
public final class S3Generate {
    private S3Generate() {}

    /** A root that JobSpec and JobRunner spell as its URI ({@code getAbsoluteFile().toURI()}). */
    static final class UriRoot extends File {
        private final URI uri;

        UriRoot(String uri) {
            super("s3-root-placeholder");
            this.uri = URI.create(uri.endsWith("/") ? uri : uri + "/");
        }

        @Override
        public File getAbsoluteFile() {
            return this;
        }

        @Override
        public URI toURI() {
            return uri;
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: S3Generate <plan.properties> <result.jsonl>");
            System.exit(2);
        }
        S3Plugins.initialize();
        Properties plan = new Properties();
        try (InputStream in = new FileInputStream(args[0])) {
            plan.load(in);
        }
        File result = new File(args[1]);
        String checkpointRoot = plan.getProperty("checkpoint_root").replaceAll("/+$", "");
        String savepointRoot = plan.getProperty("savepoint_root").replaceAll("/+$", "");
        Map<String, JobRunner.Outcome> done = new HashMap<>();
        List<String> lines = new ArrayList<>();
        int exit = 0;
        for (String name : plan.getProperty("jobs").split(",")) {
            JobSpec spec = JobSpec.parse(name.trim(), plan);
            String restore = resolveRestore(spec.restore, checkpointRoot, done);
            JobRunner.Outcome out = JobRunner.run(spec, new UriRoot(checkpointRoot), new UriRoot(savepointRoot),
                    restore);
            done.put(spec.name, out);
            Map<String, Object> json = out.toJson();
            json.put("job_dir", out.jobId == null ? null : checkpointRoot + "/" + out.jobId);
            lines.add(Json.write(json));
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

    static String resolveRestore(String restore, String checkpointRoot, Map<String, JobRunner.Outcome> done)
            throws Exception {
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
        // Newest checkpoint whose _metadata exists (completed and still retained), through Flink's file system.
        for (int i = source.completed.size() - 1; i >= 0; i--) {
            Path chk = new Path(checkpointRoot + "/" + source.jobId + "/chk-" + source.completed.get(i));
            FileSystem fs = chk.getFileSystem();
            if (fs.exists(new Path(chk, "_metadata"))) {
                return chk.toString();
            }
        }
        throw new IllegalStateException("job " + source.name + " has no retained checkpoint to restore");
    }
}
