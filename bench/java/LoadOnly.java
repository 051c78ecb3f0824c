import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.File;
import java.io.FileInputStream;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;

/**
 * Flink's own `_metadata` loader and nothing else (the stricter baseline for bench.metadata_parse:
 * the harness oracle also walks and prints every handle). Same buffered stream as the oracle.
 * Prints {"load_s": seconds inside the JVM, "operators": n}.
 */
public final class LoadOnly {
    public static void main(String[] args) throws Exception {
        File file = new File(args[0]);
        String pointer = file.getAbsoluteFile().getParentFile().toURI().toString();
        long t0 = System.nanoTime();
        CheckpointMetadata md;
        try (DataInputStream in = new DataInputStream(new BufferedInputStream(new FileInputStream(file), 1 << 16))) {
            md = Checkpoints.loadCheckpointMetadata(in, LoadOnly.class.getClassLoader(), pointer);
        }
        long t1 = System.nanoTime();
        System.out.println("{\"load_s\": " + (t1 - t0) / 1e9 + ", \"operators\": " + md.getOperatorStates().size() + "}");
    }
}
