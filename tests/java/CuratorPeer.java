import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.locks.RevocationListener;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.retry.ExponentialBackoffRetry;

/**
 * Command-line peer that drives real Apache Curator recipes for the zk-lock interop tests.
 *
 * <p>Usage: {@code java -cp <classpath> CuratorPeer <connect-string> <command> [args...]}
 *
 * <p>Protocol (one line each, stdout carries nothing else): the peer prints {@code ready} once
 * connected, waits for {@code go} on stdin so a test can start all contenders together, then runs
 * the command. Exit code 0 means success; any failure exits non-zero with a message on stderr.
 *
 * <p>To add a recipe, write a static method matching {@link Command} and register it in
 * {@link #COMMANDS}.
 */
public final class CuratorPeer {
    private static final int SESSION_TIMEOUT_MS = 10_000;
    private static final int CONNECTION_TIMEOUT_MS = 10_000;
    /** Bound for the initial connection; a peer that cannot connect must fail, not hang. */
    private static final int CONNECT_WAIT_SECONDS = 30;
    /** Bound for waiting on something the test is expected to trigger, e.g. a revocation. */
    private static final int EVENT_WAIT_SECONDS = 60;

    @FunctionalInterface
    private interface Command {
        void run(CuratorPeer peer, String[] args) throws Exception;
    }

    private record Spec(String usage, int arity, Command command) {}

    private static final Map<String, Spec> COMMANDS = new TreeMap<>();

    static {
        COMMANDS.put("mutex-counter",
                new Spec("<lock-path> <iterations> <counter-file>", 3, CuratorPeer::mutexCounter));
        COMMANDS.put("mutex-hold", new Spec("<lock-path>", 1, CuratorPeer::mutexHold));
        COMMANDS.put("leader-hold", new Spec("<election-path> <id>", 2, CuratorPeer::leaderHold));
        COMMANDS.put("leader-of", new Spec("<election-path>", 1, CuratorPeer::leaderOf));
        COMMANDS.put("mutex-try", new Spec("<lock-path> <millis>", 2, CuratorPeer::mutexTry));
        COMMANDS.put("rw-counter", new Spec("<lock-path> <count> <counter-file> <reader|writer>", 4,
                CuratorPeer::rwCounter));
        COMMANDS.put("rw-hold", new Spec("<lock-path> <read|write>", 2, CuratorPeer::rwHold));
        COMMANDS.put("revocable-hold",
                new Spec("<lock-path> <mutex|read|write>", 2, CuratorPeer::revocableHold));
        COMMANDS.put("revoke", new Spec("<lock-node-path>", 1, CuratorPeer::revoke));
        COMMANDS.put("semaphore-holders",
                new Spec("<semaphore-path> <max-leases> <iterations> <holders-dir>", 4,
                        CuratorPeer::semaphoreHolders));
    }

