#!/usr/bin/python3
"""kazoo side of the zk-lock benchmark (bench/src/main.rs).

Usage: kazoo_bench.py <connect-string>   (with a python3 that can import kazoo: Debian's
/usr/bin/python3 with python3-kazoo)

The protocol is the one of bench/java/CuratorBench.java, one line each way: the peer prints
`ready` once connected; for each command it sets up and warms up, prints `armed`, waits for
`go`, measures, prints `result <json>`, waits for `done`, cleans up and prints `clean`. A failing
command prints `error <message>` and then `clean`. `quit` (or EOF) ends it.

Commands (times in milliseconds; every loop is bounded in count and in time):
  floor <path> <warm> <n> <budget-ms>
  uncontended <mutex|write|read|semaphore> <path> <warm> <n> <budget-ms>
  contended <path> <sessions> <warm-ms> <measure-ms> [one-session]
  drain <path> <waiters> <timeout-ms>
  partition <path> <holder-connect> <session-ms> <deadline-ms>
      a holder session connected to holder-connect (the bench's proxy) takes the Lock, and a
      second session, connected to the server directly, waits for it in a thread; after `go`
      (the bench has cut the proxy just before) it waits, at most deadline-ms, for the holder's
      first SUSPENDED and LOST (its state listener) and for the other session's grant, and
      prints when each came in Unix-time nanoseconds (suspended_ns, lost_ns, granted_ns; a key
      is missing when that did not happen in time). Both sessions use session-ms.

Latencies are printed in microseconds; the bench computes every statistic itself.

`kazoo_bench.py --contender <connect-string> <path>` is instead one contender of the
contended-processes row, one interpreter and one session per contender, speaking the worker
protocol of bench/src/contender.rs: it connects, warms up (acquire + release cycles on the path),
prints `ready`, reads `go <base> <warm> <measure>` (Unix-time nanoseconds, nanoseconds,
nanoseconds), loops on one Lock until base + warm + measure, prints `result <json>` and closes
its session when its stdin closes.
"""

import json
import sys
import threading
import time
import traceback

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import LockTimeout

SESSION_TIMEOUT_S = 60.0
CONNECT_WAIT_S = 30.0
SEMAPHORE_LEASES = 4


def connect(hosts, session_timeout_s=SESSION_TIMEOUT_S):
    client = KazooClient(hosts=hosts, timeout=session_timeout_s)
    client.start(timeout=CONNECT_WAIT_S)
    return client


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def await_line(expected):
    for line in sys.stdin:
        if line.strip() == expected:
            return
    raise EOFError("stdin closed while waiting for %r" % expected)


def armed():
    """Tells the bench we are set up, and waits until it has read the server counters."""
    say("armed")
    await_line("go")


def micros(nanos):
    return round(nanos / 1000.0, 1)


