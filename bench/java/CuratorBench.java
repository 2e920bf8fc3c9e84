import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.ref.Reference;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;

/**
 * Apache Curator side of the zk-lock benchmark ({@code bench/src/main.rs}). It measures Curator
 * itself, in this JVM, and prints raw samples; the Rust side computes every statistic with the
 * same code for all clients and reads the server's request counters around each measurement.
 *
 * <p>Usage: {@code java -cp <classes>:<curator jars> CuratorBench <connect-string>}
 *
 * <p>Protocol, one line each way. The peer prints {@code ready} once its session is connected.
 * Then, for each command: the bench sends the command; the peer sets up and warms up, prints
 * {@code armed} and waits for {@code go}; it measures and prints {@code result <json>}; it waits
 * for {@code done}, cleans up (closes extra sessions) and prints {@code clean}. A failing
 * command prints {@code error <message>} instead and the peer takes the next command.
 * {@code quit} (or EOF) ends the peer.
 *
 * <p>Commands (times in milliseconds; every loop is bounded in count and in time):
 * <ul>
 *   <li>{@code floor <path> <warm> <n> <budget-ms>}: raw create, delete and getChildren.
 *   <li>{@code uncontended <mutex|write|read|semaphore> <path> <warm> <n> <budget-ms>}:
 *       acquire + release cycles with nobody else around.
 *   <li>{@code contended <path> <sessions> <warm-ms> <measure-ms> [one-session]}: one thread and
 *       one session per contender, all looping on one InterProcessMutex path, with a holder
 *       counter; with {@code one-session}, the threads share the peer's main session (each with
 *       its own InterProcessMutex).
 *   <li>{@code drain <path> <waiters> <timeout-ms>}: a holder, then {@code waiters} threads
 *       queued on one session; after {@code go} the holder releases and every waiter takes and
 *       releases the lock in turn.
 *   <li>{@code partition <path> <holder-connect> <session-ms> <deadline-ms>}: a holder session
 *       connected to {@code holder-connect} (the bench's proxy) takes the InterProcessMutex, and
 *       a second session, connected to the server directly, waits for it in a thread. After
 *       {@code go} (the bench has cut the proxy just before) it waits, at most
 *       {@code deadline-ms}, for the holder's first SUSPENDED and LOST (its
 *       ConnectionStateListener) and for the other session's grant, and prints when each came,
 *       in Unix-time nanoseconds ({@code suspended_ns}, {@code lost_ns}, {@code granted_ns};
 *       a key is missing when that did not happen in time). Both sessions use
 *       {@code session-ms}.
 *   <li>{@code idle <root> <locks> <in-flight> <session-ms> <timeout-ms>}: a session of its own
 *       (timeout {@code session-ms}) takes one InterProcessMutex on {@code <root>/warm} and
 *       releases it, then takes {@code locks} of them, on {@code <root>/l<i>}, from
 *       {@code in-flight} threads at once, each acquire bounded by {@code timeout-ms} from the
 *       start; prints {@code armed} and holds them, doing nothing, until {@code go} (the bench
 *       measures the idle cost meanwhile); then prints the count, the time taking them
 *       ({@code take_s}) and the heap in use, after a full GC, before and after taking them
 *       ({@code heap_before}, {@code heap_after}, bytes). The session is closed on {@code done},
 *       which releases the locks.
 *   <li>{@code many-paths <root> <tasks> <warm-ms> <measure-ms>}: {@code tasks} threads (all named
 *       {@code many-paths}) on the peer's main session, each with its own InterProcessMutex on
 *       {@code <root>/l<i>}; each takes and releases its lock once, then the peer prints
 *       {@code armed}; after {@code go} every thread loops acquire + release on its own path for
 *       {@code warm-ms + measure-ms} and counts the grants and cycle times (lock call to release
 *       done) inside the last {@code measure-ms}. The bench reads this JVM's threads' CPU time
 *       from {@code /proc} meanwhile.
 * </ul>
 *
 * <p>Latencies are printed in microseconds.
 *
 * <p>{@code CuratorBench --contender <connect-string> <path>} is instead one contender of the
 * {@code contended-processes} row, one JVM and one session per contender, speaking the worker
 * protocol of {@code bench/src/contender.rs}: it connects, warms up (acquire + release cycles on
 * the path), prints {@code ready}, reads {@code go <base> <warm> <measure>} (Unix-time
 * nanoseconds, nanoseconds, nanoseconds), loops on one InterProcessMutex until
 * {@code base + warm + measure}, prints {@code result <json>} and closes its session when its
 * stdin closes.
 */
