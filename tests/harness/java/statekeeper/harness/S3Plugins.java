package statekeeper.harness;

import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.fs.FileSystem;
import org.apache.flink.core.plugin.PluginUtils;

/**
 * Loads Flink's S3 filesystem plugin as a Flink distribution does, for a harness JVM whose paths are
 * {@code s3://} (tests/harness/s3_plugin.py): the plugin jar under {@code $FLINK_PLUGINS_DIR/s3-fs-hadoop/}, the
 * server's endpoint and keys from the environment (never the argv). A MiniCluster does not initialize the
 * file systems from plugins by itself, so the entry point calls {@link #initialize()} before it builds a job.
 * Without {@code STATEKEEPER_FLINK_S3_ENDPOINT} it does nothing: a local store needs no plugin.
 */
final class S3Plugins {
    private S3Plugins() {}

    static boolean isRemote(String path) {
        return path != null && path.contains("://") && !path.startsWith("file:");
    }

    static void initialize() throws Exception {
        String endpoint = System.getenv("STATEKEEPER_FLINK_S3_ENDPOINT");
        if (endpoint == null || endpoint.isBlank()) {
            return;
        }
        if (System.getenv("FLINK_PLUGINS_DIR") == null) {
            throw new IllegalStateException("STATEKEEPER_FLINK_S3_ENDPOINT is set but FLINK_PLUGINS_DIR is not:"
                    + " the harness names the plugins directory (tests/harness/s3_plugin.py)");
        }
        Map<String, String> m = new LinkedHashMap<>();
        m.put("s3.endpoint", endpoint);
        m.put("s3.path.style.access", "true");
        m.put("s3.access.key", System.getenv("STATEKEEPER_FLINK_S3_ACCESS_KEY"));
        m.put("s3.secret.key", System.getenv("STATEKEEPER_FLINK_S3_SECRET_KEY"));
        Configuration conf = Configuration.fromMap(m);
        FileSystem.initialize(conf, PluginUtils.createPluginManagerFromRootFolder(conf));
    }
}
