package statekeeper.harness;

import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.locks.LockSupport;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.CheckpointListener;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;

/**
 * The deterministic job: v = 0, 1, 2, ... from one ordered source; key k = v % K.
 *
 * <pre>
 *   sequence (p=1) -> gate (p=1: throttle, operator list + union state, order check)
 *     -keyBy-> invariant (p=P: keyed count + map state; count_before == (v - k) / K)
 *     -forward|rebalance-> tally (operator list + union state; optional sleep = backpressure)
 *     -> discard
 * </pre>
 *
 * Any mismatch throws and (restart strategy none) fails the job, so a wrong or missing restore
 * cannot pass silently. Operator uids are fixed so restores map state by uid.
 */
public final class Pipeline {
    private Pipeline() {}

    public static void build(StreamExecutionEnvironment env, JobSpec spec) {
        DataStream<Long> gated = env.fromSequence(0, Long.MAX_VALUE)
                .setParallelism(1).uid("sequence-source").name("sequence-source")
                .map(new SequenceGate(spec.rate)).setParallelism(1).uid("sequence-gate").name("sequence-gate");
        DataStream<Long> checked = gated
                .keyBy(new ModKey(spec.keys))
                .process(new KeyedInvariant(spec.keys, spec.payloadBytes))
                .setParallelism(spec.parallelism).uid("keyed-invariant").name("keyed-invariant");
        if (spec.rebalanceTally) {
            checked = checked.rebalance();
        }
        checked.map(new Tally(spec.tallySleepMicros))
                .setParallelism(spec.tallyParallelism).uid("tally").name("tally")
                .sinkTo(new DiscardingSink<>())
                .setParallelism(spec.tallyParallelism).uid("discard").name("discard");
    }

    /** Deterministic map-state value for element v. */
    static byte[] payload(long v, int size) {
        byte[] out = new byte[size];
        long x = v * 0x9E3779B97F4A7C15L + 0x632BE59BD9B4E019L;
        for (int i = 0; i < size; i++) {
            x ^= x << 13;
            x ^= x >>> 7;
            x ^= x << 17;
            out[i] = (byte) x;
        }
        return out;
    }

    public static final class ModKey implements KeySelector<Long, Long> {
        private final int keys;

        ModKey(int keys) {
            this.keys = keys;
        }

        @Override
        public Long getKey(Long v) {
            return v % keys;
        }
    }

    /**
     * Throttles the source, checks it is gap-free, keeps the next expected element in operator
     * list state and in union list state, and reports completed checkpoints to the driver.
     */
    public static final class SequenceGate extends RichMapFunction<Long, Long>
            implements CheckpointedFunction, CheckpointListener {
        private final int rate;
        private transient ListState<Long> nextState;
        private transient ListState<Long> unionState;
        private transient long next;
        private transient long emitted;
        private transient long startNanos;

        SequenceGate(int rate) {
            this.rate = rate;
        }

        @Override
        public void initializeState(FunctionInitializationContext ctx) throws Exception {
            nextState = ctx.getOperatorStateStore().getListState(
                    new ListStateDescriptor<>("gate-next", Types.LONG));
            unionState = ctx.getOperatorStateStore().getUnionListState(
                    new ListStateDescriptor<>("gate-next-union", Types.LONG));
            next = 0;
            if (ctx.isRestored()) {
                long fromList = -1;
                for (Long n : nextState.get()) {
                    fromList = Math.max(fromList, n);
                }
                long fromUnion = -1;
                for (Long n : unionState.get()) {
                    fromUnion = Math.max(fromUnion, n);
                }
                if (fromList < 0 || fromList != fromUnion) {
                    Probe.violation("gate: restored list state " + fromList + " != union state " + fromUnion);
                }
                next = fromList;
                Probe.GATE_RESTORED_NEXT.set(next);
            }
        }

        @Override
        public void open(OpenContext openContext) {
            startNanos = System.nanoTime();
            emitted = 0;
        }

        @Override
        public Long map(Long v) {
            Probe.GATE_FIRST_ELEMENT.compareAndSet(-1, v);
            if (v != next) {
                Probe.violation("gate: expected element " + next + " but got " + v);
            }
            next = v + 1;
            emitted++;
            long due = startNanos + emitted * 1_000_000_000L / rate;
            long wait = due - System.nanoTime();
            if (wait > 0) {
                LockSupport.parkNanos(wait);
            }
            return v;
        }

        @Override
        public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            nextState.update(java.util.List.of(next));
            unionState.update(java.util.List.of(next));
        }

