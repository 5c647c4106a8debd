"""Stages that overlap: shard i of a one-to-one stage starts as soon as its input shard commits.

The stages of a run go in groups (:func:`toolfactory.run.fan_in.chains`): tasks → dialogues → verify
is one group, as dialogues shard i reads only tasks shard i and verify shard i only dialogues shard
i; every other stage is a group of its own, started when the groups before it have finished, as it
reads a whole stage (pool and curate are fan-in, tasks reads the whole pool shard) or the pool that
a whole stage published.

Within a group every stage is still its own Prefect sub-flow, with its shard tasks in it. The
flows run at once, each in a thread of the driver; the first submits all its shards, and a follower
submits shard i when the flow upstream reports shard i committed (:class:`Settled`, through the
follower's inbox). No flow submits a shard before every flow of its group has begun: a Prefect
server on SQLite (a run's temporary one) often refuses a sub-flow created while shard task runs are
being created ("database is locked", answered 503), and the client asks again only 2 s later, once
per follower (measured in a small run: up to three such waits). A shard whose input did not commit
(failed, blocked, or never started) is recorded as blocked, and passes that on to its own follower;
a committed shard is never submitted, as before. So verify shard 0 may run while dialogues shard 7
does, and the run's wall time comes close to its longest chain of shards rather than the sum of its
stages' slowest shards. The next group starts once every shard of this one has settled
(:meth:`GroupRun.settled`), while its flows still end in Prefect (up to a second each, for the
flow-run heartbeat thread Prefect joins).

Why not one flow that submits each downstream task with `wait_for` on its upstream future:

* prefect-ray makes only the futures passed as *parameters* Ray dependencies; `wait_for` futures
  go to the Ray worker, which waits for them there. Every waiting shard would be a worker process
  blocked in `ray.get` (Ray lends its CPU out, but the process and its memory stay), and Ray
  would start more workers to run the shards that are ready.
* A task whose `wait_for` future failed ends as Prefect's NotReady, where a run needs its own
  record: blocked, with the missing input, in the stats and the rerun message.
* The tasks of all stages would sit in one flow; the UI shows one sub-flow per stage.

Why signals in the driver, not polling the store for committed inputs: no latency and no extra
requests to S3; an input that an earlier execution committed is found once, when the group is
prepared. Why not a config choice: the shards, their inputs and their outputs are the same as with
stages one after another; only their start is earlier. Fan-in stages keep their barrier.

Stops: an endpoint refusal (:class:`~toolfactory.errors.EndpointRefused`) in any stage of the
group stops the submission of shards that wait (they never started and are not recorded, as the
stages after a refusal were not); shards already running finish. A spent budget is checked before
each waiting shard starts, which is then recorded as not started, as a stage's were.
"""

from __future__ import annotations

import queue
import threading
from contextvars import ContextVar, copy_context
from dataclasses import dataclass, field
from typing import Any, Callable

from flows.display import Display
from toolfactory.run.execution import ShardJob


@dataclass(frozen=True)
class Settled:
    """Shard `index` of the stage upstream has settled: committed, or not (failed, blocked, or
    never started)."""

    index: int
    committed: bool


class Group:
    """What the stage flows of one group share: the refusal that stopped it, the budget and the
    terminal display."""

    __slots__ = ("_lock", "_refused", "budget_stop", "display")

    def __init__(self, budget_stop: Callable[[], str | None], display: Display | None) -> None:
        self._lock = threading.Lock()
        self._refused: tuple[str, str] | None = None
        self.budget_stop = budget_stop
        self.display = display

    def refuse(self, stage: str, reason: str) -> None:
        """An endpoint refusal in `stage` stops the group (the first one is kept)."""
        with self._lock:
            self._refused = self._refused or (stage, reason)

    @property
    def refused(self) -> tuple[str, str] | None:
        """The stage and the refusal that stopped the group, if one did."""
        return self._refused