    private final CuratorFramework client;
    private final BufferedReader stdin =
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));

    private CuratorPeer(CuratorFramework client) {
        this.client = client;
    }

    public static void main(String[] argv) {
        try {
            run(argv);
        } catch (Throwable e) {
            System.err.println("CuratorPeer " + String.join(" ", argv) + " failed:");
            e.printStackTrace();
            System.exit(1);
        }
        // Curator and ZooKeeper may leave non-daemon threads behind; do not let them delay exit.
        System.exit(0);
    }

    private static void run(String[] argv) throws Exception {
        if (argv.length < 2 || !COMMANDS.containsKey(argv[1])) {
            throw new IllegalArgumentException(usage());
        }
        Spec spec = COMMANDS.get(argv[1]);
        String[] args = Arrays.copyOfRange(argv, 2, argv.length);
        // Validate before connecting so a bad invocation fails fast.
        if (args.length != spec.arity()) {
            throw new IllegalArgumentException(
                    "usage: CuratorPeer <connect-string> " + argv[1] + " " + spec.usage());
        }

        CuratorFramework client = CuratorFrameworkFactory.newClient(argv[0], SESSION_TIMEOUT_MS,
                CONNECTION_TIMEOUT_MS, new ExponentialBackoffRetry(100, 5));
        try {
            client.start();
            if (!client.blockUntilConnected(CONNECT_WAIT_SECONDS, TimeUnit.SECONDS)) {
                throw new IllegalStateException("could not connect to " + argv[0] + " within "
                        + CONNECT_WAIT_SECONDS + " s");
            }
            CuratorPeer peer = new CuratorPeer(client);
            peer.say("ready");
            peer.awaitLine("go");
            spec.command().run(peer, args);
        } finally {
            client.close();
        }
    }

    private static String usage() {
        StringBuilder sb =
                new StringBuilder("usage: CuratorPeer <connect-string> <command> [args...]");
        COMMANDS.forEach((name, spec) ->
                sb.append("\n  ").append(name).append(' ').append(spec.usage()));
        return sb.toString();
    }

    /** Prints one protocol line; flushed at once because the test reads it through a pipe. */
    private void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    /** Blocks until {@code expected} arrives on stdin; EOF means the test went away. */
    private void awaitLine(String expected) throws IOException {
        String line;
        while ((line = stdin.readLine()) != null) {
            if (line.trim().equals(expected)) {
                return;
            }
        }
        throw new IOException("stdin closed while waiting for '" + expected + "'");
    }

    // ---- commands ------------------------------------------------------------------------------

    /**
     * Increments a shared counter file under the lock. The read-sleep-write makes a lost update,
     * and so a broken mutual exclusion, very likely to show up in the final value.
     */
    private static void mutexCounter(CuratorPeer peer, String[] args) throws Exception {
        String lockPath = args[0];
        int iterations = Integer.parseInt(args[1]);
        Path counterFile = Path.of(args[2]);
        InterProcessMutex mutex = new InterProcessMutex(peer.client, lockPath);
        for (int i = 1; i <= iterations; i++) {
            mutex.acquire();
            try {
                int value = readCounter(counterFile);
                Thread.sleep(1);
                writeCounter(counterFile, value + 1);
                peer.say("grant " + i);
            } finally {
                mutex.release();
            }
        }
        peer.say("done " + iterations);
    }

    /** Holds the lock until the test sends {@code release}, reporting the lock node's name. */
    private static void mutexHold(CuratorPeer peer, String[] args) throws Exception {
        NamedMutex mutex = new NamedMutex(peer.client, args[0]);
        mutex.acquire();
        try {
            peer.say("held " + mutex.nodeName());
            peer.awaitLine("release");
        } finally {
            mutex.release();
        }
        peer.say("released");
    }

    /**
     * Joins the election at the path as {@code id} with a {@link LeaderSelector}: prints
     * {@code started}, then {@code leading} once it leads, gives the leadership up when {@code
     * resign} arrives on stdin, and prints {@code resigned}.
     */
    private static void leaderHold(CuratorPeer peer, String[] args) throws Exception {
        CountDownLatch resigned = new CountDownLatch(1);
        LeaderSelector selector = new LeaderSelector(peer.client, args[0], new LeaderSelectorListenerAdapter() {
            @Override
            public void takeLeadership(CuratorFramework client) throws Exception {
                peer.say("leading");
                peer.awaitLine("resign");
                resigned.countDown();
            }
        });
        selector.setId(args[1]);
        selector.start();
        peer.say("started");
        if (!resigned.await(EVENT_WAIT_SECONDS * 2, TimeUnit.SECONDS)) {
            throw new IllegalStateException("never led and resigned");
        }
        selector.close();
        peer.say("resigned");
    }

    /** Prints {@code leader <id>} as Curator's {@code LeaderSelector.getLeader()} reads it, or {@code leader none}. */
    private static void leaderOf(CuratorPeer peer, String[] args) throws Exception {
        LeaderSelector selector = new LeaderSelector(peer.client, args[0], new LeaderSelectorListenerAdapter() {
            @Override
            public void takeLeadership(CuratorFramework client) {}
        });
        Participant leader = selector.getLeader();
        peer.say("leader " + (leader.isLeader() ? leader.getId() : "none"));
    }

    /**
     * Tries the lock for at most {@code millis} ms: prints {@code acquired} (and releases it) or
     * {@code timed-out}.
     */
    private static void mutexTry(CuratorPeer peer, String[] args) throws Exception {
        InterProcessMutex mutex = new InterProcessMutex(peer.client, args[0]);
        if (mutex.acquire(Long.parseLong(args[1]), TimeUnit.MILLISECONDS)) {
            mutex.release();
            peer.say("acquired");
        } else {
            peer.say("timed-out");
        }
    }

    /**
     * Shares a counter file through an {@link InterProcessReadWriteLock}.
     *
     * <p>A {@code writer} increments it {@code count} times under the write lock (read, sleep,
     * write, as {@code mutex-counter}), printing {@code grant <i>} each time and {@code done
     * <count>} at the end. A {@code reader} reads it under the read lock until it sees a value of
     * at least {@code count}: twice per hold, with a sleep between; a change between the two reads
     * means a writer held the lock at the same time, so it prints {@code violation <first>
     * <second>} and fails. At the end it prints {@code done <reads> <distinct-values-seen>}.
     */
    private static void rwCounter(CuratorPeer peer, String[] args) throws Exception {
        String lockPath = args[0];
        int count = Integer.parseInt(args[1]);
        Path counterFile = Path.of(args[2]);
        InterProcessReadWriteLock lock = new InterProcessReadWriteLock(peer.client, lockPath);
        switch (args[3]) {
            case "writer" -> {
                InterProcessMutex write = lock.writeLock();
                for (int i = 1; i <= count; i++) {
                    write.acquire();
                    try {
                        int value = readCounter(counterFile);
                        Thread.sleep(1);
                        writeCounter(counterFile, value + 1);
                        peer.say("grant " + i);
                    } finally {
                        write.release();
                    }
                }
                peer.say("done " + count);
            }
            case "reader" -> {
                InterProcessMutex read = lock.readLock();
                Set<Integer> seen = new TreeSet<>();
                int reads = 0;
                int value = 0;
                while (value < count) {
                    read.acquire();
                    try {
                        value = readCounter(counterFile);
                        Thread.sleep(1);
                        int again = readCounter(counterFile);
                        if (again != value) {
                            peer.say("violation " + value + " " + again);
                            throw new IllegalStateException("the counter changed from " + value
                                    + " to " + again + " while the read lock was held");
                        }
                    } finally {
                        read.release();
                    }
                    reads++;
                    seen.add(value);
                }
                peer.say("done " + reads + " " + seen.size());
            }
            default -> throw new IllegalArgumentException(
                    "expected reader or writer, got " + args[3]);
        }
    }

    /**
     * Holds one side of an {@link InterProcessReadWriteLock} until the test sends {@code
     * release}. Once granted it prints {@code held <node-name>}, then {@code children <names...>}:
     * the lock's children as listed right after the grant, sorted by sequence, so the test can
     * check that no conflicting holder was still there.
     */
    private static void rwHold(CuratorPeer peer, String[] args) throws Exception {
        NamedReadWriteLock lock = new NamedReadWriteLock(peer.client, args[0]);
        NamedLock side = lock.side(args[1]);
        side.acquire();
        try {
            peer.say("held " + side.nodeName());
            peer.say("children " + String.join(" ", peer.sortedChildren(args[0])));
            peer.awaitLine("release");
        } finally {
            side.release();
        }
        peer.say("released");
    }

    /**
     * Takes an {@link InterProcessMutex}, or one side of an {@link InterProcessReadWriteLock},
     * made revocable first with {@code makeRevocable}, and holds it until revoked.
     *
     * <p>Prints {@code held <node-name>} once granted. The {@code RevocationListener} prints
     * {@code revoked} and tells the holding thread to release (Curator only lets the thread that
     * acquired release); the peer then prints {@code released}. Fails if no revocation comes
     * within a minute.
     */
    private static void revocableHold(CuratorPeer peer, String[] args) throws Exception {
        String lockPath = args[0];
        NamedLock lock = switch (args[1]) {
            case "mutex" -> new NamedMutex(peer.client, lockPath);
            case "read", "write" -> new NamedReadWriteLock(peer.client, lockPath).side(args[1]);
            default -> throw new IllegalArgumentException(
                    "expected mutex, read or write, got " + args[1]);
        };
        CountDownLatch revoked = new CountDownLatch(1);
        lock.makeRevocable(forLock -> {
            if (revoked.getCount() > 0) {
                peer.say("revoked");
            }
            revoked.countDown();
        });
        lock.acquire();
        try {
            peer.say("held " + lock.nodeName());
            if (!revoked.await(EVENT_WAIT_SECONDS, TimeUnit.SECONDS)) {
                throw new IllegalStateException(
                        "not revoked within " + EVENT_WAIT_SECONDS + " s");
            }
        } finally {
            lock.release();
        }
        peer.say("released");
    }

    /** Runs Curator's {@code Revoker.attemptRevoke} on a lock node; prints {@code revoke-sent}. */
    private static void revoke(CuratorPeer peer, String[] args) throws Exception {
        Revoker.attemptRevoke(peer.client, args[0]);
        peer.say("revoke-sent");
    }

    /**
     * Takes a lease of an {@link InterProcessSemaphoreV2} {@code iterations} times and proves
     * that at most {@code max-leases} holders exist at once, through a directory shared with the
     * other holders.
     *
     * <p>After acquiring, it creates its own file in {@code holders-dir} and counts the holders
     * (see {@link #countHolders}); more than {@code max-leases} prints {@code violation <n>} and
     * fails. It holds a few milliseconds, deletes its file, then returns the lease. It prints
     * {@code grant <i> <holders>} each time and {@code done <iterations> <max-holders-seen>} at
     * the end.
     */
    private static void semaphoreHolders(CuratorPeer peer, String[] args) throws Exception {
        int maxLeases = Integer.parseInt(args[1]);
        int iterations = Integer.parseInt(args[2]);
        Path dir = Path.of(args[3]);
        InterProcessSemaphoreV2 semaphore =
                new InterProcessSemaphoreV2(peer.client, args[0], maxLeases);
        String me = "java-" + ProcessHandle.current().pid() + "-";
        int maxSeen = 0;
        for (int i = 1; i <= iterations; i++) {
            Lease lease = semaphore.acquire();
            try {
                Path mine = dir.resolve(me + i);
                Files.createFile(mine);
                try {
                    int holders = countHolders(dir);
                    maxSeen = Math.max(maxSeen, holders);
                    if (holders > maxLeases) {
                        peer.say("violation " + holders);
                        throw new IllegalStateException(holders + " holders of a semaphore with "
                                + maxLeases + " leases");
                    }
                    peer.say("grant " + i + " " + holders);
                    Thread.sleep(5);
                } finally {
                    Files.delete(mine);
                }
            } finally {
                semaphore.returnLease(lease);
            }
        }
        peer.say("done " + iterations + " " + maxSeen);
    }

    /**
     * The number of files in {@code dir} that all existed at one instant: listed, then checked
     * again. Each holder's file has a unique name and exists during one interval; a file both
     * listed and found afterwards existed from its listing to its check, and every listing comes
     * before every check, so those files coexisted when the listing ended. A file deleted (and
     * maybe replaced by another holder's) while the directory was being read is not counted, so
     * a correct semaphore never shows more holders than leases.
     */
    private static int countHolders(Path dir) throws IOException {
        List<Path> listed;
        try (Stream<Path> entries = Files.list(dir)) {
            listed = entries.toList();
        }
        int holders = 0;
        for (Path file : listed) {
            if (Files.exists(file)) {
                holders++;
            }
        }
        return holders;
    }

    /** The children of {@code path}, sorted by their sequence suffix as Curator sorts them. */
    private List<String> sortedChildren(String path) throws Exception {
        List<String> children = new ArrayList<>(client.getChildren().forPath(path));
        Collections.sort(children,
                (a, b) -> a.substring(a.length() - 10).compareTo(b.substring(b.length() - 10)));
        return children;
    }

    private static int readCounter(Path file) throws IOException {
        try {
            String text = Files.readString(file, StandardCharsets.UTF_8).trim();
            return text.isEmpty() ? 0 : Integer.parseInt(text);
        } catch (NoSuchFileException e) {
            return 0;
        }
    }

    /** Rewrites in place (no rename), so the file never disappears for other readers. */
    private static void writeCounter(Path file, int value) throws IOException {
        Files.writeString(file, Integer.toString(value), StandardCharsets.UTF_8,
                StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.TRUNCATE_EXISTING);
    }

    /** A Curator lock that names its held node, which Curator keeps behind a protected accessor. */
    private interface NamedLock {
        void acquire() throws Exception;

        void release() throws Exception;

        void makeRevocable(RevocationListener<InterProcessMutex> listener);

        /** Last path segment of the lock node held by the calling thread. */
        String nodeName();
    }

    private static String lastSegment(String path) {
        return path == null ? "?" : path.substring(path.lastIndexOf('/') + 1);
    }

    /** Exposes the held lock node, which Curator keeps behind a protected accessor. */
    private static final class NamedMutex extends InterProcessMutex implements NamedLock {
        NamedMutex(CuratorFramework client, String path) {
            super(client, path);
        }

        /** Last path segment of the lock node held by the calling thread. */
        @Override
        public String nodeName() {
            return lastSegment(getLockPath());
        }
    }

    /**
     * Curator's {@link InterProcessReadWriteLock}, built from its own public {@code WriteLock} and
     * {@code ReadLock} exactly as its public constructor builds them, with the held nodes exposed.
     */
    private static final class NamedReadWriteLock extends InterProcessReadWriteLock {
        private final NamedWriteLock write;
        private final NamedReadLock read;

        NamedReadWriteLock(CuratorFramework client, String path) {
            this(client, path, new NamedWriteLock(client, path));
        }

        private NamedReadWriteLock(CuratorFramework client, String path, NamedWriteLock write) {
            this(write, new NamedReadLock(client, path, write));
        }

        private NamedReadWriteLock(NamedWriteLock write, NamedReadLock read) {
            super(write, read);
            this.write = write;
            this.read = read;
        }

        /** {@code read} or {@code write}. */
        NamedLock side(String side) {
            return switch (side) {
                case "read" -> read;
                case "write" -> write;
                default -> throw new IllegalArgumentException(
                        "expected read or write, got " + side);
            };
        }
    }

    private static final class NamedWriteLock extends InterProcessReadWriteLock.WriteLock
            implements NamedLock {
        NamedWriteLock(CuratorFramework client, String path) {
            super(client, path, null);
        }

        @Override
        public String nodeName() {
            return lastSegment(getLockPath());
        }
    }

    private static final class NamedReadLock extends InterProcessReadWriteLock.ReadLock
            implements NamedLock {
        NamedReadLock(CuratorFramework client, String path,
                InterProcessReadWriteLock.WriteLock write) {
            super(client, path, null, write);
        }

        @Override
        public String nodeName() {
            return lastSegment(getLockPath());
        }
    }
}