        @Override
        public void notifyCheckpointComplete(long checkpointId) {
            Probe.COMPLETED.add(checkpointId);
        }
    }

    /** Keyed state: a count and a map v -> payload(v); checks both against the input. */
    public static final class KeyedInvariant extends KeyedProcessFunction<Long, Long, Long> {
        private final int keys;
        private final int payloadBytes;
        private transient ValueState<Long> count;
        private transient MapState<Long, byte[]> seen;
        private transient Set<Long> keysThisRun;

        KeyedInvariant(int keys, int payloadBytes) {
            this.keys = keys;
            this.payloadBytes = payloadBytes;
        }

        @Override
        public void open(OpenContext openContext) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
            seen = getRuntimeContext().getMapState(
                    new MapStateDescriptor<>("seen", Types.LONG, PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO));
            keysThisRun = new HashSet<>();
        }

        @Override
        public void processElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            long k = v % keys;
            long expected = (v - k) / keys;
            Long stored = count.value();
            long before = stored == null ? 0 : stored;
            if (before != expected) {
                Probe.violation("key " + k + ": element " + v + " expects count " + expected
                        + " but state holds " + before);
            }
            if (keysThisRun.add(k)) {
                if (before > 0) {
                    byte[] prev = seen.get(v - keys);
                    if (prev == null || !Arrays.equals(prev, payload(v - keys, payloadBytes))) {
                        Probe.violation("key " + k + ": map state lacks the payload of element " + (v - keys));
                    }
                    Probe.KEYED_RESTORE_CHECKS.incrementAndGet();
                } else {
                    Probe.KEYED_FRESH_KEYS.incrementAndGet();
                }
            }
            count.update(before + 1);
            seen.put(v, payload(v, payloadBytes));
            out.collect(v);
        }
    }

    /**
     * Operator list state (count per subtask) and union list state ("subtask/parallelism/count"
     * for every subtask); optionally slow, to back-pressure the network for unaligned checkpoints.
     */
    public static final class Tally extends RichMapFunction<Long, Long> implements CheckpointedFunction {
        private final long sleepMicros;
        private transient ListState<Long> countState;
        private transient ListState<String> unionState;
        private transient long count;

        Tally(long sleepMicros) {
            this.sleepMicros = sleepMicros;
        }

        @Override
        public void initializeState(FunctionInitializationContext ctx) throws Exception {
            countState = ctx.getOperatorStateStore().getListState(
                    new ListStateDescriptor<>("tally-count", Types.LONG));
            unionState = ctx.getOperatorStateStore().getUnionListState(
                    new ListStateDescriptor<>("tally-union", Types.STRING));
            count = 0;
            if (ctx.isRestored()) {
                Probe.TALLY_RESTORED.incrementAndGet();
                for (Long c : countState.get()) {
                    count += c;
                }
                Set<Integer> subtasks = new HashSet<>();
                int parallelism = -1;
                for (String entry : unionState.get()) {
                    String[] parts = entry.split("/");
                    subtasks.add(Integer.parseInt(parts[0]));
                    parallelism = Integer.parseInt(parts[1]);
                }
                if (parallelism <= 0 || subtasks.size() != parallelism) {
                    Probe.violation("tally: union state names subtasks " + subtasks
                            + " of a snapshot with parallelism " + parallelism);
                }
                Probe.TALLY_UNION_OK.incrementAndGet();
            }
        }

        @Override
        public Long map(Long v) {
            count++;
            if (sleepMicros > 0) {
                LockSupport.parkNanos(sleepMicros * 1000);
            }
            return v;
        }

        @Override
        public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            countState.update(java.util.List.of(count));
            int index = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
            int parallelism = getRuntimeContext().getTaskInfo().getNumberOfParallelSubtasks();
            unionState.update(java.util.List.of(index + "/" + parallelism + "/" + count));
        }
    }
}
