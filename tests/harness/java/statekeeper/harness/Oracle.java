package statekeeper.harness;

import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.File;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintWriter;
import java.io.RandomAccessFile;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.MasterState;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.state.IncrementalKeyedStateHandle.HandleAndLocalPath;
import org.apache.flink.runtime.state.IncrementalRemoteKeyedStateHandle;
import org.apache.flink.runtime.state.KeyGroupsStateHandle;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.OperatorStreamStateHandle;
import org.apache.flink.runtime.state.StreamStateHandle;
import org.apache.flink.runtime.state.changelog.ChangelogStateBackendHandle;
import org.apache.flink.runtime.state.filesystem.FileStateHandle;
import org.apache.flink.runtime.state.filesystem.RelativeFileStateHandle;
import org.apache.flink.runtime.state.memory.ByteStreamStateHandle;

/**
 * Ground truth for the `_metadata` codec: loads files with Flink's own
 * {@code Checkpoints.loadCheckpointMetadata} and writes one JSON object per file (JSON lines).
 *
 * <p>Usage: {@code Oracle <list-file> <output.jsonl>}, the list file holding one `_metadata` path
 * per line (many files per JVM: startup is the cost). A file Flink cannot load yields
 * {@code {"path":..., "error":"<class>: <message>"}}.
 *
 * <p>Handle classes that only exist in some versions (file merging 1.20+, merged channel state
 * 2.1+) are recognised by class name and read by reflection, so one source set compiles against
 * every supported Flink.
 */
