"""The one bulk engine both movers drive: batching, pacing per prefix, retries, per-item outcomes.

    engine = BulkEngine(BulkSettings(in_flight=4, retry=RetryPolicy(...), pace=PaceSettings(...)), on_retry=...)
    for results in engine.run(operation, works):     # one list of results per answered request
        ...
    engine.pacer.report()                            # what each prefix achieved

GC's deleter sends batches (S3 DeleteObjects of up to 1,000 keys, GCS batches of 100, Azure Blob Batch of 256,
local lstat + unlink in chunks); the DR mover sends one object per request. Both hand the engine `Work` items
that name their lane (the prefix they are paced by: a Flink job directory) and their group (what may share one
request: a bucket, a container), and an `Operation` that sends one batch and answers per item:

* settled: the item's result (deleted, changed, copied, failed for good...);
* again: a retriable failure of that item (throttled, a 5xx); it is sent again after a back-off, in a later batch.

A request that fails as a whole is judged by the operation (statekeeper.storage.retry.judge unless it knows
better): retriable failures send every item of the batch again after a back-off, others settle them through
`give_up`. Retries are counted when they are decided: one per failed request, else one per item (`on_retry`,
and each item's `Work.retries`). Throttling answers also halve the lane's rate (statekeeper.storage.pacing).

What stays hand-written here, and why: the SDKs' retry machinery (botocore's standard and adaptive modes,
google-api-core's Retry, azure-core's RetryPolicy) retries a request that failed as a whole, with its own clock;
it cannot retry one key of a 200 answer to a batch (S3 reports a throttled key inside DeleteObjects' response, GCS
and Azure batches answer per sub-request), it would pace per client instead of per prefix, and its retries would
not be counted per key for gc_actions. So batch requests go out with the SDK's retries off and are retried here.
Requests of one object (a copy, a ranged read, a multipart part) keep the SDK's own retries; the S3 client
reports each throttled attempt to the pacer of the engine whose worker made it (`note_throttled`).

Scheduling: works are pulled from the input lazily (a window of them), so a long generator is never
materialized; the thread iterating `run` schedules, the pool's threads send. A batch is formed from the lanes of
one group that are ready now (round robin), or, when none is, from the lane ready first; its tokens are reserved
when it is formed and the worker waits for them before sending.
"""
from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Generic, Protocol, TypeVar

from statekeeper.storage.pacing import Pacer, PaceSettings
from statekeeper.storage.retry import Failure, RetryPolicy, ThrottleLog, judge

log = logging.getLogger("statekeeper.storage.bulk")

T = TypeVar("T")
R = TypeVar("R")


@dataclass(slots=True)
class Work(Generic[T]):
    """One item on its way through the engine."""

    item: T
    lane: str                          # the prefix it is paced by
    group: Hashable = None             # items of one group may share a request (None: any)
    retries: int = 0                   # retries decided for it so far
    attempts: int = 0                  # requests that carried it so far
    last_error: str = ""


@dataclass(slots=True)   # not frozen: one per item of every batch, and a frozen __init__ costs four times as much
class Answer(Generic[R]):
    """An operation's answer for one item of a batch: its result, or a retriable failure."""

    result: R | None = None
    failure: Failure | None = None     # set: keep the item pending and send it again after a back-off
    message: str = ""
    retries: int = 0                   # retries spent for this item inside the request (an SDK's, a follow-up read)

    @staticmethod
    def settled(result: R, retries: int = 0) -> Answer[R]:
        return Answer(result=result, retries=retries)

    @staticmethod
    def again(failure: Failure, message: str) -> Answer[R]:
        return Answer(failure=failure, message=message)


class Operation(Protocol[T, R]):
    """What the engine needs from a mover."""

    batch_limit: int                   # items per request

    def describe(self, group: Hashable) -> str:
        """The request, for log lines: "DeleteObjects on s3://bucket"."""

    def send(self, group: Hashable, batch: Sequence[Work[T]]) -> Sequence[Answer[R]]:
        """Send one request for `batch` (all of one group); one answer per item, in order. Raising means the
        request failed as a whole."""

    def judge(self, exc: BaseException) -> Failure:
        """How to treat `exc`, raised by `send` (re-raise a programming error to stop the run)."""

    def give_up(self, work: Work[T], message: str, failure: Failure) -> R:
        """The result of an item that failed for good: `message` says why (`work.attempts` after how many
        attempts, if `failure` was retriable and they ran out)."""