public final class CuratorBench {
    private static final int SESSION_TIMEOUT_MS = 60_000;
    private static final int CONNECTION_TIMEOUT_MS = 15_000;
    private static final int CONNECT_WAIT_SECONDS = 30;
    private static final int SEMAPHORE_LEASES = 4;

    private final String connectString;
    private final CuratorFramework main;
    private final BufferedReader stdin =
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    /** Extra sessions of the current command, closed on {@code done}. */
    private final List<CuratorFramework> extra = new ArrayList<>();

    private CuratorBench(String connectString, CuratorFramework main) {
        this.connectString = connectString;
        this.main = main;
    }

    public static void main(String[] argv) {
        int status = 0;
        try {
            if (argv.length == 3 && argv[0].equals("--contender")) {
                status = contender(argv[1], argv[2]);
                System.exit(status);
            }
            if (argv.length != 1) {
                throw new IllegalArgumentException("usage: CuratorBench <connect-string>");
            }
            CuratorFramework main = connect(argv[0]);
            try {
                new CuratorBench(argv[0], main).serve();
            } finally {
                main.close();
            }
        } catch (Throwable e) {
            System.err.println("CuratorBench failed:");
            e.printStackTrace();
            status = 1;
        }
        // Curator and ZooKeeper may leave non-daemon threads behind.
        System.exit(status);
    }

    private static CuratorFramework connect(String connectString) throws InterruptedException {
        return connect(connectString, SESSION_TIMEOUT_MS);
    }

    private static CuratorFramework connect(String connectString, int sessionTimeoutMs) throws InterruptedException {
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(connectString)
                .sessionTimeoutMs(sessionTimeoutMs)
                .connectionTimeoutMs(CONNECTION_TIMEOUT_MS)
                .retryPolicy(new RetryNTimes(3, 100))
                .build();
        client.start();
        if (!client.blockUntilConnected(CONNECT_WAIT_SECONDS, TimeUnit.SECONDS)) {
            client.close();
            throw new IllegalStateException("no connection to " + connectString + " within "
                    + CONNECT_WAIT_SECONDS + " s");
        }
        return client;
    }