class StageLink:
    """A stage flow's place in its group: its inbox (its own shard futures as they finish, and
    :class:`Settled` from the stage upstream), the shards that wait for their input, and the
    follower to tell about its own shards."""

    __slots__ = ("stage", "group", "inbox", "awaited", "downstream", "started", "all_started", "ended", "_told")

    def __init__(self, stage: str, group: Group, awaited: dict[int, ShardJob] | None = None,
                 all_started: threading.Event | None = None) -> None:
        self.stage = stage
        self.group = group
        self.inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.awaited = dict(awaited or {})
        self.downstream: StageLink | None = None
        self.started = threading.Event()  # this stage's flow has begun
        if all_started is None:  # a stage alone
            all_started = threading.Event()
            all_started.set()
        self.all_started = all_started  # every flow of the group has begun
        self.ended = threading.Event()  # every shard of the stage has settled
        self._told: set[int] = set()

    def settle(self, index: int, committed: bool) -> None:
        """Tell the follower that shard `index` of this stage has settled."""
        if self.downstream is not None and index in self.downstream.awaited and index not in self._told:
            self._told.add(index)
            self.downstream.inbox.put(Settled(index, committed))

    def end(self) -> None:
        """Every shard of this stage has settled (or the flow has ended): a shard the follower
        still waits for will not commit now."""
        if self.downstream is not None:
            for index in list(self.downstream.awaited):
                self.settle(index, False)
        self.ended.set()


# The link of the stage flow running in this thread. Not a flow parameter: Prefect ships a flow's
# parameters to Ray with each of its tasks, and a link holds queues and locks.
_LINK: ContextVar[StageLink | None] = ContextVar("toolfactory_stage_link", default=None)


def current_link(stage: str) -> StageLink:
    """The link of the stage flow in this thread; a link to nothing when it runs alone."""
    return _LINK.get() or StageLink(stage, Group(lambda: None, None))


@dataclass
class StageWork:
    """A stage's part in a group: shards to submit at once, shards that wait for their input
    shard upstream (by index), and shards already recorded as blocked."""

    stage: str
    ready: list[ShardJob]
    waiting: list[ShardJob] = field(default_factory=list)
    blocked: list[int] = field(default_factory=list)

    def indices(self) -> set[int]:
        """The shards of this stage that may still commit in this group."""
        return {job.spec.index for job in (*self.ready, *self.waiting)}


class GroupRun:
    """The stage flows of a group, running.

    :meth:`settled` returns once every shard of every stage has settled: what the stages after
    the group need. Each flow then still ends in Prefect (its final state, and the flow-run
    heartbeat thread that Prefect joins, up to a second), which :meth:`join` waits for; a run
    starts its next group in the meantime."""

    def __init__(self, links: list[StageLink]) -> None:
        self.links = links
        self.threads: list[threading.Thread] = []
        self.results: list[Any] = [None] * len(links)
        self.errors: list[BaseException] = []

    def settled(self) -> None:
        """Wait until every stage's shards have settled; a flow's error is raised here."""
        for link in self.links:
            link.ended.wait()
        if self.errors:
            raise self.errors[0]

    def join(self) -> list[Any]:
        """Wait until every flow has ended; their results (final states), in order."""
        for thread in self.threads:
            thread.join()
        if self.errors:
            raise self.errors[0]
        return self.results


def run_group(work: list[StageWork], group: Group, run_stage: Callable[[StageWork], Any]) -> GroupRun:
    """Start the stage flows of `work` at once, each as `run_stage(work)` in a thread, where
    :func:`current_link` is its link. Each flow is started once the one before it has begun, as a
    sub-flow is created in the parent flow's context (its task-run key), which threads may not
    race for; each waits for `all_started` before it submits a shard."""
    all_started = threading.Event()
    links = [StageLink(item.stage, group, {job.spec.index: job for job in item.waiting}, all_started) for item in work]
    for upstream, follower in zip(links, links[1:]):
        upstream.downstream = follower
    running = GroupRun(links)

    def run(k: int) -> None:
        _LINK.set(links[k])
        try:
            running.results[k] = run_stage(work[k])
        except BaseException as exc:  # re-raised in the driver's thread, by GroupRun
            running.errors.append(exc)
        finally:
            links[k].started.set()
            links[k].end()

    for k, link in enumerate(links):
        context = copy_context()  # the parent flow's run context, for a sub-flow
        thread = threading.Thread(target=context.run, args=(run, k), name=f"stage-{link.stage}", daemon=True)
        thread.start()
        running.threads.append(thread)
        link.started.wait()
    all_started.set()
    return running


class StageFlows:
    """The stage flows of a run, group by group; leaving the block waits until all have ended."""

    def __init__(self) -> None:
        self._runs: list[GroupRun] = []

    def start(self, work: list[StageWork], group: Group, run_stage: Callable[[StageWork], Any]) -> GroupRun:
        """Start a group's flows (see :func:`run_group`)."""
        running = run_group(work, group, run_stage)
        self._runs.append(running)
        return running

    def __enter__(self) -> StageFlows:
        return self

    def __exit__(self, *exc: object) -> None:
        for running in self._runs:
            running.join()