@dataclass(frozen=True)
class BulkSettings:
    in_flight: int = 4                                      # requests in flight
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    pace: PaceSettings = field(default_factory=PaceSettings)
    window: int | None = None                               # works taken ahead of the results (default: enough
                                                            # for every request in flight, twice)

    def __post_init__(self) -> None:
        if self.in_flight < 1 or (self.window is not None and self.window < 1):
            raise ValueError(f"BulkSettings: in_flight and window must be >= 1, got {self.in_flight}, {self.window}")


# -- throttled attempts inside an SDK's own retries ---------------------------------------------------------------

_context = threading.local()


def note_throttled() -> None:
    """Called by a client's hook when the store throttled one attempt of a request made by an engine's worker
    thread (botocore retries it itself): that lane slows down. Elsewhere a no-op."""
    pacer: Pacer | None = getattr(_context, "pacer", None)
    lane: str | None = getattr(_context, "lane", None)
    if pacer is not None and lane is not None:
        pacer.throttled(lane)


# -- the engine ---------------------------------------------------------------------------------------------------


@dataclass
class _Group:
    lanes: OrderedDict[str, deque[Work]] = field(default_factory=OrderedDict)
    count: int = 0


class BulkEngine:
    def __init__(self, settings: BulkSettings = BulkSettings(), *, on_retry: Callable[[int], None] | None = None,
                 throttle_log: ThrottleLog | None = None, name: str = "statekeeper-bulk",
                 pacer: Pacer | None = None) -> None:
        """`pacer`: one shared by several engines (a task's overall limit spans them); else one of their own from
        `settings.pace`."""
        self.settings = settings
        self.pacer = pacer if pacer is not None else Pacer(settings.pace)
        self._on_retry = on_retry
        self._throttle_log = throttle_log or ThrottleLog()
        self._name = name

    def run(self, op: Operation[T, R], works: Iterable[Work[T]]) -> Iterator[list[R]]:
        return _Run(self, op, works).results()


