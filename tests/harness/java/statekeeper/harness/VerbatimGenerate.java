package statekeeper.harness;

import java.io.FileInputStream;
import java.io.InputStream;
import java.net.URI;
import java.util.Properties;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * {@link Generate} for store roots whose names need URI escaping (a space, a {@code %}).
 *
 * <p>{@link JobSpec} hands Flink its checkpoint and savepoint directories as {@code File.toURI()}
 * strings. Flink's {@code Path(String)} never percent-decodes, so for {@code /s/odd dir%41+x} Flink
 * would write into a directory literally named {@code odd%20dir%2541+x} while the generator looks for
 * the job in {@code odd dir%41+x}. For plain names both spellings are the same directory, which is why
 * {@link Generate} (whose sources every fixture hash covers) is left as it is: this entry point
 * installs a context environment that rewrites those directory options to {@code file:<absolute
 * path>}, the path exactly as written, and then runs {@link Generate}. Restore paths are already
 * plain absolute paths. Savepoints are triggered with a {@code toURI()} target inside
 * {@link JobRunner}, so plans with savepoints are refused.
 *
 * <p>Usage: {@code VerbatimGenerate <plan.properties> <result.jsonl>} (as {@link Generate}).
 */
public final class VerbatimGenerate extends StreamExecutionEnvironment {
    private static final String[] DIRECTORY_KEYS = {
        "execution.checkpointing.dir", "state.checkpoints.dir",
        "execution.checkpointing.savepoint-dir", "state.savepoints.dir",
    };

    private VerbatimGenerate() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: VerbatimGenerate <plan.properties> <result.jsonl>");
            System.exit(2);
        }
        Properties plan = new Properties();
        try (InputStream in = new FileInputStream(args[0])) {
            plan.load(in);
        }
        for (String key : plan.stringPropertyNames()) {
            if (key.endsWith(".savepoints") && !plan.getProperty(key).isBlank()) {
                System.err.println("VerbatimGenerate: savepoints would go to the percent-encoded directory ("
                        + key + "=" + plan.getProperty(key) + ")");
                System.exit(2);
            }
        }
        // What createLocalEnvironment(conf) builds (it refuses to run inside a context environment).
        initializeContextEnvironment(configuration -> new StreamExecutionEnvironment(verbatim(configuration)));
        Generate.main(args);
    }

    /** A copy of {@code conf} whose store directories are {@code file:} + the decoded path. */
    static Configuration verbatim(Configuration conf) {
        java.util.Map<String, String> map = conf.toMap();
        for (String key : DIRECTORY_KEYS) {
            String value = map.get(key);
            if (value != null && value.startsWith("file:")) {
                map.put(key, "file:" + URI.create(value).getPath());
            }
        }
        map.put("execution.target", "local");
        map.put("execution.attached", "true");
        return Configuration.fromMap(map);
    }
}
