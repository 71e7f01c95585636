package io.github.orderflow.interop;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/** The lines of transactions left unknown that the broker has checked back. */
final class CheckBacks {
    private final Set<Integer> lines = ConcurrentHashMap.newKeySet();

    /** Records a check-back of line i. */
    void add(int i) {
        lines.add(i);
    }

    int count() {
        return lines.size();
    }

    /**
     * Waits until want lines were checked back or seconds have passed; the
     * summary reports how many were (the caller judges).
     */
    void await(int want, long seconds) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (lines.size() < want && System.nanoTime() < deadline) {
            TimeUnit.MILLISECONDS.sleep(200);
        }
    }
}
