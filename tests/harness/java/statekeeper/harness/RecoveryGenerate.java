package statekeeper.harness;

import java.io.BufferedInputStream;
import java.io.DataInputStream;
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
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.flink.core.fs.FSDataInputStream;
import org.apache.flink.core.memory.DataInputViewStreamWrapper;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.state.OperatorStateHandle;

/**
 * {@link ClusterGenerate}'s jobs for plans about a restore's in-flight data (unaligned checkpoints), plus,
 * for every restored job, how far its retained checkpoints had got through the data it restored.
 *
 * <p>Flink 2.3's checkpointing during recovery (FLIP-547, {@code execution.checkpointing.during-recovery.enabled})
 * lets a restored job complete checkpoints while it still processes the in-flight data of the snapshot it
 * restored. Whether a checkpoint was taken before that data was all processed is read from the snapshots
 * themselves, never from timing: the sequence gate's operator state holds the next element it will emit
 * ({@code gate-next}), so the restored snapshot's value {@code R} counts the elements emitted before it was
 * taken; the tally's list state ({@code tally-count}, summed over its subtasks) counts the elements that
 * passed the last operator. Every element passes the tally once, so a checkpoint of the restored job whose
 * tally count is below {@code R} was taken while elements of the restored snapshot (all below {@code R})
 * were still unprocessed: during recovery. With one checkpoint in flight at a time, every checkpoint that
 * completed before such a one was triggered completed during recovery.
 *
 * <p>The restored snapshot is read before the job runs (in CLAIM mode Flink deletes it once the new job's
 * checkpoints subsume it); the restored job's retained checkpoints after it ended. The report goes to
 * {@code recovery.json} beside the checkpoint root ({@code <store>/recovery.json}: one object per restored job,
 * by name), which the Python side (recovering.py) moves into the manifest. Savepoints and failovers are not
 * supported here. Usage: {@code RecoveryGenerate <plan.properties> <result.jsonl>} (as {@link Generate}).
 */
public final class RecoveryGenerate {
    static final String GATE_UID = "sequence-gate";
    static final String GATE_STATE = "gate-next";
    static final String TALLY_UID = "tally";
    static final String TALLY_STATE = "tally-count";
    static final String REPORT = "recovery.json";