class _Run(Generic[T, R]):
    """One pass of the engine over one input."""

    def __init__(self, engine: BulkEngine, op: Operation[T, R], works: Iterable[Work[T]]) -> None:
        self.engine = engine
        self.op = op
        self.pacer = engine.pacer
        self.settings = engine.settings
        self.retry = engine.settings.retry
        overall = engine.pacer.settings.overall
        # A batch never exceeds one second's worth of an overall limit: a low limit spreads small batches evenly
        # instead of sending 1,000 keys at once and then waiting.
        self.batch = max(1, min(op.batch_limit, int(overall))) if overall else max(1, op.batch_limit)
        self.window = engine.settings.window or max(64, 2 * engine.settings.in_flight * self.batch)
        self.input = iter(works)
        self.exhausted = False
        self.groups: OrderedDict[Hashable, _Group] = OrderedDict()
        self.pending = 0                                  # works in groups, not yet sent
        self.delayed: list[tuple[float, int, Work]] = []  # (due, seq, work): retries waiting out their back-off
        self.seq = itertools.count()
        self.in_flight: dict[Future, tuple[Hashable, list[Work]]] = {}

    # -- input ---------------------------------------------------------------------------------------------

    def _add(self, work: Work, *, front: bool = False) -> None:
        group = self.groups.get(work.group)
        if group is None:
            group = self.groups[work.group] = _Group()
        lane = group.lanes.get(work.lane)
        if lane is None:
            lane = group.lanes[work.lane] = deque()
        (lane.appendleft if front else lane.append)(work)
        group.count += 1
        self.pending += 1

    def _top_up(self) -> None:
        held = self.pending + len(self.delayed) + sum(len(b) for _, b in self.in_flight.values())
        while not self.exhausted and held < self.window:
            try:
                work = next(self.input)
            except StopIteration:
                self.exhausted = True
                return
            self._add(work)
            held += 1

    def _release_due(self, now: float) -> None:
        while self.delayed and self.delayed[0][0] <= now:
            _, _, work = heapq.heappop(self.delayed)
            self._add(work, front=True)

    # -- forming batches ------------------------------------------------------------------------------------

    def _next_batch(self, now: float) -> tuple[Hashable, list[Work], float] | None:
        """(group, batch, send_at) to send now, or None. A group with fewer items than a batch waits for more input
        while more can come."""
        waiting_for_input = not self.exhausted
        fallback: tuple[float, Hashable] | None = None
        for key, group in list(self.groups.items()):
            if group.count == 0:
                continue
            if waiting_for_input and group.count < self.batch and not self._window_full():
                continue
            # Under an overall limit a batch goes out whole (as many items as it can take), not in dribbles.
            overall_wait = self.pacer.overall_delay(min(group.count, self.batch))
            batch = self._take(group, ready_only=True) if overall_wait <= 0 else []
            if batch:
                return key, batch, self._reserve(key, group, batch)
            wait_s = self._group_wait(group)
            if fallback is None or wait_s < fallback[0]:
                fallback = (wait_s, key)
        if fallback is not None and not self.in_flight:
            # Nothing is ready and nothing is in flight: reserve the group ready first; its worker waits for the
            # tokens (sleeping here would stop the answers of other requests from being handled).
            key = fallback[1]
            group = self.groups[key]
            batch = self._take(group, ready_only=False)
            return key, batch, self._reserve(key, group, batch)
        return None

    def _take(self, group: _Group, *, ready_only: bool) -> list[Work]:
        """Up to a batch of a group's works, from its lanes in turn (round robin), only lanes whose pace allows
        their part now when `ready_only`."""
        batch: list[Work] = []
        for lane_name in list(group.lanes):
            lane = group.lanes[lane_name]
            if not lane:
                continue
            if ready_only and self.pacer.lane_delay(lane_name, min(len(lane), self.batch - len(batch))) > 0:
                continue
            while lane and len(batch) < self.batch:
                batch.append(lane.popleft())
            group.lanes.move_to_end(lane_name)
            if len(batch) >= self.batch:
                break
        return batch

    def _group_wait(self, group: _Group) -> float:
        want = min(group.count, self.batch)
        lanes = [self.pacer.lane_delay(name, min(len(lane), want)) for name, lane in group.lanes.items() if lane]
        return max(self.pacer.overall_delay(want), min(lanes, default=0.0))

    def _window_full(self) -> bool:
        return self.pending + len(self.delayed) >= self.window

    def _reserve(self, key: Hashable, group: _Group, batch: list[Work]) -> float:
        group.count -= len(batch)
        self.pending -= len(batch)
        if group.count == 0:
            del self.groups[key]
        wait_s = 0.0
        for lane, n in _count_lanes(batch).items():
            wait_s = max(wait_s, self.pacer.delay(lane, n))
            self.pacer.take(lane, n)
        return self.pacer.now() + wait_s

    def _earliest(self) -> float | None:
        """When something may become sendable: a retry's back-off ends, or a paced group has tokens again."""
        times = [self.delayed[0][0]] if self.delayed else []
        now = self.pacer.now()
        times += [now + self._group_wait(group) for group in self.groups.values() if group.count]
        return min(times) if times else None

    # -- sending --------------------------------------------------------------------------------------------

    def _send(self, key: Hashable, batch: list[Work], send_at: float) -> Sequence[Answer]:
        delay = send_at - self.pacer.now()
        if delay > 0:
            time.sleep(delay)
        for work in batch:
            work.attempts += 1
        _context.pacer, _context.lane = self.pacer, batch[0].lane
        try:
            return self.op.send(key, batch)
        finally:
            _context.pacer = _context.lane = None

    # -- answers --------------------------------------------------------------------------------------------

    def _settle(self, future: Future, key: Hashable, batch: list[Work]) -> list:
        results: list = []
        lanes = _count_lanes(batch)
        try:
            answers = future.result()
        except Exception as exc:  # noqa: BLE001 - the operation judges it (and re-raises programming errors)
            failure = self.op.judge(exc)
            for lane in lanes:
                self.pacer.done(lane, 0)
                if failure.throttled:
                    self.pacer.throttled(lane)
            text = f"{failure.code}: {exc}"
            if failure.retriable and batch[0].attempts < self.retry.max_attempts:
                self._again(batch, text, self.op.describe(key), failure, per_item=False)
            else:
                for work in batch:
                    results.append(self.op.give_up(work, text, failure))
            return results
        if len(answers) != len(batch):
            raise RuntimeError(f"{self.op.describe(key)}: {len(answers)} answers for {len(batch)} items")
        retry: list[Work] = []
        throttled_lanes: set[str] = set()
        last: tuple[str, Failure] | None = None
        inner = 0
        for work, answer in zip(batch, answers, strict=True):
            work.retries += answer.retries
            inner += answer.retries
            if answer.failure is None:
                results.append(answer.result)
                continue
            work.last_error = answer.message
            if answer.failure.throttled:
                throttled_lanes.add(work.lane)
            if answer.failure.retriable and work.attempts < self.retry.max_attempts:
                retry.append(work)
                last = (answer.message, answer.failure)
            else:
                results.append(self.op.give_up(work, answer.message, answer.failure))
        if inner and self.engine._on_retry is not None:
            self.engine._on_retry(inner)
        for lane, n in lanes.items():
            self.pacer.done(lane, n)
        for lane in throttled_lanes:
            self.pacer.throttled(lane)
        if retry and last is not None:
            self._again(retry, last[0], self.op.describe(key), last[1], per_item=True)
        return results

    def _again(self, works: list[Work], message: str, what: str, failure: Failure, *, per_item: bool) -> None:
        attempt = max(w.attempts for w in works)
        delay = self.retry.delay(attempt)
        self.engine._throttle_log.hit(what, failure.code, delay)
        due = self.pacer.now() + delay
        for work in works:
            work.retries += 1
            work.last_error = work.last_error if per_item else message
            heapq.heappush(self.delayed, (due, next(self.seq), work))
        if self.engine._on_retry is not None:
            self.engine._on_retry(len(works) if per_item else 1)

    # -- the loop -------------------------------------------------------------------------------------------

    def results(self) -> Iterator[list]:
        limit = self.settings.in_flight
        pool = ThreadPoolExecutor(max_workers=limit, thread_name_prefix=self.engine._name)
        try:
            while True:
                self._top_up()
                now = self.pacer.now()
                self._release_due(now)
                while len(self.in_flight) < limit:
                    chosen = self._next_batch(now)
                    if chosen is None:
                        break
                    key, batch, send_at = chosen
                    self.in_flight[pool.submit(self._send, key, batch, send_at)] = (key, batch)
                    self._top_up()
                if not self.in_flight:
                    if not self.pending and not self.delayed and self.exhausted:
                        return
                    earliest = self._earliest()
                    if earliest is None:
                        if self.exhausted or self._window_full():
                            raise RuntimeError(f"bulk engine stalled with {self.pending} item(s) pending")
                        continue
                    time.sleep(max(0.0, min(earliest - self.pacer.now(), 1.0)))
                    continue
                # With every slot taken only an answer can free one; else wake when something paced may go.
                earliest = self._earliest() if (self.pending or self.delayed) and len(self.in_flight) < limit \
                    else None
                timeout = None if earliest is None else max(0.001, earliest - self.pacer.now())
                finished, _ = wait(list(self.in_flight), timeout=timeout, return_when=FIRST_COMPLETED)
                for future in finished:
                    key, batch = self.in_flight.pop(future)
                    settled = self._settle(future, key, batch)
                    if settled:
                        yield settled
        finally:
            for future in self.in_flight:
                future.cancel()
            pool.shutdown(wait=True, cancel_futures=True)


def _count_lanes(batch: Sequence[Work]) -> dict[str, int]:
    return Counter(map(attrgetter("lane"), batch))


def log_report(pacer: Pacer, what: str, logger: logging.Logger = log, top: int = 20) -> None:
    """One INFO line per lane (the busiest `top`): what a run achieved per prefix."""
    reports = sorted(pacer.report(), key=lambda r: -r.items)
    for report in reports[:top]:
        logger.info("%s: %s", what, report.describe())
    if len(reports) > top:
        logger.info("%s: %d more prefix(es)", what, len(reports) - top)