class Bench:
    def __init__(self, hosts):
        self.hosts = hosts
        self.main = connect(hosts)
        self.extra = []

    def close_extra(self):
        for client in self.extra:
            try:
                client.stop()
                client.close()
            except Exception:  # noqa: BLE001 - best effort cleanup
                pass
        self.extra = []

    def serve(self):
        say("ready")
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            if words[0] == "quit":
                return
            try:
                result = self.run(words[0], words[1:])
                say("result " + json.dumps(result, separators=(",", ":")))
                await_line("done")
            except Exception as error:  # noqa: BLE001 - reported to the bench
                traceback.print_exc()
                say("error %s: %s" % (type(error).__name__, str(error).replace("\n", " ")))
            finally:
                self.close_extra()
            say("clean")

    def run(self, command, args):
        if command == "floor" and len(args) == 4:
            return self.floor(args[0], int(args[1]), int(args[2]), int(args[3]))
        if command == "uncontended" and len(args) == 5:
            return self.uncontended(args[0], args[1], int(args[2]), int(args[3]), int(args[4]))
        if command == "contended" and (len(args) == 4 or (len(args) == 5 and args[4] == "one-session")):
            return self.contended(args[0], int(args[1]), int(args[2]), int(args[3]), len(args) == 5)
        if command == "drain" and len(args) == 3:
            return self.drain(args[0], int(args[1]), int(args[2]))
        if command == "partition" and len(args) == 4:
            return self.partition(args[0], args[1], int(args[2]), int(args[3]))
        raise ValueError("bad command: %s %s" % (command, " ".join(args)))

    # ---- floor ----------------------------------------------------------------------------

    def floor(self, path, warm, n, budget_ms):
        zk = self.main
        zk.ensure_path(path)
        node = path + "/n"
        for _ in range(warm):
            zk.create(node, b"", ephemeral=True)
            zk.delete(node)
            zk.get_children(path)
        armed()
        create, delete, listing = [], [], []
        clock = time.perf_counter_ns
        start = clock()
        deadline = start + budget_ms * 1_000_000
        while len(create) < n and clock() < deadline:
            t0 = clock()
            zk.create(node, b"", ephemeral=True)
            t1 = clock()
            zk.delete(node)
            t2 = clock()
            zk.get_children(path)
            t3 = clock()
            create.append(micros(t1 - t0))
            delete.append(micros(t2 - t1))
            listing.append(micros(t3 - t2))
        elapsed = clock() - start
        return {
            "ops": len(create),
            "elapsed_s": elapsed / 1e9,
            "create_us": create,
            "delete_us": delete,
            "list_us": listing,
        }

    # ---- uncontended ----------------------------------------------------------------------

    def recipe(self, client, recipe, path):
        if recipe == "mutex":
            return client.Lock(path)
        if recipe == "write":
            return client.WriteLock(path)
        if recipe == "read":
            return client.ReadLock(path)
        if recipe == "semaphore":
            return client.Semaphore(path, max_leases=SEMAPHORE_LEASES)
        raise ValueError("unknown recipe %s" % recipe)

    def uncontended(self, recipe, path, warm, n, budget_ms):
        # One recipe object reused for every cycle, as kazoo's documentation does.
        lock = self.recipe(self.main, recipe, path)
        for _ in range(warm):
            lock.acquire()
            lock.release()
        armed()
        acquire, cycle = [], []
        clock = time.perf_counter_ns
        start = clock()
        deadline = start + budget_ms * 1_000_000
        while len(cycle) < n and clock() < deadline:
            t0 = clock()
            lock.acquire()
            t1 = clock()
            lock.release()
            t2 = clock()
            acquire.append(micros(t1 - t0))
            cycle.append(micros(t2 - t0))
        elapsed = clock() - start
        return {"ops": len(cycle), "elapsed_s": elapsed / 1e9, "acquire_us": acquire, "cycle_us": cycle}

    # ---- contended ------------------------------------------------------------------------

    def contended(self, path, sessions, warm_ms, measure_ms, one_session=False):
        locks = []
        for _ in range(sessions):
            client = self.main
            if not one_session:
                client = connect(self.hosts)
                self.extra.append(client)
            locks.append(client.Lock(path))
        state = {"holders": 0, "violations": 0, "max_holders": 0, "grants_total": 0}
        guard = threading.Lock()
        waits = [[] for _ in range(sessions)]
        failures = []
        armed()
        clock = time.perf_counter_ns
        start = clock()
        measure_from = start + warm_ms * 1_000_000
        end = measure_from + measure_ms * 1_000_000

        def contender(index):
            lock = locks[index]
            mine = waits[index]
            try:
                while clock() < end:
                    t0 = clock()
                    # Bounded: a contender that waits well past the end gives up (kazoo raises
                    # LockTimeout rather than return False).
                    try:
                        lock.acquire(timeout=(end - t0) / 1e9 + 5.0)
                    except LockTimeout:
                        break
                    t1 = clock()
                    with guard:
                        state["holders"] += 1
                        if state["holders"] != 1:
                            state["violations"] += 1
                        state["max_holders"] = max(state["max_holders"], state["holders"])
                    with guard:
                        state["holders"] -= 1
                    lock.release()
                    with guard:
                        state["grants_total"] += 1
                    if measure_from <= t1 < end:
                        mine.append(micros(t1 - t0))
            except Exception as error:  # noqa: BLE001 - reported below
                failures.append(error)

        threads = [threading.Thread(target=contender, args=(i,), daemon=True) for i in range(sessions)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join((warm_ms + measure_ms) / 1000.0 + 30.0)
        if failures:
            raise RuntimeError("a contender failed: %r" % failures[0])
        all_waits = [w for mine in waits for w in mine]
        return {
            "sessions": sessions,
            "measure_s": measure_ms / 1000.0,
            "grants_measured": len(all_waits),
            "grants_total": state["grants_total"],
            "violations": state["violations"],
            "max_holders": state["max_holders"],
            "wait_us": all_waits,
        }

    # ---- drain ----------------------------------------------------------------------------

    def drain(self, path, waiters, timeout_ms):
        zk = self.main
        holder = zk.Lock(path)
        holder.acquire()
        guard = threading.Lock()
        state = {"holders": 0, "violations": 0, "completed": 0, "last": 0}
        finished = threading.Event()
        failures = []
        limit_s = timeout_ms / 1000.0 + 60.0

        def waiter():
            lock = zk.Lock(path)
            try:
                if not lock.acquire(timeout=limit_s):
                    return
                with guard:
                    state["holders"] += 1
                    if state["holders"] != 1:
                        state["violations"] += 1
                    state["holders"] -= 1
                lock.release()
                now = time.perf_counter_ns()
                with guard:
                    state["completed"] += 1
                    state["last"] = max(state["last"], now)
                    if state["completed"] == waiters:
                        finished.set()
            except Exception as error:  # noqa: BLE001 - reported below
                failures.append(error)

        threads = [threading.Thread(target=waiter, daemon=True) for _ in range(waiters)]
        for thread in threads:
            thread.start()
        armed()
        start = time.perf_counter_ns()
        holder.release()
        complete = finished.wait(timeout_ms / 1000.0)
        end = state["last"] if complete else time.perf_counter_ns()
        if failures:
            raise RuntimeError("a waiter failed: %r" % failures[0])
        return {
            "waiters": waiters,
            "completed": state["completed"],
            "violations": state["violations"],
            "drain_s": (end - start) / 1e9,
        }

    # ---- partition ------------------------------------------------------------------------

    def partition(self, path, holder_hosts, session_ms, deadline_ms):
        session_s = session_ms / 1000.0
        times = {}
        guard = threading.Lock()
        all_in = threading.Event()

        def note(key):
            """Records the first time `key` happened."""
            with guard:
                times.setdefault(key, time.time_ns())
                if len(times) == 3:
                    all_in.set()

        def listener(state):
            if state == KazooState.SUSPENDED:
                note("suspended_ns")
            elif state == KazooState.LOST:
                note("lost_ns")

        holder_client = connect(holder_hosts, session_s)
        self.extra.append(holder_client)
        holder_client.add_listener(listener)
        if not holder_client.Lock(path).acquire(timeout=PARTITION_SETUP_S):
            raise RuntimeError("the holder did not get %s in time" % path)
        other_client = connect(self.hosts, session_s)
        self.extra.append(other_client)

        def wait_for_the_lock():
            lock = other_client.Lock(path)
            try:
                if lock.acquire(timeout=PARTITION_SETUP_S + deadline_ms / 1000.0):
                    note("granted_ns")
                    lock.release()
            except Exception:  # noqa: BLE001 - closed at clean-up while waiting: not granted
                pass

        threading.Thread(target=wait_for_the_lock, daemon=True).start()
        # The bench waits until the other session's node is queued, then cuts and says go.
        armed()
        all_in.wait(deadline_ms / 1000.0)
        with guard:
            return dict(times)


# How long connecting, the holder's acquire and the other session's queueing may take.
PARTITION_SETUP_S = 30.0

CONTENDER_WARM_CYCLES = 50


def contender(hosts, path):
    """One contender of the contended-processes row (see the module's docstring)."""
    client = None
    try:
        client = connect(hosts)
        lock = client.Lock(path)
        for _ in range(CONTENDER_WARM_CYCLES):
            if lock.acquire(timeout=30.0):
                lock.release()
        say("ready")
        words = sys.stdin.readline().split()
        if len(words) != 4 or words[0] != "go":
            raise ValueError("expected `go <base> <warm> <measure>`: %r" % " ".join(words))
        base, warm, measure = int(words[1]), int(words[2]), int(words[3])
        wall = time.time_ns
        clock = time.monotonic_ns
        # The window on this process's monotonic clock.
        start = clock() - max(0, wall() - base)
        measure_from = start + warm
        end = measure_from + measure
        # Bounded: a contender still waiting long after the end gives up.
        limit = end + 5_000_000_000
        waits, held, asked, total = [], [], [], 0
        while clock() < end:
            t0 = clock()
            asked_at = wall() - base
            try:
                if not lock.acquire(timeout=(limit - t0) / 1e9):
                    break
            except LockTimeout:
                break
            t1 = clock()
            # The held interval on the wall clock, inside the true hold.
            held.append(wall() - base)
            held.append(wall() - base)
            lock.release()
            asked.append(asked_at)
            total += 1
            if measure_from <= t1 < end:
                waits.append(micros(t1 - t0))
        result = {"grants_total": total, "wait_us": waits, "held_ns": held, "asked_ns": asked}
        say("result " + json.dumps(result, separators=(",", ":")))
        # Keep the session until the bench has read the server's counters.
        for _ in sys.stdin:
            pass
        return 0
    except Exception as error:  # noqa: BLE001 - reported to the bench
        traceback.print_exc()
        say("error %s: %s" % (type(error).__name__, str(error).replace("\n", " ")))
        return 1
    finally:
        if client is not None:
            client.stop()
            client.close()


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--contender":
        return contender(sys.argv[2], sys.argv[3])
    if len(sys.argv) != 2:
        sys.stderr.write("usage: kazoo_bench.py <connect-string>\n")
        return 2
    bench = Bench(sys.argv[1])
    try:
        bench.serve()
    finally:
        bench.close_extra()
        bench.main.stop()
        bench.main.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