    private RecoveryGenerate() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: RecoveryGenerate <plan.properties> <result.jsonl>");
            System.exit(2);
        }
        Properties plan = new Properties();
        try (InputStream in = new FileInputStream(args[0])) {
            plan.load(in);
        }
        File result = new File(args[1]);
        File checkpointRoot = new File(plan.getProperty("checkpoint_root"));
        File savepointRoot = new File(plan.getProperty("savepoint_root"));
        File report = new File(checkpointRoot.getAbsoluteFile().getParentFile(), REPORT);
        Map<String, JobRunner.Outcome> done = new HashMap<>();
        Map<String, Object> recoveries = new LinkedHashMap<>();
        List<String> lines = new ArrayList<>();
        int exit = 0;
        for (String name : plan.getProperty("jobs").split(",")) {
            JobSpec spec = JobSpec.parse(name.trim(), plan);
            if (!spec.savepoints.isEmpty() || plan.getProperty(spec.name + ".failover_after") != null) {
                System.err.println("RecoveryGenerate: savepoints and failovers are not supported (job " + spec.name
                        + ")");
                System.exit(2);
            }
            String restore = Generate.resolveRestore(spec.restore, done);
            Progress restored = restore == null ? null : Progress.of(new File(restore));
            JobRunner.Outcome out = ClusterGenerate.run(spec, ExtraOptions.of(spec.name, plan), 0, checkpointRoot,
                    savepointRoot, restore, new HashMap<>());
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
            if (restored != null) {
                Map<String, Object> recovery = recovery(restored, out);
                recoveries.put(spec.name, recovery);
                System.err.println("[harness] job " + spec.name + " recovery " + Json.write(recovery));
            }
        }
        Files.write(report.toPath(), List.of(Json.write(recoveries)), StandardCharsets.UTF_8);
        System.exit(exit);
    }

    /** What the restored job's retained checkpoints hold of the restored snapshot's data. */
    static Map<String, Object> recovery(Progress restored, JobRunner.Outcome out) throws Exception {
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("restored_checkpoint_id", restored.checkpointId);
        r.put("restored_gate_next", restored.gateNext);
        r.put("restored_tally_count", restored.tallyCount);
        // The elements the restored snapshot held in flight: emitted before it, not yet through the tally.
        r.put("restored_in_flight_elements", restored.gateNext - restored.tallyCount);
        TreeMap<Long, File> retained = new TreeMap<>();
        File[] dirs = out.jobDir.listFiles();
        for (File d : dirs == null ? new File[0] : dirs) {
            if (d.getName().matches("chk-\\d+") && new File(d, "_metadata").isFile()) {
                retained.put(Long.parseLong(d.getName().substring(4)), d);
            }
        }
        List<Object> checkpoints = new ArrayList<>();
        long newestDuring = -1;
        for (Map.Entry<Long, File> e : retained.entrySet()) {
            Progress p = Progress.of(e.getValue());
            boolean during = p.tallyCount < restored.gateNext;
            if (during) {
                newestDuring = e.getKey();
            }
            Map<String, Object> c = new LinkedHashMap<>();
            c.put("id", e.getKey());
            c.put("dir", e.getValue().getAbsolutePath());
            c.put("gate_next", p.gateNext);
            c.put("tally_count", p.tallyCount);
            c.put("taken_during_recovery", during);
            checkpoints.add(c);
        }
        r.put("retained_checkpoints", checkpoints);
        List<Long> completedDuring = new ArrayList<>();
        for (Long id : out.completed) {
            if (id < newestDuring) {
                completedDuring.add(id);
            }
        }
        r.put("completed_during_recovery", completedDuring);
        return r;
    }

    /** A checkpoint's sequence-gate position and tally count, read from its operator state. */
    static final class Progress {
        final long checkpointId;
        final long gateNext;
        final long tallyCount;

        private Progress(long checkpointId, long gateNext, long tallyCount) {
            this.checkpointId = checkpointId;
            this.gateNext = gateNext;
            this.tallyCount = tallyCount;
        }

        static Progress of(File checkpointDir) throws Exception {
            File metadata = new File(checkpointDir, "_metadata");
            CheckpointMetadata md;
            try (InputStream raw = new FileInputStream(metadata);
                    DataInputStream in = new DataInputStream(new BufferedInputStream(raw, 1 << 16))) {
                md = Checkpoints.loadCheckpointMetadata(in, RecoveryGenerate.class.getClassLoader(),
                        checkpointDir.getAbsoluteFile().toURI().toString());
            }
            List<Long> gate = longs(operator(md, GATE_UID), GATE_STATE);
            if (gate.size() != 1) {
                throw new IllegalStateException(metadata + ": " + GATE_STATE + " holds " + gate + ", want one value");
            }
            long tally = 0;
            for (long count : longs(operator(md, TALLY_UID), TALLY_STATE)) {
                tally += count;
            }
            return new Progress(md.getCheckpointId(), gate.get(0), tally);
        }

        /**
         * The operator with {@code uid}: 2.x metadata records every operator's uid ({@code getOperatorUid}, called
         * by reflection because the harness's sources also compile against 1.20, which has no such method).
         */
        private static OperatorState operator(CheckpointMetadata md, String uid) throws Exception {
            for (OperatorState op : md.getOperatorStates()) {
                Object recorded = op.getClass().getMethod("getOperatorUid").invoke(op);
                if (recorded instanceof Optional && uid.equals(((Optional<?>) recorded).orElse(null))) {
                    return op;
                }
            }
            throw new IllegalStateException("checkpoint " + md.getCheckpointId() + " has no operator with uid " + uid);
        }

        /**
         * The values of a {@code Long} list state of every subtask. The operator state backend records the
         * stream offset of each element, and LongSerializer writes eight bytes (operator state is never
         * compressed).
         */
        private static List<Long> longs(OperatorState op, String stateName) throws Exception {
            List<Long> values = new ArrayList<>();
            for (OperatorSubtaskState subtask : op.getStates()) {
                for (OperatorStateHandle handle : subtask.getManagedOperatorState()) {
                    OperatorStateHandle.StateMetaInfo info = handle.getStateNameToPartitionOffsets().get(stateName);
                    if (info == null) {
                        continue;
                    }
                    try (FSDataInputStream in = handle.openInputStream()) {
                        DataInputViewStreamWrapper view = new DataInputViewStreamWrapper(in);
                        for (long offset : info.getOffsets()) {
                            in.seek(offset);
                            values.add(view.readLong());
                        }
                    }
                }
            }
            return values;
        }
    }
}
