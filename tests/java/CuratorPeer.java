import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
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

    /** Exposes the held lock node, which Curator keeps behind a protected accessor. */
    private static final class NamedMutex extends InterProcessMutex {
        NamedMutex(CuratorFramework client, String path) {
            super(client, path);
        }

        /** Last path segment of the lock node held by the calling thread. */
        String nodeName() {
            String path = getLockPath();
            return path == null ? "?" : path.substring(path.lastIndexOf('/') + 1);
        }
    }
}
