package statekeeper.harness;

import java.io.File;
import java.io.FileInputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.fs.FileStatus;
import org.apache.flink.core.fs.FileSystem;
import org.apache.flink.core.fs.Path;
import org.apache.flink.runtime.checkpoint.AbstractCheckpointStats;
import org.apache.flink.runtime.checkpoint.CheckpointStatsSnapshot;
import org.apache.flink.runtime.checkpoint.CompletedCheckpointStats;
import org.apache.flink.runtime.checkpoint.FailedCheckpointStats;
import org.apache.flink.runtime.executiongraph.AccessExecutionGraph;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobmaster.JobResult;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.graph.StreamGraph;
import org.apache.logging.log4j.Level;
import org.apache.logging.log4j.core.config.Configurator;

/**
 * Runs the deterministic job in the background until told to stop, for tests that work on its
 * checkpoint directory while it checkpoints (GC under a live job).
 *
 * <p>Usage: {@code RunJob <plan.properties> <job> <checkpoint-root> <work-dir> <seconds-max>}. The
 * job's {@link JobSpec} comes from the plan as for {@link Verify}; plan entries {@code flink.<key>}
 * are added to (and override) the Flink configuration. The JVM owns its {@link MiniCluster}, so the
 * job's checkpoint statistics can be read before cancelling and after the job ended by itself.
 *
 * <p>Files in {@code <work-dir>}: {@code started.json} ({@code job_id}, {@code job_dir}) is written
 * once the first checkpoint completed and its {@code _metadata} exists; the Python side creates
 * {@code STOP} to stop the job (or {@code <seconds-max>} passes); {@code result.json} is written last:
 * {@code job_id, job_dir, completed, failed, failure_reasons, newest_checkpoint, ...}. Counts are
 * Flink's own {@link CheckpointStatsSnapshot} of the running job, read just before cancelling (the
 * cancellation aborts a pending checkpoint, which must not count). Checkpoint failures are
 * tolerated (the job keeps running) and counted: declined, expired, I/O errors alike. {@code failed}
 * counts those after {@code started.json} was written (what a test doing something to the running
 * job sees); a trigger attempt that finds the tasks still deploying before the first checkpoint is
 * in {@code failed_before_start} only. A failure that never got a checkpoint id (trigger failure)
 * has no entry in Flink's history: it is counted, and its reason is in the log, where
 * {@code CheckpointFailureManager} reports every failure (raised to INFO here).
 */
public final class RunJob {
    private static final long STATS_POLL_MS = 1000;