public final class Oracle {
    private static final int MAGIC = 0x4960672D;
    private static final String SEGMENT = "org.apache.flink.runtime.state.filemerging.SegmentFileStateHandle";
    private static final String EMPTY_SEGMENT =
            "org.apache.flink.runtime.state.filemerging.EmptySegmentFileStateHandle";
    private static final String FM_OPERATOR =
            "org.apache.flink.runtime.state.filemerging.FileMergingOperatorStreamStateHandle";
    private static final String CHANGELOG_STREAM =
            "org.apache.flink.runtime.state.changelog.ChangelogStateHandleStreamImpl";

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: Oracle <list-file> <output.jsonl>");
            System.exit(2);
        }
        List<String> paths = Files.readAllLines(new File(args[0]).toPath(), StandardCharsets.UTF_8);
        try (PrintWriter out = new PrintWriter(new File(args[1]), StandardCharsets.UTF_8)) {
            for (String path : paths) {
                if (path.isBlank()) {
                    continue;
                }
                Map<String, Object> result;
                try {
                    result = describe(new File(path));
                } catch (Throwable t) {
                    result = new LinkedHashMap<>();
                    result.put("path", path);
                    result.put("error", t.getClass().getName() + ": " + t.getMessage());
                }
                out.println(Json.write(result));
            }
        }
    }

    static Map<String, Object> describe(File file) throws Exception {
        int version;
        try (RandomAccessFile raf = new RandomAccessFile(file, "r")) {
            int magic = raf.readInt();
            if (magic != MAGIC) {
                throw new IOException("not a Flink _metadata file (magic " + Integer.toHexString(magic) + ")");
            }
            version = raf.readInt();
        }
        String pointer = file.getAbsoluteFile().getParentFile().toURI().toString();
        CheckpointMetadata md;
        try (InputStream raw = new FileInputStream(file);
                DataInputStream in = new DataInputStream(new BufferedInputStream(raw, 1 << 16))) {
            md = Checkpoints.loadCheckpointMetadata(in, Oracle.class.getClassLoader(), pointer);
        }
        Walker w = new Walker();
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("path", file.getPath());
        r.put("metadata_version", version);
        r.put("checkpoint_id", md.getCheckpointId());
        r.put("properties", properties(md));
        List<Object> masters = new ArrayList<>();
        for (MasterState ms : md.getMasterStates()) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("name", ms.name());
            m.put("version", ms.version());
            m.put("bytes", ms.bytes().length);
            masters.add(m);
        }
        r.put("master_states", masters);
        List<Object> operators = new ArrayList<>();
        for (OperatorState op : md.getOperatorStates()) {
            operators.add(w.operator(op));
        }
        r.put("operators", operators);
        r.put("handles", w.handles);
        List<Object> files = new ArrayList<>();
        for (Map.Entry<String, Long> e : w.files.entrySet()) {
            Map<String, Object> f = new LinkedHashMap<>();
            f.put("path", e.getKey());
            f.put("size", e.getValue());
            files.add(f);
        }
        r.put("referenced_files", files);
        r.put("inline_bytes_total", w.inlineTotal);
        return r;
    }

    private static Object properties(CheckpointMetadata md) {
        Object props = call(md, "getCheckpointProperties");
        if (props == null) {
            return null;
        }
        Map<String, Object> p = new LinkedHashMap<>();
        Object savepoint = call(props, "isSavepoint");
        p.put("snapshot_type", Boolean.TRUE.equals(savepoint) ? "savepoint" : "checkpoint");
        Object type = call(props, "getCheckpointType");
        Object format = type == null ? null : callIfExists(type, "getFormatType");
        p.put("format", format == null ? null : format.toString());
        Object sharing = type == null ? null : callIfExists(type, "getSharingFilesStrategy");
        p.put("sharing", sharing == null ? null : sharing.toString());
        return p;
    }

    /** Walks every handle of one file, collecting leaf stream handles and referenced files. */
    private static final class Walker {
        final List<Object> handles = new ArrayList<>();
        final Map<String, Long> files = new LinkedHashMap<>();
        long inlineTotal;

        Map<String, Object> operator(OperatorState op) {
            String id = op.getOperatorID().toHexString();
            Map<String, Object> o = new LinkedHashMap<>();
            o.put("id", id);
            o.put("name", optional(callIfExists(op, "getOperatorName")));
            o.put("uid", optional(callIfExists(op, "getOperatorUid")));
            o.put("parallelism", op.getParallelism());
            o.put("max_parallelism", op.getMaxParallelism());
            o.put("fully_finished", op.isFullyFinished());
            ByteStreamStateHandle coordinator = op.getCoordinatorState();
            o.put("coordinator_inline_bytes", coordinator == null ? null : coordinator.getData().length);
            if (coordinator != null) {
                stream(coordinator, id, null, "coordinator", "delegate", null, null);
            }
            List<Object> subtasks = new ArrayList<>();
            for (Map.Entry<Integer, OperatorSubtaskState> e : op.getSubtaskStates().entrySet()) {
                Map<String, Object> s = new LinkedHashMap<>();
                s.put("index", e.getKey());
                s.put("finished", e.getValue().isFinished());
                subtasks.add(s);
                subtask(id, e.getKey(), e.getValue());
            }
            o.put("subtasks", subtasks);
            return o;
        }

        void subtask(String op, int index, OperatorSubtaskState s) {
            for (Object h : s.getManagedOperatorState()) {
                operatorHandle(h, op, index, "managed_operator");
            }
            for (Object h : s.getRawOperatorState()) {
                operatorHandle(h, op, index, "raw_operator");
            }
            for (KeyedStateHandle h : s.getManagedKeyedState()) {
                keyed(h, op, index, "managed_keyed");
            }
            for (KeyedStateHandle h : s.getRawKeyedState()) {
                keyed(h, op, index, "raw_keyed");
            }
            for (Object h : (Collection<?>) s.getInputChannelState()) {
                channel(h, op, index, "input_channel");
            }
            for (Object h : (Collection<?>) s.getResultSubpartitionState()) {
                channel(h, op, index, "output_channel");
            }
        }

        void operatorHandle(Object h, String op, int index, String slot) {
            if (!(h instanceof OperatorStreamStateHandle)) {
                throw new IllegalStateException("unknown operator state handle " + h.getClass().getName());
            }
            List<String> dirs = null;
            if (isA(h, FM_OPERATOR)) {
                dirs = new ArrayList<>();
                dirs.add(directory(call(h, "getTaskOwnedDirHandle")));
                dirs.add(directory(call(h, "getSharedDirHandle")));
            }
            stream(((OperatorStreamStateHandle) h).getDelegateStateHandle(), op, index, slot, "delegate", null, dirs);
        }

        void keyed(KeyedStateHandle h, String op, int index, String slot) {
            if (h instanceof IncrementalRemoteKeyedStateHandle) {
                IncrementalRemoteKeyedStateHandle inc = (IncrementalRemoteKeyedStateHandle) h;
                stream(inc.getMetaDataStateHandle(), op, index, slot, "meta", null, null);
                for (HandleAndLocalPath e : inc.getSharedState()) {
                    stream(e.getHandle(), op, index, slot, "shared", e.getLocalPath(), null);
                }
                for (HandleAndLocalPath e : inc.getPrivateState()) {
                    stream(e.getHandle(), op, index, slot, "private", e.getLocalPath(), null);
                }
            } else if (h instanceof KeyGroupsStateHandle) {
                stream(((KeyGroupsStateHandle) h).getDelegateStateHandle(), op, index, slot, "delegate", null, null);
            } else if (h instanceof ChangelogStateBackendHandle) {
                ChangelogStateBackendHandle cl = (ChangelogStateBackendHandle) h;
                for (KeyedStateHandle m : cl.getMaterializedStateHandles()) {
                    keyed(m, op, index, slot);
                }
                for (Object d : cl.getNonMaterializedStateHandles()) {
                    if (isA(d, CHANGELOG_STREAM)) {
                        for (Object pair : (Collection<?>) call(d, "getHandlesAndOffsets")) {
                            Object handle = readField(pair, "f0");
                            stream((StreamStateHandle) handle, op, index, slot, "delta", null, null);
                        }
                    }
                    // In-memory changelog deltas (tag 9) hold no stream handle and no file.
                }
            } else if (h != null) {
                throw new IllegalStateException("unknown keyed state handle " + h.getClass().getName());
            }
        }

        void channel(Object h, String op, int index, String slot) {
            // InputChannelStateHandle / ResultSubpartitionStateHandle and 2.1+ merged handles all
            // expose getDelegate().
            stream((StreamStateHandle) call(h, "getDelegate"), op, index, slot, "delegate", null, null);
        }

        void stream(StreamStateHandle h, String op, Integer subtask, String slot, String role,
                String localName, List<String> managedDirs) {
            if (h == null) {
                return;
            }
            if (h instanceof KeyGroupsStateHandle) {
                // Nested key-groups handle in a stream position (tag 3): its delegate is the leaf.
                stream(((KeyGroupsStateHandle) h).getDelegateStateHandle(), op, subtask, slot, role, localName,
                        managedDirs);
                return;
            }
            Map<String, Object> e = new LinkedHashMap<>();
            e.put("operator_id", op);
            e.put("subtask", subtask);
            e.put("slot", slot);
            e.put("role", role);
            e.put("local_name", localName);
            e.put("class", h.getClass().getName());
            String path = null;
            String relative = null;
            Integer inline = null;
            Long startPos = null;
            String logicalId = null;
            long size = h.getStateSize();
            if (h instanceof ByteStreamStateHandle) {
                inline = ((ByteStreamStateHandle) h).getData().length;
                inlineTotal += inline;
            } else if (h instanceof RelativeFileStateHandle) {
                path = ((RelativeFileStateHandle) h).getFilePath().toString();
                relative = ((RelativeFileStateHandle) h).getRelativePath();
                reference(path, size);
            } else if (h instanceof FileStateHandle) {
                path = ((FileStateHandle) h).getFilePath().toString();
                reference(path, size);
            } else if (isA(h, EMPTY_SEGMENT)) {
                // Tag 16: a placeholder for "no state". Its in-memory path "empty" is not a file.
            } else if (isA(h, SEGMENT)) {
                path = call(h, "getFilePath").toString();
                startPos = (Long) call(h, "getStartPos");
                Object id = call(h, "getLogicalFileId");
                logicalId = id == null ? null : String.valueOf(callIfExists(id, "getKeyString"));
                reference(path, startPos + size);
            }
            e.put("path", path);
            e.put("relative_path", relative);
            e.put("size", size);
            e.put("inline_bytes", inline);
            e.put("start_pos", startPos);
            e.put("logical_file_id", logicalId);
            e.put("managed_dirs", managedDirs);
            handles.add(e);
        }

        void reference(String path, long extent) {
            files.merge(path, extent, Math::max);
        }
    }

    private static String directory(Object dirHandle) {
        return dirHandle == null ? null : call(dirHandle, "getDirectory").toString();
    }

    private static Object optional(Object o) {
        if (o instanceof Optional) {
            return ((Optional<?>) o).orElse(null);
        }
        return o;
    }

    private static boolean isA(Object o, String className) {
        for (Class<?> c = o.getClass(); c != null; c = c.getSuperclass()) {
            if (c.getName().equals(className)) {
                return true;
            }
        }
        return false;
    }

    private static Object call(Object target, String method) {
        try {
            Method m = target.getClass().getMethod(method);
            m.setAccessible(true);
            return m.invoke(target);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot call " + target.getClass().getName() + "." + method, e);
        }
    }

    private static Object callIfExists(Object target, String method) {
        try {
            Method m = target.getClass().getMethod(method);
            m.setAccessible(true);
            return m.invoke(target);
        } catch (NoSuchMethodException e) {
            return null;
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot call " + target.getClass().getName() + "." + method, e);
        }
    }

    private static Object readField(Object target, String field) {
        try {
            return target.getClass().getField(field).get(target);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot read " + target.getClass().getName() + "." + field, e);
        }
    }
}