    private void serve() throws IOException {
        say("ready");
        String line;
        while ((line = stdin.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            if (words.length == 0 || words[0].isEmpty()) {
                continue;
            }
            if (words[0].equals("quit")) {
                return;
            }
            String[] args = Arrays.copyOfRange(words, 1, words.length);
            try {
                String result = run(words[0], args);
                say("result " + result);
                awaitLine("done");
            } catch (Throwable e) {
                e.printStackTrace();
                say("error " + (e.getClass().getSimpleName() + ": " + e.getMessage()).replace('\n', ' '));
            } finally {
                closeExtra();
            }
            say("clean");
        }
    }

    private String run(String command, String[] a) throws Exception {
        switch (command) {
            case "floor":
                need(a, 4, "floor <path> <warm> <n> <budget-ms>");
                return floor(a[0], Integer.parseInt(a[1]), Integer.parseInt(a[2]), Long.parseLong(a[3]));
            case "uncontended":
                need(a, 5, "uncontended <recipe> <path> <warm> <n> <budget-ms>");
                return uncontended(a[0], a[1], Integer.parseInt(a[2]), Integer.parseInt(a[3]),
                        Long.parseLong(a[4]));
            case "contended":
                if (a.length != 5 || !a[4].equals("one-session")) {
                    need(a, 4, "contended <path> <sessions> <warm-ms> <measure-ms> [one-session]");
                }
                return contended(a[0], Integer.parseInt(a[1]), Long.parseLong(a[2]), Long.parseLong(a[3]),
                        a.length == 5);
            case "drain":
                need(a, 3, "drain <path> <waiters> <timeout-ms>");
                return drain(a[0], Integer.parseInt(a[1]), Long.parseLong(a[2]));
            case "partition":
                need(a, 4, "partition <path> <holder-connect> <session-ms> <deadline-ms>");
                return partition(a[0], a[1], Integer.parseInt(a[2]), Long.parseLong(a[3]));
            case "many-paths":
                need(a, 4, "many-paths <root> <tasks> <warm-ms> <measure-ms>");
                return manyPaths(a[0], Integer.parseInt(a[1]), Long.parseLong(a[2]), Long.parseLong(a[3]));
            case "idle":
                need(a, 5, "idle <root> <locks> <in-flight> <session-ms> <timeout-ms>");
                return idle(a[0], Integer.parseInt(a[1]), Integer.parseInt(a[2]), Integer.parseInt(a[3]),
                        Long.parseLong(a[4]));
            default:
                throw new IllegalArgumentException("unknown command " + command);
        }
    }

    private static void need(String[] args, int n, String usage) {
        if (args.length != n) {
            throw new IllegalArgumentException("usage: " + usage);
        }
    }

    private void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private void awaitLine(String expected) throws IOException {
        String line;
        while ((line = stdin.readLine()) != null) {
            if (line.trim().equals(expected)) {
                return;
            }
        }
        throw new IOException("stdin closed while waiting for '" + expected + "'");
    }

    /** Prints {@code armed} and blocks until the bench has read the server counters. */
    private void armed() throws IOException {
        say("armed");
        awaitLine("go");
    }

    private void closeExtra() {
        for (CuratorFramework client : extra) {
            client.close();
        }
        extra.clear();
    }

    private void ensurePersistent(String path) throws Exception {
        try {
            main.create().creatingParentsIfNeeded().withMode(CreateMode.PERSISTENT).forPath(path, new byte[0]);
        } catch (KeeperException.NodeExistsException e) {
            // fine
        }
    }

    private static double micros(long nanos) {
        return nanos / 1000.0;
    }

    // ---- floor ----------------------------------------------------------------------------------

    private String floor(String path, int warm, int n, long budgetMs) throws Exception {
        ensurePersistent(path);
        String node = path + "/n";
        byte[] empty = new byte[0];
        for (int i = 0; i < warm; i++) {
            main.create().withMode(CreateMode.EPHEMERAL).forPath(node, empty);
            main.delete().forPath(node);
            main.getChildren().forPath(path);
        }
        armed();
        double[] create = new double[n];
        double[] delete = new double[n];
        double[] list = new double[n];
        long start = System.nanoTime();
        long deadline = start + budgetMs * 1_000_000L;
        int done = 0;
        while (done < n && System.nanoTime() < deadline) {
            long t0 = System.nanoTime();
            main.create().withMode(CreateMode.EPHEMERAL).forPath(node, empty);
            long t1 = System.nanoTime();
            main.delete().forPath(node);
            long t2 = System.nanoTime();
            main.getChildren().forPath(path);
            long t3 = System.nanoTime();
            create[done] = micros(t1 - t0);
            delete[done] = micros(t2 - t1);
            list[done] = micros(t3 - t2);
            done++;
        }
        long elapsed = System.nanoTime() - start;
        return new Json()
                .num("ops", done)
                .num("elapsed_s", elapsed / 1e9)
                .arr("create_us", create, done)
                .arr("delete_us", delete, done)
                .arr("list_us", list, done)
                .end();
    }

    // ---- uncontended ----------------------------------------------------------------------------

    /** One lock recipe behind a common face. */
    private interface Cycle {
        /** Acquires; returns what {@link #release} needs. */
        Object acquire() throws Exception;

        void release(Object token) throws Exception;
    }

    private Cycle recipe(CuratorFramework client, String recipe, String path) {
        switch (recipe) {
            case "mutex": {
                InterProcessMutex mutex = new InterProcessMutex(client, path);
                return lockCycle(mutex);
            }
            case "write":
                return lockCycle(new InterProcessReadWriteLock(client, path).writeLock());
            case "read":
                return lockCycle(new InterProcessReadWriteLock(client, path).readLock());
            case "semaphore": {
                InterProcessSemaphoreV2 semaphore = new InterProcessSemaphoreV2(client, path, SEMAPHORE_LEASES);
                return new Cycle() {
                    @Override
                    public Object acquire() throws Exception {
                        return semaphore.acquire();
                    }

                    @Override
                    public void release(Object token) throws Exception {
                        semaphore.returnLease((Lease) token);
                    }
                };
            }
            default:
                throw new IllegalArgumentException("unknown recipe " + recipe);
        }
    }

    private static Cycle lockCycle(InterProcessMutex mutex) {
        return new Cycle() {
            @Override
            public Object acquire() throws Exception {
                mutex.acquire();
                return mutex;
            }

            @Override
            public void release(Object token) throws Exception {
                mutex.release();
            }
        };
    }

    private String uncontended(String recipe, String path, int warm, int n, long budgetMs) throws Exception {
        Cycle cycle = recipe(main, recipe, path);
        for (int i = 0; i < warm; i++) {
            cycle.release(cycle.acquire());
        }
        armed();
        double[] acquire = new double[n];
        double[] total = new double[n];
        long start = System.nanoTime();
        long deadline = start + budgetMs * 1_000_000L;
        int done = 0;
        while (done < n && System.nanoTime() < deadline) {
            long t0 = System.nanoTime();
            Object token = cycle.acquire();
            long t1 = System.nanoTime();
            cycle.release(token);
            long t2 = System.nanoTime();
            acquire[done] = micros(t1 - t0);
            total[done] = micros(t2 - t0);
            done++;
        }
        long elapsed = System.nanoTime() - start;
        return new Json()
                .num("ops", done)
                .num("elapsed_s", elapsed / 1e9)
                .arr("acquire_us", acquire, done)
                .arr("cycle_us", total, done)
                .end();
    }

    // ---- contended ------------------------------------------------------------------------------

    private String contended(String path, int sessions, long warmMs, long measureMs, boolean oneSession)
            throws Exception {
        List<InterProcessMutex> mutexes = new ArrayList<>();
        for (int i = 0; i < sessions; i++) {
            CuratorFramework client = main;
            if (!oneSession) {
                client = connect(connectString);
                extra.add(client);
            }
            mutexes.add(new InterProcessMutex(client, path));
        }
        AtomicInteger holders = new AtomicInteger();
        AtomicLong violations = new AtomicLong();
        AtomicInteger maxHolders = new AtomicInteger();
        AtomicLong grantsTotal = new AtomicLong();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<double[]> waits = new ArrayList<>();
        int[] counts = new int[sessions];
        armed();
        long start = System.nanoTime();
        long measureFrom = start + warmMs * 1_000_000L;
        long end = measureFrom + measureMs * 1_000_000L;
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < sessions; i++) {
            int index = i;
            InterProcessMutex mutex = mutexes.get(i);
            double[] mine = new double[1 << 16];
            waits.add(mine);
            Thread thread = new Thread(() -> {
                try {
                    int recorded = 0;
                    while (System.nanoTime() < end) {
                        long t0 = System.nanoTime();
                        // Bounded: a contender that waits past the end gives up.
                        if (!mutex.acquire(end - t0 + 5_000_000_000L, TimeUnit.NANOSECONDS)) {
                            break;
                        }
                        long t1 = System.nanoTime();
                        int now = holders.incrementAndGet();
                        if (now != 1) {
                            violations.incrementAndGet();
                        }
                        maxHolders.accumulateAndGet(now, Math::max);
                        holders.decrementAndGet();
                        mutex.release();
                        grantsTotal.incrementAndGet();
                        if (t1 >= measureFrom && t1 < end && recorded < mine.length) {
                            mine[recorded++] = micros(t1 - t0);
                        }
                    }
                    counts[index] = recorded;
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }, "contender-" + i);
            threads.add(thread);
            thread.start();
        }
        for (Thread thread : threads) {
            thread.join(measureMs + warmMs + 30_000L);
        }
        if (failure.get() != null) {
            throw new Exception("a contender failed", failure.get());
        }
        int measured = 0;
        for (int count : counts) {
            measured += count;
        }
        double[] all = new double[measured];
        int at = 0;
        for (int i = 0; i < sessions; i++) {
            System.arraycopy(waits.get(i), 0, all, at, counts[i]);
            at += counts[i];
        }
        return new Json()
                .num("sessions", sessions)
                .num("measure_s", measureMs / 1000.0)
                .num("grants_measured", measured)
                .num("grants_total", grantsTotal.get())
                .num("violations", violations.get())
                .num("max_holders", maxHolders.get())
                .arr("wait_us", all, measured)
                .end();
    }

    // ---- contended-processes (one contender per JVM) --------------------------------------------

    /** Acquire + release cycles before {@code ready}, so that the JIT has compiled the lock path. */
    private static final int CONTENDER_WARM_CYCLES = 200;

    /** Nanoseconds since the Unix epoch (microsecond resolution): the clock every process shares. */
    private static long wallNanos() {
        java.time.Instant now = java.time.Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    private static int contender(String connectString, String path) {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        CuratorFramework client = null;
        try {
            client = connect(connectString);
            InterProcessMutex mutex = new InterProcessMutex(client, path);
            long warmUntil = System.nanoTime() + 30_000_000_000L;
            for (int i = 0; i < CONTENDER_WARM_CYCLES && System.nanoTime() < warmUntil; i++) {
                if (mutex.acquire(30, TimeUnit.SECONDS)) {
                    mutex.release();
                }
            }
            System.out.println("ready");
            System.out.flush();
            String line = in.readLine();
            String[] go = line == null ? new String[0] : line.trim().split(" ");
            if (go.length != 4 || !go[0].equals("go")) {
                throw new IllegalArgumentException("expected `go <base> <warm> <measure>`: " + line);
            }
            long base = Long.parseLong(go[1]);
            // The window on this JVM's monotonic clock.
            long start = System.nanoTime() - Math.max(0L, wallNanos() - base);
            long from = start + Long.parseLong(go[2]);
            long end = from + Long.parseLong(go[3]);
            // Bounded: a contender still waiting long after the end gives up.
            long limit = end + 5_000_000_000L;
            double[] waits = new double[1 << 12];
            double[] held = new double[1 << 13];
            int measured = 0;
            int intervals = 0;
            long total = 0;
            double[] asked = new double[1 << 12];
            while (System.nanoTime() < end) {
                long t0 = System.nanoTime();
                double askedAt = wallNanos() - base;
                if (!mutex.acquire(limit - t0, TimeUnit.NANOSECONDS)) {
                    break;
                }
                long t1 = System.nanoTime();
                // The held interval on the wall clock, inside the true hold.
                double h0 = wallNanos() - base;
                double h1 = wallNanos() - base;
                mutex.release();
                if (total == asked.length) {
                    asked = Arrays.copyOf(asked, asked.length * 2);
                }
                asked[(int) total] = askedAt;
                total++;
                if (intervals + 2 > held.length) {
                    held = Arrays.copyOf(held, held.length * 2);
                }
                held[intervals++] = h0;
                held[intervals++] = h1;
                if (t1 >= from && t1 < end) {
                    if (measured == waits.length) {
                        waits = Arrays.copyOf(waits, waits.length * 2);
                    }
                    waits[measured++] = micros(t1 - t0);
                }
            }
            System.out.println("result " + new Json()
                    .num("grants_total", total)
                    .arr("wait_us", waits, measured)
                    .arr("held_ns", held, intervals)
                    .arr("asked_ns", asked, (int) total)
                    .end());
            System.out.flush();
            // Keep the session until the bench has read the server's counters.
            while (in.readLine() != null) {
                // nothing
            }
            return 0;
        } catch (Throwable e) {
            e.printStackTrace();
            System.out.println("error " + (e.getClass().getSimpleName() + ": " + e.getMessage()).replace('\n', ' '));
            System.out.flush();
            return 1;
        } finally {
            if (client != null) {
                client.close();
            }
        }
    }

    // ---- drain ----------------------------------------------------------------------------------

    private String drain(String path, int waiters, long timeoutMs) throws Exception {
        // One InterProcessMutex per waiter, all on the one session, as N processes would have.
        // (Sharing one instance between the threads also works, but its watcher wakes every
        // waiting thread of the instance (notifyAll) on each hand-off, and each of them lists
        // the children again: a herd that real multi-process deployments do not have.)
        InterProcessMutex holder = new InterProcessMutex(main, path);
        holder.acquire();
        CountDownLatch finished = new CountDownLatch(waiters);
        AtomicLong lastFinish = new AtomicLong();
        AtomicInteger holders = new AtomicInteger();
        AtomicLong violations = new AtomicLong();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        long deadline = System.nanoTime() + timeoutMs * 1_000_000L + 60_000_000_000L;
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < waiters; i++) {
            InterProcessMutex mutex = new InterProcessMutex(main, path);
            Thread thread = new Thread(null, () -> {
                try {
                    if (mutex.acquire(deadline - System.nanoTime(), TimeUnit.NANOSECONDS)) {
                        if (holders.incrementAndGet() != 1) {
                            violations.incrementAndGet();
                        }
                        holders.decrementAndGet();
                        mutex.release();
                        lastFinish.accumulateAndGet(System.nanoTime(), Math::max);
                        finished.countDown();
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }, "waiter-" + i, 256 * 1024);
            thread.setDaemon(true);
            threads.add(thread);
            thread.start();
        }
        armed();
        long start = System.nanoTime();
        holder.release();
        boolean complete = finished.await(timeoutMs, TimeUnit.MILLISECONDS);
        long end = complete ? lastFinish.get() : System.nanoTime();
        if (failure.get() != null) {
            throw new Exception("a waiter failed", failure.get());
        }
        for (Thread thread : threads) {
            thread.join(complete ? 5_000L : 1L);
        }
        return new Json()
                .num("waiters", waiters)
                .num("completed", waiters - finished.getCount())
                .num("violations", violations.get())
                .num("drain_s", (end - start) / 1e9)
                .end();
    }

    // ---- partition ------------------------------------------------------------------------------

    /** How long connecting, the holder's acquire and the other session's queueing may take. */
    private static final long SETUP_MS = 30_000L;

    private String partition(String path, String holderConnect, int sessionMs, long deadlineMs) throws Exception {
        AtomicLong suspended = new AtomicLong();
        AtomicLong lost = new AtomicLong();
        AtomicLong granted = new AtomicLong();
        // Counted down once by each of the three, the first time it happens.
        CountDownLatch signals = new CountDownLatch(3);
        CuratorFramework holderClient = connect(holderConnect, sessionMs);
        extra.add(holderClient);
        holderClient.getConnectionStateListenable().addListener((client, state) -> {
            if (state == ConnectionState.SUSPENDED && suspended.compareAndSet(0, wallNanos())) {
                signals.countDown();
            }
            if (state == ConnectionState.LOST && lost.compareAndSet(0, wallNanos())) {
                signals.countDown();
            }
        });
        InterProcessMutex holder = new InterProcessMutex(holderClient, path);
        if (!holder.acquire(SETUP_MS, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("the holder did not get " + path + " in time");
        }
        CuratorFramework otherClient = connect(connectString, sessionMs);
        extra.add(otherClient);
        InterProcessMutex other = new InterProcessMutex(otherClient, path);
        Thread waiter = new Thread(() -> {
            try {
                if (other.acquire(SETUP_MS + deadlineMs, TimeUnit.MILLISECONDS)) {
                    granted.set(wallNanos());
                    signals.countDown();
                    other.release();
                }
            } catch (Exception e) {
                // Its session was closed at clean-up while it still waited: not granted.
            }
        }, "partition-contender");
        waiter.setDaemon(true);
        waiter.start();
        // The bench waits until the other session's node is queued, then cuts and says go.
        armed();
        signals.await(deadlineMs, TimeUnit.MILLISECONDS);
        Json json = new Json();
        if (suspended.get() != 0) {
            json.integer("suspended_ns", suspended.get());
        }
        if (lost.get() != 0) {
            json.integer("lost_ns", lost.get());
        }
        if (granted.get() != 0) {
            json.integer("granted_ns", granted.get());
        }
        return json.end();
    }

    // ---- idle -----------------------------------------------------------------------------------

    private String idle(String root, int locks, int inFlight, int sessionMs, long timeoutMs) throws Exception {
        CuratorFramework client = connect(connectString, sessionMs);
        extra.add(client);
        InterProcessMutex warm = new InterProcessMutex(client, root + "/warm");
        warm.acquire();
        warm.release();
        long heapBefore = usedHeap();
        InterProcessMutex[] held = new InterProcessMutex[locks];
        AtomicInteger next = new AtomicInteger();
        AtomicInteger taken = new AtomicInteger();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        long start = System.nanoTime();
        long deadline = start + timeoutMs * 1_000_000L;
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < Math.min(inFlight, locks); t++) {
            Thread thread = new Thread(null, () -> {
                try {
                    for (int i = next.getAndIncrement(); i < locks && failure.get() == null; i = next.getAndIncrement()) {
                        InterProcessMutex mutex = new InterProcessMutex(client, root + "/l" + i);
                        if (!mutex.acquire(deadline - System.nanoTime(), TimeUnit.NANOSECONDS)) {
                            throw new IllegalStateException("not all " + locks + " locks taken in " + timeoutMs + " ms");
                        }
                        held[i] = mutex;
                        taken.incrementAndGet();
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }, "idle-taker-" + t, 256 * 1024);
            thread.setDaemon(true);
            threads.add(thread);
            thread.start();
        }
        for (Thread thread : threads) {
            thread.join(Math.max(1L, (deadline - System.nanoTime()) / 1_000_000L + 1_000L));
        }
        long took = System.nanoTime() - start;
        if (failure.get() != null) {
            throw new Exception("taking the locks failed after " + taken.get() + " of " + locks, failure.get());
        }
        if (taken.get() < locks) {
            throw new IllegalStateException("only " + taken.get() + " of " + locks + " locks taken in " + timeoutMs + " ms");
        }
        long heapAfter = usedHeap();
        armed();
        // Held, and counted in the heap, until the bench has measured the idle window.
        Reference.reachabilityFence(held);
        return new Json()
                .num("count", taken.get())
                .num("take_s", took / 1e9)
                .num("heap_before", heapBefore)
                .num("heap_after", heapAfter)
                .end();
    }

    /** Heap in use after full collections (the serial collector's {@code System.gc()} is one). */
    private static long usedHeap() {
        Runtime runtime = Runtime.getRuntime();
        System.gc();
        System.gc();
        return runtime.totalMemory() - runtime.freeMemory();
    }

    // ---- many-paths -----------------------------------------------------------------------------

    private String manyPaths(String root, int tasks, long warmMs, long measureMs) throws Exception {
        AtomicReference<Throwable> failure = new AtomicReference<>();
        CountDownLatch warmed = new CountDownLatch(tasks);
        CountDownLatch started = new CountDownLatch(1);
        // The window on this JVM's clock, written before {@code started} opens (which orders it).
        long[] window = new long[2];
        double[][] cycles = new double[tasks][];
        int[] counts = new int[tasks];
        long[] totals = new long[tasks];
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < tasks; i++) {
            int index = i;
            String path = root + "/l" + i;
            InterProcessMutex mutex = new InterProcessMutex(main, path);
            Thread thread = new Thread(null, () -> {
                try {
                    // One cycle before the counters are read: the lock's parent then exists.
                    if (!mutex.acquire(SETUP_MS, TimeUnit.MILLISECONDS)) {
                        throw new IllegalStateException("the first acquire of " + path + " timed out");
                    }
                    mutex.release();
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
                warmed.countDown();
                try {
                    started.await();
                    if (failure.get() != null) {
                        return;
                    }
                    long from = window[0];
                    long end = window[1];
                    double[] took = new double[256];
                    int n = 0;
                    long total = 0;
                    while (System.nanoTime() < end) {
                        long t0 = System.nanoTime();
                        // Bounded: a thread that waits past the end gives up.
                        if (!mutex.acquire(end - t0 + 5_000_000_000L, TimeUnit.NANOSECONDS)) {
                            break;
                        }
                        long t1 = System.nanoTime();
                        mutex.release();
                        long t2 = System.nanoTime();
                        total++;
                        if (t1 >= from && t1 < end) {
                            if (n == took.length) {
                                took = Arrays.copyOf(took, n * 2);
                            }
                            took[n++] = micros(t2 - t0);
                        }
                    }
                    cycles[index] = took;
                    counts[index] = n;
                    totals[index] = total;
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }, "many-paths", 256 * 1024);
            thread.setDaemon(true);
            threads.add(thread);
            thread.start();
        }
        try {
            if (!warmed.await(SETUP_MS * 4, TimeUnit.MILLISECONDS)) {
                throw new IllegalStateException("the first cycles did not finish in " + SETUP_MS * 4 + " ms");
            }
            if (failure.get() != null) {
                throw new Exception("a first cycle failed", failure.get());
            }
            armed();
            long start = System.nanoTime();
            window[0] = start + warmMs * 1_000_000L;
            window[1] = window[0] + measureMs * 1_000_000L;
        } finally {
            // Opened whatever happened: with no window (or a failure) the threads end at once.
            started.countDown();
        }
        for (Thread thread : threads) {
            thread.join(warmMs + measureMs + 30_000L);
            if (thread.isAlive()) {
                throw new IllegalStateException("a many-paths thread did not finish in time");
            }
        }
        if (failure.get() != null) {
            throw new Exception("a many-paths thread failed", failure.get());
        }
        int measured = 0;
        long total = 0;
        for (int i = 0; i < tasks; i++) {
            measured += counts[i];
            total += totals[i];
        }
        double[] all = new double[measured];
        int at = 0;
        for (int i = 0; i < tasks; i++) {
            System.arraycopy(cycles[i], 0, all, at, counts[i]);
            at += counts[i];
        }
        return new Json()
                .num("tasks", tasks)
                .num("measure_s", measureMs / 1000.0)
                .num("grants_measured", measured)
                .num("grants_total", total)
                .arr("cycle_us", all, measured)
                .end();
    }

    // ---- output ---------------------------------------------------------------------------------

    /** A flat JSON object of numbers and number arrays. */
    private static final class Json {
        private final StringBuilder sb = new StringBuilder("{");

        private Json key(String key) {
            if (sb.length() > 1) {
                sb.append(',');
            }
            sb.append('"').append(key).append("\":");
            return this;
        }

        Json num(String key, double value) {
            key(key);
            if (value == Math.rint(value) && Math.abs(value) < 1e15) {
                sb.append((long) value);
            } else {
                sb.append(value);
            }
            return this;
        }

        /** A whole number printed exactly (a Unix-time nanosecond does not fit a double). */
        Json integer(String key, long value) {
            key(key).sb.append(value);
            return this;
        }

        Json arr(String key, double[] values, int n) {
            key(key).sb.append('[');
            for (int i = 0; i < n; i++) {
                if (i > 0) {
                    sb.append(',');
                }
                sb.append(Math.round(values[i] * 10) / 10.0);
            }
            sb.append(']');
            return this;
        }

        String end() {
            return sb.append('}').toString();
        }
    }
}