    private RunJob() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: RunJob <plan.properties> <job> <checkpoint-root> <work-dir> <seconds-max>");
            System.exit(2);
        }
        java.util.Properties plan = new java.util.Properties();
        try (InputStream in = new FileInputStream(args[0])) {
            plan.load(in);
        }
        JobSpec spec = JobSpec.parse(args[1], plan);
        // A local directory, or an s3:// URI that Flink's S3 plugin writes (S3Plugins).
        boolean remote = S3Plugins.isRemote(args[2]);
        File checkpointRoot = remote ? null : new File(args[2]).getAbsoluteFile();
        String rootUri = remote ? args[2] : checkpointRoot.toURI().toString();
        File work = new File(args[3]).getAbsoluteFile();
        long deadline = System.currentTimeMillis() + (long) (Double.parseDouble(args[4]) * 1000);
        File stopFile = new File(work, "STOP");

        // <job>.restore: a retained checkpoint's directory to start from (in <job>.claim_mode), as the generator's
        String restore = spec.restore == null || spec.restore.isBlank() ? null : spec.restore;
        S3Plugins.initialize();
        Map<String, String> map = spec.configuration(remote ? new File(work, "checkpoints") : checkpointRoot,
                new File(work, "savepoints"), restore);
        if (remote) {
            map.put("execution.checkpointing.dir", rootUri);
            map.put("state.checkpoints.dir", rootUri);
        }
        // Keep running through failed checkpoints (counted from the statistics instead of failing
        // the job), keep enough history for every failure's reason between two polls, and never
        // take a fixed REST port (other sessions run MiniClusters too).
        map.put("execution.checkpointing.tolerable-failed-checkpoints", String.valueOf(Integer.MAX_VALUE));
        map.put("web.checkpoints.history", "1000");
        map.put("rest.bind-port", "0");
        map.put("rest.bind-address", "localhost");
        map.put("rest.address", "localhost");
        for (String key : plan.stringPropertyNames()) {
            if (key.startsWith("flink.")) {
                map.put(key.substring("flink.".length()), plan.getProperty(key));
            }
        }
        Configuration conf = Configuration.fromMap(map);

        Configurator.setLevel("org.apache.flink.runtime.checkpoint.CheckpointFailureManager", Level.INFO);
        Probe.reset();
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        Pipeline.build(env, spec);
        StreamGraph streamGraph = env.getStreamGraph();
        streamGraph.setJobName("statekeeper-harness-run-" + spec.name);
        JobGraph jobGraph = streamGraph.getJobGraph();
        int slots = Math.max(spec.parallelism, spec.tallyParallelism);
        MiniClusterConfiguration clusterConf = new MiniClusterConfiguration.Builder()
                .setConfiguration(conf).setNumTaskManagers(1).setNumSlotsPerTaskManager(slots).build();

        Map<String, Object> result = new LinkedHashMap<>();
        int exit = 0;
        try (MiniCluster cluster = new MiniCluster(clusterConf)) {
            cluster.start();
            JobID jobId = cluster.submitJob(jobGraph).get(60, TimeUnit.SECONDS).getJobID();
            Path jobDir = new Path(new Path(rootUri), jobId.toString());
            result.put("job_id", jobId.toString());
            result.put("job_dir", display(jobDir));
            System.out.println("[runjob] submitted " + jobId + " into " + jobDir);
            Map<Long, String> failures = new TreeMap<>();
            Map<Long, Long> failedAt = new TreeMap<>();
            boolean started = false;
            long startedAt = Long.MAX_VALUE;
            long failedBeforeStart = 0;
            String stoppedBy = null;
            long nextPoll = 0;
            long lastReported = 0;
            while (stoppedBy == null) {
                JobStatus status = cluster.getJobStatus(jobId).get(30, TimeUnit.SECONDS);
                if (status.isGloballyTerminalState()) {
                    stoppedBy = "job_ended";
                    break;
                }
                if (!started && !Probe.COMPLETED.isEmpty() && newestCheckpoint(jobDir) != null) {
                    CheckpointStatsSnapshot before = stats(cluster, jobId);
                    failedBeforeStart = before == null ? 0 : before.getCounts().getNumberOfFailedCheckpoints();
                    collectFailures(before, failures, failedAt);
                    startedAt = System.currentTimeMillis();
                    Map<String, Object> marker = new LinkedHashMap<>();
                    marker.put("job_id", jobId.toString());
                    marker.put("job_dir", display(jobDir));
                    writeAtomically(new File(work, "started.json"), Json.write(marker));
                    started = true;
                    System.out.println("[runjob] first checkpoint " + Probe.COMPLETED + " completed");
                }
                if (stopFile.exists()) {
                    stoppedBy = "stop_file";
                } else if (System.currentTimeMillis() > deadline) {
                    stoppedBy = "time_limit";
                } else {
                    if (System.currentTimeMillis() >= nextPoll) {
                        CheckpointStatsSnapshot stats = stats(cluster, jobId);
                        collectFailures(stats, failures, failedAt);
                        nextPoll = System.currentTimeMillis() + STATS_POLL_MS;
                        long done = stats == null ? 0 : stats.getCounts().getNumberOfCompletedCheckpoints();
                        if (done >= lastReported + 25) {
                            lastReported = done;
                            System.out.println("[runjob] " + done + " checkpoints completed, "
                                    + stats.getCounts().getNumberOfFailedCheckpoints() + " failed ("
                                    + failedBeforeStart + " before the first completed)");
                        }
                    }
                    Thread.sleep(50);
                }
            }
            // Statistics first: cancelling aborts the pending checkpoint, which is no failure of the job.
            CheckpointStatsSnapshot stats = stats(cluster, jobId);
            collectFailures(stats, failures, failedAt);
            String statusBefore = cluster.getJobStatus(jobId).get(30, TimeUnit.SECONDS).toString();
            if (!"job_ended".equals(stoppedBy)) {
                try {
                    cluster.cancelJob(jobId).get(60, TimeUnit.SECONDS);
                } catch (Exception e) {
                    System.err.println("[runjob] cancel: " + JobRunner.describe(e));
                }
            }
            JobResult jobResult = cluster.requestJobResult(jobId).get(120, TimeUnit.SECONDS);
            String jobFailure = null;
            if ("job_ended".equals(stoppedBy) && jobResult.getSerializedThrowable().isPresent()) {
                jobFailure = JobRunner.describe(jobResult.getSerializedThrowable().get()
                        .deserializeError(RunJob.class.getClassLoader()));
            } else if ("job_ended".equals(stoppedBy)) {
                jobFailure = "job ended by itself as " + statusBefore;
            }
            Path newest = newestCheckpoint(jobDir);
            List<String> reasons = new ArrayList<>();
            List<String> reasonsBeforeStart = new ArrayList<>();
            for (Map.Entry<Long, String> e : failures.entrySet()) {
                String reason = "chk-" + e.getKey() + ": " + e.getValue();
                (failedAt.get(e.getKey()) >= startedAt ? reasons : reasonsBeforeStart).add(reason);
            }
            long completed = stats == null ? 0 : stats.getCounts().getNumberOfCompletedCheckpoints();
            long failedTotal = stats == null ? 0 : stats.getCounts().getNumberOfFailedCheckpoints();
            long failed = failedTotal - Math.min(failedTotal, failedBeforeStart);
            if (failed > reasons.size()) {
                reasons.add((failed - reasons.size()) + " failure(s) without a checkpoint id (trigger failed):"
                        + " see CheckpointFailureManager in the log");
            }
            CompletedCheckpointStats latest = stats == null ? null : stats.getHistory().getLatestCompletedCheckpoint();
            result.put("completed", completed);
            result.put("failed", failed);
            result.put("failure_reasons", reasons);
            result.put("failed_total", failedTotal);
            result.put("failed_before_start", failedTotal - failed);
            result.put("failure_reasons_before_start", reasonsBeforeStart);
            result.put("newest_checkpoint", newest == null ? null : display(newest));
            result.put("latest_completed_id", latest == null ? null : latest.getCheckpointId());
            result.put("notified_checkpoints", (long) Probe.COMPLETED.size());
            result.put("stopped_by", stoppedBy);
            result.put("status_before_stop", statusBefore);
            result.put("final_status", cluster.getJobStatus(jobId).get(30, TimeUnit.SECONDS).toString());
            result.put("job_failure", jobFailure);
            result.put("violations", new ArrayList<>(Probe.VIOLATIONS));
            System.out.println("[runjob] stopped (" + stoppedBy + "): " + completed + " completed, " + failed
                    + " failed; newest " + newest);
        } catch (Throwable t) {
            System.err.println("[runjob] harness error: " + JobRunner.describe(t));
            t.printStackTrace();
            result.put("harness_error", JobRunner.describe(t));
            exit = 1;
        }
        writeAtomically(new File(work, "result.json"), Json.write(result));
        System.exit(exit);
    }

    private static CheckpointStatsSnapshot stats(MiniCluster cluster, JobID jobId) throws Exception {
        AccessExecutionGraph graph = cluster.getExecutionGraph(jobId).get(30, TimeUnit.SECONDS);
        return graph.getCheckpointStatsSnapshot();
    }

    private static void collectFailures(CheckpointStatsSnapshot stats, Map<Long, String> failures,
            Map<Long, Long> failedAt) {
        if (stats == null) {
            return;
        }
        for (AbstractCheckpointStats c : stats.getHistory().getCheckpoints()) {
            if (c instanceof FailedCheckpointStats) {
                String message = ((FailedCheckpointStats) c).getFailureMessage();
                failures.put(c.getCheckpointId(), message == null ? "(no message)" : message);
                failedAt.put(c.getCheckpointId(), ((FailedCheckpointStats) c).getFailureTimestamp());
            }
        }
    }

    /** The {@code chk-N} directory with the highest N that holds a {@code _metadata} file (through Flink's file
     * system, so on S3 too). */
    static Path newestCheckpoint(Path jobDir) throws java.io.IOException {
        FileSystem fs = jobDir.getFileSystem();
        FileStatus[] entries;
        try {
            entries = fs.listStatus(jobDir);
        } catch (java.io.FileNotFoundException e) {
            return null;
        }
        if (entries == null) {
            return null;
        }
        Path best = null;
        long bestId = -1;
        for (FileStatus entry : entries) {
            String name = entry.getPath().getName();
            if (!name.startsWith("chk-")) {
                continue;
            }
            long id;
            try {
                id = Long.parseLong(name.substring(4));
            } catch (NumberFormatException e) {
                continue;
            }
            // SeaweedFS keeps an emptied "directory" listed: only a chk-N with its _metadata counts.
            if (id > bestId && fs.exists(new Path(entry.getPath(), "_metadata"))) {
                best = entry.getPath();
                bestId = id;
            }
        }
        return best;
    }

    /** A local path as a plain absolute path (as the manifest spells them), any other as its URI. */
    private static String display(Path path) {
        java.net.URI uri = path.toUri();
        return uri.getScheme() == null || "file".equals(uri.getScheme()) ? new File(uri.getPath()).getPath()
                : path.toString();
    }

    private static void writeAtomically(File target, String text) throws Exception {
        File tmp = new File(target.getParentFile(), target.getName() + ".tmp");
        Files.write(tmp.toPath(), (text + "\n").getBytes(StandardCharsets.UTF_8));
        Files.move(tmp.toPath(), target.toPath(), StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    }
}
