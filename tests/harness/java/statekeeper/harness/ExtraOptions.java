package statekeeper.harness;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * Flink options a plan adds to a job's {@link JobSpec} configuration: plan entries
 * {@code <job>.flink.<key>=<value>} (ForSt in checkpoint storage, the changelog backend). The value
 * {@code @checkpoint_root} (alone or as a prefix) stands for the run's own checkpoint directory, so a
 * verifier's restore writes DSTL files into its fresh directory, never into the store it restores
 * from.
 *
 * <p>A class of its own (and out of every fixture hash but those of the plans that use it): {@link
 * JobSpec} is covered by every fixture's hash, and these options only exist in newer plans. It extends
 * {@link StreamExecutionEnvironment} only to reach the protected context-environment hooks, through
 * which {@link VerifyMany} applies the options to {@link JobRunner}'s local environment.
 */
public final class ExtraOptions extends StreamExecutionEnvironment {
    static final String PREFIX = "flink.";
    /** Options only a verifier's restore applies, over {@link #PREFIX}'s (see {@link VerifyMany}). */
    static final String VERIFY_PREFIX = "verify.flink.";
    static final String CHECKPOINT_ROOT = "@checkpoint_root";

    private ExtraOptions() {
    }

    /** The {@code <job>.flink.*} entries of {@code plan}, keys without the prefix, in key order. */
    public static Map<String, String> of(String job, Properties plan) {
        return of(job, plan, PREFIX);
    }

    /** The {@code <job>.<prefix>*} entries of {@code plan}, keys without the prefix, in key order. */
    public static Map<String, String> of(String job, Properties plan, String kind) {
        Map<String, String> out = new java.util.TreeMap<>();
        String prefix = job + "." + kind;
        for (String key : plan.stringPropertyNames()) {
            if (key.startsWith(prefix)) {
                out.put(key.substring(prefix.length()), plan.getProperty(key));
            }
        }
        return out;
    }

    /** {@code conf} with {@code extra} added (extra wins); {@code @checkpoint_root} resolved. */
    public static Map<String, String> apply(Map<String, String> conf, Map<String, String> extra) {
        Map<String, String> out = new LinkedHashMap<>(conf);
        String root = conf.get("execution.checkpointing.dir");
        for (Map.Entry<String, String> e : extra.entrySet()) {
            String value = e.getValue();
            if (value.startsWith(CHECKPOINT_ROOT)) {
                if (root == null) {
                    throw new IllegalArgumentException(e.getKey() + "=" + value + ": no checkpoint directory set");
                }
                String base = root.endsWith("/") ? root.substring(0, root.length() - 1) : root;
                value = base + value.substring(CHECKPOINT_ROOT.length());
            }
            out.put(e.getKey(), value);
        }
        return out;
    }

    /**
     * Until {@link #uninstall()}, every {@code getExecutionEnvironment(conf)} of this thread builds a
     * local environment whose configuration has {@code extra} applied (what {@link JobRunner} uses).
     */
    public static void install(Map<String, String> extra) {
        initializeContextEnvironment(configuration -> {
            Map<String, String> map = apply(configuration.toMap(), extra);
            map.put("execution.target", "local");
            map.put("execution.attached", "true");
            return new StreamExecutionEnvironment(Configuration.fromMap(map));
        });
    }

    public static void uninstall() {
        resetContextEnvironment();
    }
}
