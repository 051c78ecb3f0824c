package statekeeper.harness;

import java.io.File;
import java.io.FileInputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobgraph.SavepointRestoreSettings;
import org.apache.flink.runtime.jobmaster.JobResult;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.graph.StreamGraph;

/**
 * {@link Generate} for plans that need more than {@link JobSpec}: each job runs in a MiniCluster this
 * JVM owns, with the plan's extra Flink options ({@link ExtraOptions}: ForSt in checkpoint storage,
 * the changelog backend), and optionally a failover.
 *
 * <p>{@code <job>.failover_after=N}: once N checkpoints completed, the TaskManager is terminated and a
 * new one started. Every task fails, the job restarts from its newest checkpoint, and every subtask
 * runs as attempt 1: a ForSt job opens a new database under {@code op_..._attempt_1/} beside the dead
 * attempt's. The job then runs until {@code checkpoints} completed in all. Such a job gets a
 * fixed-delay restart strategy (JobSpec's is none). Its result line has {@code failovers}: the
 * checkpoint count at each.
 *
 * <p>Kept apart from {@link Generate} and {@link JobRunner} (which every fixture hash covers): only the
 * plans that name this generator have its source in their hash. Savepoints are not supported here.
 * Usage: {@code ClusterGenerate <plan.properties> <result.jsonl>} (as {@link Generate}).
 */
