"""Pacing requests per prefix at the store's own limit: additive increase, multiplicative decrease (AIMD).

Amazon S3 serves at least 3,500 writes or deletes per second per partitioned prefix and answers 503 SlowDown
above what a prefix's partitions take at the moment (they split under sustained load). A mover that sends as
fast as it can meets SlowDown storms; one that sends at a fixed low rate leaves most of the store unused. So each
lane (a prefix: a Flink job directory below its root) starts at the store's documented rate (or unpaced, where
the store documents none), halves its rate on a throttling answer (at most once per `hold_s`: the requests in
flight report one congestion together), and grows by `increase` of its starting rate per second while nothing
throttles it, without a ceiling unless one is set. Lanes are independent, so job prefixes run in parallel; an
optional overall token bucket holds the whole engine to a user's limit (`--max-deletes-per-second`).

Counts are in items (keys deleted, objects copied), as S3's limit is: a DeleteObjects of 1,000 keys is 1,000
writes. `report()` says what each lane achieved: items, requests, throttled requests, seconds busy, items per
second, and the rates it was paced at.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

# Amazon S3's documented floor per partitioned prefix for PUT/COPY/POST/DELETE (a DeleteObjects key counts).
S3_WRITES_PER_PREFIX = 3500.0


@dataclass(frozen=True)
class PaceSettings:
    lane_rate: float | None = None   # starting items/s per lane; None: unpaced until the store throttles the lane
    lane_max: float | None = None    # ceiling per lane (None: keep probing upward)
    increase: float = 0.1            # additive increase per second without throttling, as a share of the start rate
    decrease: float = 0.5            # multiplicative decrease on a throttling answer
    lane_min: float = 1.0            # never below this many items/s
    overall: float | None = None     # items/s for every lane together (None: no overall limit)
    hold_s: float = 1.0              # at most one decrease per lane in this many seconds

    def __post_init__(self) -> None:
        for name in ("lane_rate", "lane_max", "overall"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"PaceSettings.{name} must be > 0, or None, got {value}")
        if not 0 < self.decrease < 1 or self.increase < 0 or self.lane_min <= 0 or self.hold_s < 0:
            raise ValueError(f"PaceSettings: need 0 < decrease < 1, increase >= 0, lane_min > 0, hold_s >= 0: {self}")


class TokenBucket:
    """`rate` tokens per second, holding at most one second's worth (at least one item). A request for more than is
    available is ready when its tokens have accrued; taking them may leave the bucket in debt, which the next
    request waits out (a batch larger than one second's worth still goes, after its tokens)."""

    def __init__(self, rate: float, now: float) -> None:
        self.rate = rate
        self._tokens = max(rate, 1.0)
        self._stamp = now

    def _refill(self, now: float) -> None:
        if now > self._stamp:
            self._tokens = min(max(self.rate, 1.0), self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now

    def ready_at(self, n: int, now: float) -> float:
        self._refill(now)
        missing = min(float(n), max(self.rate, 1.0)) - self._tokens

        return now if missing <= 0 else now + missing / self.rate

    def take(self, n: int, now: float) -> None:
        self._refill(now)
        self._tokens -= n

    def set_rate(self, rate: float, now: float) -> None:
        self._refill(now)
        self.rate = rate
        self._tokens = min(self._tokens, max(rate, 1.0))


@dataclass(frozen=True, slots=True)
class LaneReport:
    """What one lane (prefix) achieved."""

    lane: str
    items: int
    requests: int
    throttled: int
    seconds: float
    start_rate: float | None
    final_rate: float | None
    lowest_rate: float | None
    started: float = 0.0     # wall clock (epoch seconds) of its first request, to merge reports of several tasks
    ended: float = 0.0       # and of its last answer

    @property
    def per_second(self) -> float:
        return self.items / self.seconds if self.seconds > 0 else 0.0

    def describe(self) -> str:
        paced = ("unpaced" if self.final_rate is None else
                 f"paced {self.start_rate or 0:.0f} -> {self.final_rate:.0f}/s (lowest {self.lowest_rate or 0:.0f}/s)")
        return (f"{self.lane}: {self.items} in {self.seconds:.1f}s ({self.per_second:.0f}/s), {self.requests} "
                f"request(s), {self.throttled} throttled, {paced}")


@dataclass
class _Lane:
    settings: PaceSettings
    rate: float | None
    bucket: TokenBucket | None
    start_rate: float | None
    lowest: float | None
    items: int = 0
    requests: int = 0
    throttled: int = 0
    first: float | None = None
    last: float | None = None
    decreased_at: float = float("-inf")
    grown_at: float = 0.0
    recent: deque[tuple[float, int]] = field(default_factory=deque)

    def recent_rate(self, now: float) -> float:
        while self.recent and now - self.recent[0][0] > 2.0:
            self.recent.popleft()
        return sum(n for _, n in self.recent) / 2.0


class Pacer:
    """Per-lane AIMD token buckets plus an optional overall one. Thread-safe: a worker thread may report a throttled
    attempt (an SDK's own retry) while the scheduling thread reserves."""

    def __init__(self, settings: PaceSettings = PaceSettings(), clock=time.monotonic,
                 lane_rate: Callable[[str], float | None] | None = None) -> None:
        """`lane_rate(lane)` gives a new lane's starting rate where lanes of several stores share one pacer (and
        its overall limit); else every lane starts at `settings.lane_rate`."""
        self.settings = settings
        self._clock = clock
        self._lane_rate = lane_rate
        self._lock = threading.Lock()
        self._lanes: dict[str, _Lane] = {}
        now = clock()
        self._overall = TokenBucket(settings.overall, now) if settings.overall else None

    def _lane(self, lane: str, now: float) -> _Lane:
        found = self._lanes.get(lane)
        if found is None:
            rate = self._lane_rate(lane) if self._lane_rate is not None else self.settings.lane_rate
            found = self._lanes[lane] = _Lane(self.settings, rate, TokenBucket(rate, now) if rate else None, rate,
                                              rate, grown_at=now)
        return found

    def now(self) -> float:
        return self._clock()

    def overall_delay(self, n: int) -> float:
        """Seconds until `n` items of any lanes may be sent as far as the overall limit goes (0.0: now)."""
        if self._overall is None:
            return 0.0
        with self._lock:
            now = self._clock()
            return max(0.0, self._overall.ready_at(n, now) - now)

    def lane_delay(self, lane: str, n: int) -> float:
        """Seconds until `n` items of `lane` may be sent as far as the lane's own pace goes (0.0: now)."""
        with self._lock:
            now = self._clock()
            state = self._lane(lane, now)
            return max(0.0, state.bucket.ready_at(n, now) - now) if state.bucket is not None else 0.0

    def delay(self, lane: str, n: int) -> float:
        """Seconds until `n` items of `lane` may be sent (0.0: now)."""
        with self._lock:
            now = self._clock()
            state = self._lane(lane, now)
            ready = state.bucket.ready_at(n, now) if state.bucket is not None else now
            if self._overall is not None:
                ready = max(ready, self._overall.ready_at(n, now))
            return max(0.0, ready - now)

    def take(self, lane: str, n: int) -> None:
        """`n` items of `lane` are being sent now."""
        with self._lock:
            now = self._clock()
            state = self._lane(lane, now)
            if state.bucket is not None:
                state.bucket.take(n, now)
            if self._overall is not None:
                self._overall.take(n, now)
            state.requests += 1
            state.first = now if state.first is None else state.first

    def throttled(self, lane: str) -> None:
        """The store throttled a request of `lane`: halve its rate (once per hold period)."""
        with self._lock:
            now = self._clock()
            state = self._lane(lane, now)
            state.throttled += 1
            if now - state.decreased_at < self.settings.hold_s:
                return
            base = state.rate if state.rate is not None else max(state.recent_rate(now), self.settings.lane_min)
            rate = max(self.settings.lane_min, base * self.settings.decrease)
            state.decreased_at = state.grown_at = now
            state.rate = rate
            state.lowest = rate if state.lowest is None else min(state.lowest, rate)
            if state.bucket is None:
                state.bucket = TokenBucket(rate, now)
            else:
                state.bucket.set_rate(rate, now)

    def done(self, lane: str, n: int) -> None:
        """`n` items of `lane` were answered (settled or to be retried): grow the lane's rate while unthrottled."""
        with self._lock:
            now = self._clock()
            state = self._lane(lane, now)
            state.items += n
            state.last = now
            state.recent.append((now, n))
            if state.rate is None or state.bucket is None:
                return
            if now - state.decreased_at < self.settings.hold_s or now - state.grown_at < 1.0:
                return
            step = self.settings.increase * (state.start_rate or state.rate) * (now - state.grown_at)
            rate = state.rate + step
            if self.settings.lane_max is not None:
                rate = min(rate, self.settings.lane_max)
            state.grown_at = now
            state.rate = rate
            state.bucket.set_rate(rate, now)

    def report(self) -> list[LaneReport]:
        with self._lock:
            offset = time.time() - self._clock()   # monotonic -> wall clock
            out = []
            for name, s in sorted(self._lanes.items()):
                first = s.first if s.first is not None else self._clock()
                last = s.last if s.last is not None else first
                out.append(LaneReport(name, s.items, s.requests, s.throttled, max(0.0, last - first), s.start_rate,
                                      s.rate, s.lowest, first + offset, last + offset))
            return out
