package statekeeper.harness;

import java.io.File;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * Runs one {@link JobSpec} in an in-process MiniCluster: submit, wait for N completed checkpoints,
 * optionally take savepoints, cancel (checkpoints are retained on cancellation).
 */
public final class JobRunner {
    private JobRunner() {}

    /** What one run produced; {@link #toJson()} feeds the fixture manifest. */
    public static final class Outcome {
        public String name;
        public String jobId;
        public File jobDir;
        public String restoredFrom;
        public String claimMode;
        public List<Long> completed = new ArrayList<>();
        public List<Map<String, Object>> savepoints = new ArrayList<>();
        public long durationMs;
        public Throwable failure;

        public Map<String, Object> toJson() {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("name", name);
            m.put("job_id", jobId);
            m.put("job_dir", jobDir == null ? null : jobDir.getAbsolutePath());
            m.put("restored_from", restoredFrom);
            m.put("claim_mode", restoredFrom == null ? null : claimMode);
            m.put("completed_checkpoints", completed);
            m.put("savepoints", savepoints);
            m.put("duration_ms", durationMs);
            m.put("failure", failure == null ? null : describe(failure));
            return m;
        }
    }

    public static Outcome run(JobSpec spec, File checkpointRoot, File savepointRoot, String restorePath)
            throws Exception {
        Probe.reset();
        Outcome out = new Outcome();
        out.name = spec.name;
        out.restoredFrom = restorePath;
        out.claimMode = spec.claimMode;
        long start = System.currentTimeMillis();
        Configuration conf = Configuration.fromMap(spec.configuration(checkpointRoot, savepointRoot, restorePath));
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        Pipeline.build(env, spec);
        JobClient client = env.executeAsync("statekeeper-harness-" + spec.name);
        out.jobId = client.getJobID().toString();
        out.jobDir = new File(checkpointRoot, out.jobId);
        long deadline = start + spec.timeoutMs;
        try {
            while (Probe.COMPLETED.size() < spec.checkpoints) {
                JobStatus status = client.getJobStatus().get(30, TimeUnit.SECONDS);
                if (status.isGloballyTerminalState()) {
                    throw new IllegalStateException("job " + spec.name + " ended as " + status
                            + " before " + spec.checkpoints + " checkpoints completed", jobFailure(client));
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("job " + spec.name + ": only " + Probe.COMPLETED.size()
                            + " of " + spec.checkpoints + " checkpoints completed within " + spec.timeoutMs + " ms");
                }
                Thread.sleep(20);
            }
            out.completed.addAll(Probe.COMPLETED);
            for (String format : spec.savepoints) {
                String path = client.triggerSavepoint(savepointRoot.getAbsoluteFile().toURI().toString(),
                        SavepointFormatType.valueOf(format)).get(spec.timeoutMs, TimeUnit.MILLISECONDS);
                Map<String, Object> sp = new LinkedHashMap<>();
                sp.put("path", path);
                sp.put("format", format);
                out.savepoints.add(sp);
            }
            if (!Probe.VIOLATIONS.isEmpty()) {
                throw new IllegalStateException("invariant violated: " + Probe.VIOLATIONS);
            }
        } catch (Throwable t) {
            out.failure = t;
        } finally {
            cancelAndWait(client);
            out.durationMs = System.currentTimeMillis() - start;
        }
        return out;
    }

    private static Throwable jobFailure(JobClient client) {
        try {
            client.getJobExecutionResult().get(30, TimeUnit.SECONDS);
            return null;
        } catch (Exception e) {
            return e;
        }
    }

    private static void cancelAndWait(JobClient client) {
        try {
            JobStatus status = client.getJobStatus().get(30, TimeUnit.SECONDS);
            if (!status.isGloballyTerminalState()) {
                client.cancel().get(60, TimeUnit.SECONDS);
            }
        } catch (Exception ignored) {
            // already gone: the per-job MiniCluster shuts down with the job
        }
        try {
            client.getJobExecutionResult().get(120, TimeUnit.SECONDS);
        } catch (Exception ignored) {
            // a cancelled job completes its result exceptionally; we only wait for termination
        }
    }

    public static String describe(Throwable t) {
        StringBuilder sb = new StringBuilder();
        Throwable cur = t;
        int depth = 0;
        while (cur != null && depth < 12) {
            if (depth > 0) {
                sb.append(" <- ");
            }
            sb.append(cur.getClass().getName()).append(": ").append(cur.getMessage());
            cur = cur.getCause() == cur ? null : cur.getCause();
            depth++;
        }
        return sb.toString();
    }
}
