package statekeeper.delta;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Iterator;

import io.delta.storage.HadoopFileSystemLogStore;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Options;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.s3a.RemoteFileChangedException;

/**
 * Delta's log store for s3a:// tables that any number of drivers may write at once.
 *
 * <p>Delta commits version N by creating {@code _delta_log/N.json} with overwrite=false and relies on the store
 * to refuse a second creator. Delta's default for s3a (S3SingleDriverLogStore) checks for the file and then
 * uploads it: two drivers can both pass the check, and the later upload silently replaces the earlier commit.
 * Here the upload itself is create-only (S3A's conditional create, an {@code If-None-Match: *} PUT that S3 and
 * compatible stores answer with 412 when the object exists), so exactly one creator wins and the other gets
 * {@link java.nio.file.FileAlreadyExistsException}, which Delta turns into a conflict check and a retry or a
 * Concurrent*Exception. The option is mandatory: a file system that cannot honour it fails the write rather than
 * committing unsafely.
 *
 * <p>A refusal can also answer this writer's own retry: the first upload landed, its answer was lost, and the
 * client uploaded again. Taken for another writer's commit, Delta would then check the write against itself and
 * either fail it (and the caller delete the data files its landed commit names) or commit it a second time as the
 * next version. So a refused upload is read back: the very bytes this write uploaded (a commit names its own
 * transaction and time, so no other writer's commit holds them) mean the commit is this writer's and it succeeded.
 */
public class S3ConditionalLogStore extends HadoopFileSystemLogStore {

    public S3ConditionalLogStore(Configuration hadoopConf) {
        super(hadoopConf);
    }

    @Override
    public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration hadoopConf)
            throws IOException {
        FileSystem fs = path.getFileSystem(hadoopConf);
        FSDataOutputStreamBuilder<?, ?> builder = fs.createFile(path).create().overwrite(overwrite);
        if (!overwrite) {
            builder.must(Options.CreateFileOptionKeys.FS_OPTION_CREATE_CONDITIONAL_OVERWRITE, "true");
        }
        ByteArrayOutputStream commit = new ByteArrayOutputStream();   // a commit file: kilobytes
        while (actions.hasNext()) {
            commit.write((actions.next() + "\n").getBytes(StandardCharsets.UTF_8));
        }
        byte[] bytes = commit.toByteArray();
        try (FSDataOutputStream out = builder.build()) {
            out.write(bytes);
        } catch (RemoteFileChangedException | org.apache.hadoop.fs.FileAlreadyExistsException e) {
            // 412 on the create-only upload (or S3A's own existence check): this version is taken.
            if (overwrite) {
                throw e;
            }
            if (holds(fs, path, bytes)) {
                return;   // by this write's own earlier upload, whose answer was lost
            }
            java.nio.file.FileAlreadyExistsException exists =
                new java.nio.file.FileAlreadyExistsException(path.toString());
            exists.initCause(e);
            throw exists;
        }
    }

    /**
     * Whether the object at {@code path} is exactly {@code bytes}. Unreadable, the commit's outcome is unknown: an
     * IOException (not a conflict, which would have the caller delete what the commit may name), and the caller
     * looks its commit up in the log.
     */
    private static boolean holds(FileSystem fs, Path path, byte[] bytes) throws IOException {
        try (FSDataInputStream in = fs.open(path)) {
            return Arrays.equals(in.readNBytes(bytes.length + 1), bytes);
        } catch (IOException e) {
            throw new IOException("the upload of " + path + " was refused as existing, and reading it back to tell "
                + "whether it is this write's own commit failed: the commit's outcome is unknown", e);
        }
    }

    @Override
    public Boolean isPartialWriteVisible(Path path, Configuration hadoopConf) {
        // An S3 object appears whole when its upload completes, or not at all.
        return false;
    }
}
