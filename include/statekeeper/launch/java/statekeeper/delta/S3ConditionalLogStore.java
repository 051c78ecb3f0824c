package statekeeper.delta;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Iterator;

import io.delta.storage.HadoopFileSystemLogStore;
import org.apache.hadoop.conf.Configuration;
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
        try (FSDataOutputStream out = builder.build()) {
            while (actions.hasNext()) {
                out.write((actions.next() + "\n").getBytes(StandardCharsets.UTF_8));
            }
        } catch (RemoteFileChangedException | org.apache.hadoop.fs.FileAlreadyExistsException e) {
            // 412 on the create-only upload (or S3A's own existence check): another writer holds this version.
            if (overwrite) {
                throw e;
            }
            java.nio.file.FileAlreadyExistsException exists =
                new java.nio.file.FileAlreadyExistsException(path.toString());
            exists.initCause(e);
            throw exists;
        }
    }

    @Override
    public Boolean isPartialWriteVisible(Path path, Configuration hadoopConf) {
        // An S3 object appears whole when its upload completes, or not at all.
        return false;
    }
}
