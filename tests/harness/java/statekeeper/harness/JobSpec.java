package statekeeper.harness;

import java.io.File;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

/**
 * One run of the deterministic job: state backend, checkpointing options, restore source.
 *
 * <p>Read from a properties file written by the Python side ({@code <job>.<key>=value}). Options are
 * set by their configuration keys (never backend classes, whose packages moved between 1.x and 2.x).
 * Where a key was renamed in 1.20 both spellings are set: Flink ignores unknown keys and the new key
 * wins over its deprecated fallback, so one spec works on 1.17 through 2.3.
 */
public final class JobSpec {
    public final String name;
    public final String backend;          // "rocksdb" | "hashmap"
    public final boolean incremental;
    public final int parallelism;         // keyed operator and tally
    public final int tallyParallelism;
    public final boolean rebalanceTally;  // network edge keyed -> tally (channel state for unaligned)
    public final int maxParallelism;
    public final int checkpoints;         // stop after this many completed checkpoints
    public final int retained;
    public final long intervalMs;
    public final long inlineThreshold;    // bytes; < 0 keeps Flink's default (20 KiB)
    public final boolean fileMerging;
    public final boolean unaligned;
    public final long bufferTimeoutMs;    // < 0 keeps Flink's default
    public final int rate;                // source elements per second
    public final int keys;                // K: element v has key v % K
    public final int payloadBytes;        // per-element map-state value size
    public final long tallySleepMicros;   // slow downstream (backpressure) per element
    public final String compactionStyle;  // RocksDB: null keeps LEVEL; NONE keeps restored SSTs alive
    public final String restore;          // null, a snapshot path, or "@<job>" (its latest checkpoint)
    public final String claimMode;        // CLAIM | NO_CLAIM | LEGACY
    public final List<String> savepoints; // formats to trigger after the checkpoints: CANONICAL, NATIVE
    public final long timeoutMs;

    private JobSpec(String name, Properties p) {
        this.name = name;
        this.backend = get(p, "backend", "rocksdb");
        this.incremental = Boolean.parseBoolean(get(p, "incremental", "true"));
        this.parallelism = Integer.parseInt(get(p, "parallelism", "4"));
        this.tallyParallelism = Integer.parseInt(get(p, "tally_parallelism", String.valueOf(parallelism)));
        this.rebalanceTally = Boolean.parseBoolean(get(p, "rebalance_tally", "false"));
        this.maxParallelism = Integer.parseInt(get(p, "max_parallelism", "128"));
        this.checkpoints = Integer.parseInt(get(p, "checkpoints", "3"));
        this.retained = Integer.parseInt(get(p, "retained", "3"));
        this.intervalMs = Long.parseLong(get(p, "interval_ms", "800"));
        this.inlineThreshold = Long.parseLong(get(p, "inline_threshold", "-1"));
        this.fileMerging = Boolean.parseBoolean(get(p, "file_merging", "false"));
        this.unaligned = Boolean.parseBoolean(get(p, "unaligned", "false"));
        this.bufferTimeoutMs = Long.parseLong(get(p, "buffer_timeout_ms", "-1"));
        this.rate = Integer.parseInt(get(p, "rate", "2000"));
        this.keys = Integer.parseInt(get(p, "keys", "256"));
        this.payloadBytes = Integer.parseInt(get(p, "payload_bytes", "48"));
        this.tallySleepMicros = Long.parseLong(get(p, "tally_sleep_micros", "0"));
        this.compactionStyle = p.getProperty(name + ".compaction_style");
        this.restore = p.getProperty(name + ".restore");
        this.claimMode = get(p, "claim_mode", "NO_CLAIM");
        String sp = get(p, "savepoints", "");
        List<String> formats = new ArrayList<>();
        for (String f : sp.split(",")) {
            if (!f.isBlank()) {
                formats.add(f.trim());
            }
        }
        this.savepoints = Collections.unmodifiableList(formats);
        this.timeoutMs = Long.parseLong(get(p, "timeout_ms", "240000"));
    }

    private String get(Properties p, String key, String dflt) {
        return p.getProperty(name + "." + key, dflt);
    }

    public static JobSpec parse(String name, Properties p) {
        return new JobSpec(name, p);
    }

    /** Flink configuration for this run; {@code restorePath} is the resolved snapshot or null. */
    public Map<String, String> configuration(File checkpointRoot, File savepointRoot, String restorePath) {
        Map<String, String> c = new LinkedHashMap<>();
        String ckptUri = checkpointRoot.getAbsoluteFile().toURI().toString();
        String spUri = savepointRoot.getAbsoluteFile().toURI().toString();
        c.put("parallelism.default", String.valueOf(parallelism));
        c.put("pipeline.max-parallelism", String.valueOf(maxParallelism));
        // A failing restore or a violated invariant must fail the run, not loop in restarts.
        c.put("restart-strategy.type", "none");
        c.put("restart-strategy", "none");

        c.put("state.backend.type", backend);
        both(c, "execution.checkpointing.incremental", "state.backend.incremental", String.valueOf(incremental));
        if (backend.equals("rocksdb")) {
            // The 64 MB default write buffer stalls tiny jobs on 1.x; state here is a few MB.
            c.put("state.backend.rocksdb.writebuffer.size", "4mb");
            if (compactionStyle != null) {
                c.put("state.backend.rocksdb.compaction.style", compactionStyle);
            }
        }
        both(c, "execution.checkpointing.storage", "state.checkpoint-storage", "filesystem");
        both(c, "execution.checkpointing.dir", "state.checkpoints.dir", ckptUri);
        both(c, "execution.checkpointing.savepoint-dir", "state.savepoints.dir", spUri);
        both(c, "execution.checkpointing.num-retained", "state.checkpoints.num-retained", String.valueOf(retained));
        c.put("execution.checkpointing.interval", intervalMs + "ms");
        c.put("execution.checkpointing.min-pause", Math.max(100, intervalMs / 4) + "ms");
        c.put("execution.checkpointing.timeout", "120s");
        c.put("execution.checkpointing.mode", "EXACTLY_ONCE");
        c.put("execution.checkpointing.max-concurrent-checkpoints", "1");
        c.put("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
        if (inlineThreshold >= 0) {
            both(c, "execution.checkpointing.data-inline-threshold", "state.storage.fs.memory-threshold",
                    inlineThreshold + "b");
        }
        if (fileMerging) {
            c.put("execution.checkpointing.file-merging.enabled", "true");
        }
        if (unaligned) {
            both(c, "execution.checkpointing.unaligned.enabled", "execution.checkpointing.unaligned", "true");
            both(c, "execution.checkpointing.aligned-checkpoint-timeout",
                    "execution.checkpointing.alignment-timeout", "0ms");
        }
        if (bufferTimeoutMs >= 0) {
            both(c, "execution.buffer-timeout.interval", "execution.buffer-timeout", bufferTimeoutMs + "ms");
        }
        if (restorePath != null) {
            both(c, "execution.state-recovery.path", "execution.savepoint.path", restorePath);
            both(c, "execution.state-recovery.claim-mode", "execution.savepoint-restore-mode", claimMode);
        }
        return c;
    }

    private static void both(Map<String, String> c, String key, String deprecatedKey, String value) {
        c.put(key, value);
        c.put(deprecatedKey, value);
    }
}
