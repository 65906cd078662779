"""The decode cohort: running requests that are decoding, advanced together without touching each one.

Every decoding request gains one token per iteration in which the whole cohort is scheduled, so the
cohort keeps a clock and each member's counters are exact as of its `sync_clock`:
current = stored + (clock - sync_clock). Members are bucketed by num_computed mod block_size, so the ones
that need a new KV block at a given clock are found without a scan, and a heap gives the clock at which
the next one finishes. `sync` makes a member's counters exact before anyone reads them.

Invariant: kv_tokens = sum over members of (current num_computed + 1), the next decode step's KV reads;
num_identified = the members whose new KV blocks get ids (a run's blocks are then allocated member by member, in
stepping order; with none, only how many each member takes matters: `crossings`).
"""

from __future__ import annotations

import bisect
import heapq

from ttftsim.engine.state import RequestState


class DecodeCohort:
    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.clock = 0
        self.members: dict[int, RequestState] = {}
        self.size = 0  # len(members), read on every iteration
        self.num_identified = 0  # members whose new KV blocks get ids (not RequestState.is_anonymous_kv)
        self.kv_tokens = 0
        # by residue, the members in running order (admit_seq), and their admit_seqs: `due` copies a list, no sort
        self._buckets: list[list[RequestState]] = [[] for _ in range(block_size)]
        self._bucket_seqs: list[list[int]] = [[] for _ in range(block_size)]
        self._finish: list[tuple[int, int, int]] = []
        self._seqs: list[int] = []  # members' admit_seq, sorted

    def count_before(self, admit_seq: int) -> int:
        """Members ahead of a request in running order."""
        return bisect.bisect_left(self._seqs, admit_seq)

    def _residue(self, state: RequestState) -> int:
        return (state.num_computed - state.sync_clock) % self.block_size

    def join(self, state: RequestState) -> None:
        state.sync_clock = self.clock
        self.members[state.rid] = state
        self.size += 1
        if not state.is_anonymous_kv:
            self.num_identified += 1
        self.kv_tokens += state.num_computed + 1
        residue = self._residue(state)
        seqs = self._bucket_seqs[residue]
        index = bisect.bisect_left(seqs, state.admit_seq)
        seqs.insert(index, state.admit_seq)
        self._buckets[residue].insert(index, state)
        bisect.insort(self._seqs, state.admit_seq)
        finish_clock = self.clock + state.req.output_tokens - state.num_output
        heapq.heappush(self._finish, (finish_clock, state.admit_seq, state.rid))

    def sync(self, state: RequestState) -> None:
        delta = self.clock - state.sync_clock
        state.num_computed += delta
        state.num_output += delta
        state.sync_clock = self.clock

    def leave(self, state: RequestState) -> None:
        self.sync(state)
        del self.members[state.rid]
        self.size -= 1
        if not state.is_anonymous_kv:
            self.num_identified -= 1
        residue = self._residue(state)
        seqs = self._bucket_seqs[residue]
        index = bisect.bisect_left(seqs, state.admit_seq)
        if index == len(seqs) or seqs[index] != state.admit_seq:  # its counters were changed without a sync
            raise KeyError(f"request {state.rid} is not in the cohort's bucket {residue}")
        del seqs[index]
        del self._buckets[residue][index]
        del self._seqs[bisect.bisect_left(self._seqs, state.admit_seq)]
        self.kv_tokens -= state.num_computed + 1

    def dissolve(self) -> None:
        """Sync and release every member (before a per-request scheduling step)."""
        for state in self.members.values():
            self.sync(state)
        self.members.clear()
        self.size = self.num_identified = 0
        for bucket in self._buckets:
            bucket.clear()
        for seqs in self._bucket_seqs:
            seqs.clear()
        self._finish.clear()
        self._seqs.clear()
        self.kv_tokens = 0

    def advance(self, steps: int) -> None:
        self.clock += steps
        self.kv_tokens += len(self.members) * steps

    def due(self, clock: int) -> list[RequestState]:
        """Members whose next token, at this clock, starts a new KV block (running order)."""
        return self._buckets[(-clock) % self.block_size][:]

    def crossings(self, first: int, last: int) -> list[tuple[int, int]]:
        """(rid, at how many of the clocks first..last the member is due) for each member due at least once, in no
        particular order: the blocks a run's iterations at those clocks take, counted per member, for a cohort
        whose blocks are all anonymous (KVCacheManager.append_anonymous; `due` lists them in order for the rest).
        A member is due at the clocks congruent to minus its residue, once in any block_size consecutive clocks."""
        size, span = self.block_size, last - first + 1
        counts: list[tuple[int, int]] = []
        if span < size:  # each residue at most once
            for clock in range(first, last + 1):
                counts.extend((state.rid, 1) for state in self._buckets[(-clock) % size])
            return counts
        whole, rest = divmod(span, size)
        for residue, bucket in enumerate(self._buckets):
            if bucket:
                times = whole + ((-residue - first) % size < rest)  # the first due clock's offset from `first`
                counts.extend((state.rid, times) for state in bucket)
        return counts

    def due_count(self, clock: int) -> int:
        return len(self._buckets[(-clock) % self.block_size])

    def steps_to_next_finish(self) -> int:
        heap = self._finish
        while heap and not self._live(heap[0]):
            heapq.heappop(heap)
        return heap[0][0] - self.clock if heap else 1 << 30

    def pop_finished(self) -> list[RequestState]:
        """Members that have generated all their tokens by the current clock, in running order."""
        done = []
        heap = self._finish
        while heap and heap[0][0] <= self.clock:
            entry = heapq.heappop(heap)
            if self._live(entry):
                state = self.members[entry[2]]
                self.leave(state)
                done.append(state)
        return done

    def _live(self, entry: tuple[int, int, int]) -> bool:
        state = self.members.get(entry[2])
        return state is not None and state.admit_seq == entry[1]