public final class ClusterGenerate {
    private ClusterGenerate() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: ClusterGenerate <plan.properties> <result.jsonl>");
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
            if (!spec.savepoints.isEmpty()) {
                System.err.println("ClusterGenerate: savepoints are not supported (job " + spec.name + ")");
                System.exit(2);
            }
            String restore = Generate.resolveRestore(spec.restore, done);
            int failoverAfter = Integer.parseInt(plan.getProperty(spec.name + ".failover_after", "0"));
            Map<String, Object> failovers = new LinkedHashMap<>();
            JobRunner.Outcome out = run(spec, ExtraOptions.of(spec.name, plan), failoverAfter, checkpointRoot,
                    savepointRoot, restore, failovers);
            done.put(spec.name, out);
            Map<String, Object> line = out.toJson();
            line.putAll(failovers);
            lines.add(Json.write(line));
            Files.write(result.toPath(), lines, StandardCharsets.UTF_8);
            System.err.println("[harness] job " + spec.name + " " + out.jobId + " checkpoints=" + out.completed
                    + " " + failovers + " in " + out.durationMs + " ms" + (out.failure == null ? "" : " FAILED"));
            if (out.failure != null) {
                System.err.println("[harness] " + JobRunner.describe(out.failure));
                exit = 1;
                break;
            }
        }
        System.exit(exit);
    }

    static JobRunner.Outcome run(JobSpec spec, Map<String, String> extra, int failoverAfter, File checkpointRoot,
            File savepointRoot, String restorePath, Map<String, Object> report) throws Exception {
        Probe.reset();
        JobRunner.Outcome out = new JobRunner.Outcome();
        out.name = spec.name;
        out.restoredFrom = restorePath;
        out.claimMode = spec.claimMode;
        long start = System.currentTimeMillis();
        Map<String, String> map = ExtraOptions.apply(
                spec.configuration(checkpointRoot, savepointRoot, restorePath), extra);
        // Other sessions run MiniClusters too: never a fixed REST port.
        map.put("rest.bind-port", "0");
        map.put("rest.bind-address", "localhost");
        map.put("rest.address", "localhost");
        if (failoverAfter > 0) {
            // Only the generating run restarts; a verifier's restore keeps JobSpec's "none", so a
            // missing file fails it instead of being retried away.
            map.put("restart-strategy.type", "fixed-delay");
            map.put("restart-strategy", "fixed-delay");
            map.put("restart-strategy.fixed-delay.attempts", "2");
            map.put("restart-strategy.fixed-delay.delay", "500ms");
        }
        Configuration conf = Configuration.fromMap(map);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        Pipeline.build(env, spec);
        StreamGraph streamGraph = env.getStreamGraph();
        streamGraph.setJobName("statekeeper-harness-" + spec.name);
        JobGraph jobGraph = streamGraph.getJobGraph();
        jobGraph.setSavepointRestoreSettings(SavepointRestoreSettings.fromConfiguration(conf));
        int slots = Math.max(spec.parallelism, spec.tallyParallelism);
        MiniClusterConfiguration clusterConf = new MiniClusterConfiguration.Builder()
                .setConfiguration(conf).setNumTaskManagers(1).setNumSlotsPerTaskManager(slots).build();
        List<Integer> failedOverAt = new ArrayList<>();
        try (MiniCluster cluster = new MiniCluster(clusterConf)) {
            cluster.start();
            JobID jobId = cluster.submitJob(jobGraph).get(60, TimeUnit.SECONDS).getJobID();
            out.jobId = jobId.toString();
            out.jobDir = new File(checkpointRoot, out.jobId);
            long deadline = start + spec.timeoutMs;
            int taskManager = 0;
            try {
                while (Probe.COMPLETED.size() < spec.checkpoints) {
                    JobStatus status = cluster.getJobStatus(jobId).get(30, TimeUnit.SECONDS);
                    if (status.isGloballyTerminalState()) {
                        throw new IllegalStateException("job " + spec.name + " ended as " + status + " before "
                                + spec.checkpoints + " checkpoints completed", jobFailure(cluster, jobId));
                    }
                    if (System.currentTimeMillis() > deadline) {
                        throw new IllegalStateException("job " + spec.name + ": only " + Probe.COMPLETED.size()
                                + " of " + spec.checkpoints + " checkpoints completed within " + spec.timeoutMs
                                + " ms");
                    }
                    if (failoverAfter > 0 && failedOverAt.isEmpty() && Probe.COMPLETED.size() >= failoverAfter) {
                        // A lost TaskManager: its tasks fail, the job restarts from the newest checkpoint
                        // on a fresh one, every subtask as the next attempt.
                        failedOverAt.add(Probe.COMPLETED.size());
                        cluster.terminateTaskManager(taskManager++).get(60, TimeUnit.SECONDS);
                        cluster.startTaskManager();
                    }
                    Thread.sleep(20);
                }
                out.completed.addAll(Probe.COMPLETED);
                if (!Probe.VIOLATIONS.isEmpty()) {
                    throw new IllegalStateException("invariant violated: " + Probe.VIOLATIONS);
                }
                if (failoverAfter > 0 && failedOverAt.isEmpty()) {
                    throw new IllegalStateException("job " + spec.name + ": no failover happened");
                }
            } catch (Throwable t) {
                out.failure = t;
            } finally {
                cancelAndWait(cluster, jobId);
                out.durationMs = System.currentTimeMillis() - start;
            }
        }
        report.put("failovers", failedOverAt);
        return out;
    }

    private static Throwable jobFailure(MiniCluster cluster, JobID jobId) {
        try {
            JobResult result = cluster.requestJobResult(jobId).get(30, TimeUnit.SECONDS);
            if (result.getSerializedThrowable().isPresent()) {
                return result.getSerializedThrowable().get().deserializeError(ClusterGenerate.class.getClassLoader());
            }
            return null;
        } catch (Exception e) {
            return e;
        }
    }

    private static void cancelAndWait(MiniCluster cluster, JobID jobId) {
        try {
            if (!cluster.getJobStatus(jobId).get(30, TimeUnit.SECONDS).isGloballyTerminalState()) {
                cluster.cancelJob(jobId).get(60, TimeUnit.SECONDS);
            }
        } catch (Exception ignored) {
            // already ended
        }
        try {
            cluster.requestJobResult(jobId).get(120, TimeUnit.SECONDS);
        } catch (Exception ignored) {
            // a cancelled job completes its result exceptionally; we only wait for termination
        }
    }
}
