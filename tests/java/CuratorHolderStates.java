import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;

/**
 * Holds an {@code InterProcessMutex} and prints what Curator's {@code ConnectionStateListener}
 * tells its holder (tests/server_partitions/curator.rs). Curator's defaults, but for the session
 * timeout: so LOST is Curator 5's simulated session expiry, a session timeout after SUSPENDED.
 *
 * <p>Usage: {@code CuratorHolderStates <connect-string> <session-timeout-ms> <lock-path>}
 *
 * <p>Prints on stdout, one line each, times in milliseconds since the epoch
 * ({@code System.currentTimeMillis()}): {@code SESSION <negotiated-timeout-ms>} once connected,
 * {@code HELD <millis>} once the mutex is acquired, {@code STATE <state> <millis>} at every call
 * of the listener. Exits, without releasing, when stdin says {@code exit} or closes.
 */
public final class CuratorHolderStates {
    private static final int CONNECT_WAIT_SECONDS = 30;

    public static void main(String[] argv) {
        try {
            run(argv);
        } catch (Throwable e) {
            System.err.println("CuratorHolderStates " + String.join(" ", argv) + " failed:");
            e.printStackTrace();
            System.exit(1);
        }
        // Curator and ZooKeeper may leave non-daemon threads behind.
        System.exit(0);
    }

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static void run(String[] argv) throws Exception {
        if (argv.length != 3) {
            throw new IllegalArgumentException(
                    "usage: CuratorHolderStates <connect-string> <session-timeout-ms> <lock-path>");
        }
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(argv[0])
                .sessionTimeoutMs(Integer.parseInt(argv[1]))
                .retryPolicy(new ExponentialBackoffRetry(100, 5))
                .build();
        client.getConnectionStateListenable().addListener(
                (c, state) -> say("STATE " + state + " " + System.currentTimeMillis()));
        client.start();
        if (!client.blockUntilConnected(CONNECT_WAIT_SECONDS, TimeUnit.SECONDS)) {
            throw new IllegalStateException("could not connect to " + argv[0]);
        }
        say("SESSION " + client.getZookeeperClient().getZooKeeper().getSessionTimeout());
        InterProcessMutex mutex = new InterProcessMutex(client, argv[2]);
        mutex.acquire();
        say("HELD " + System.currentTimeMillis());
        BufferedReader stdin =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = stdin.readLine()) != null && !line.trim().equals("exit")) {
            // Wait for the test.
        }
    }
}
