// Reference benchmark for bench/compare.sh: Guava's RateLimiter.tryAcquire() (Debian's libguava-java), the Java
// limiter admit is measured against.
//
// JMH is not packaged in Debian 12, so this is a plain harness: per case, warm-up rounds (to let the JIT compile the
// loop: C2 and on-stack replacement), then timed rounds of a fixed number of calls each; it prints the median ns/op of
// the timed rounds. With more than one thread, every thread runs the same number of calls on one shared limiter,
// released together by a barrier, and ns/op is the wall time of the round divided by the calls of all threads (as
// Google Benchmark's UseRealTime() and Go's RunParallel report it).
//
//   javac -cp /usr/share/java/guava.jar -d OUT GuavaRateLimiterBench.java
//   java -cp /usr/share/java/guava.jar:OUT GuavaRateLimiterBench [rounds] [round-millis]
//
// Output: one line per case, "<case> <threads> <median ns/op>".
//
// Cases: admit — RateLimiter.create(1e9): a finite, huge rate, every call is admitted; reject — one permit per hour,
// the stored permit spent before timing, every call is refused. tryAcquire() always reads the clock
// (System.nanoTime through Guava's Stopwatch); Guava has no public form that takes the caller's time.
// Every call's answer is checked; a wrong answer aborts the run.

import com.google.common.util.concurrent.RateLimiter;
import java.util.Arrays;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

public final class GuavaRateLimiterBench {
  private GuavaRateLimiterBench() {}

  private static RateLimiter admitLimiter() { return RateLimiter.create(1e9); }

  private static RateLimiter rejectLimiter() {
    RateLimiter limiter = RateLimiter.create(1.0 / 3600.0);
    if (!limiter.tryAcquire()) throw new IllegalStateException("the first permit should be granted");
    return limiter;
  }

  /** Runs `calls` tryAcquire() on each of `threads` threads on one limiter; returns the wall time in ns. */
  private static long round(RateLimiter limiter, int threads, long calls, boolean want) throws Exception {
    final AtomicLong wrong = new AtomicLong();
    final CyclicBarrier start = new CyclicBarrier(threads + 1);
    final CyclicBarrier stop = new CyclicBarrier(threads + 1);
    Thread[] workers = new Thread[threads];
    for (int t = 0; t < threads; t++) {
      workers[t] = new Thread(() -> {
        try {
          start.await();
          long bad = 0;
          for (long i = 0; i < calls; i++) {
            if (limiter.tryAcquire() != want) bad++;
          }
          wrong.addAndGet(bad);
          stop.await();
        } catch (Exception e) {
          throw new RuntimeException(e);
        }
      });
      workers[t].start();
    }
    start.await();
    long t0 = System.nanoTime();
    stop.await();
    long elapsed = System.nanoTime() - t0;
    for (Thread w : workers) w.join();
    if (wrong.get() != 0) {
      throw new IllegalStateException(wrong.get() + " calls did not return " + want);
    }
    return elapsed;
  }

  private static double medianNsPerOp(String name, Supplier<RateLimiter> make, boolean want, int threads, int rounds,
      long roundMillis) throws Exception {
    RateLimiter limiter = make.get();
    // Calibrate: grow the call count until one round lasts ~roundMillis (this also warms the JIT up).
    long calls = 1000;
    while (true) {
      long ns = round(limiter, threads, calls, want);
      if (ns >= roundMillis * 1_000_000L / 4) {
        calls = Math.max(1, (long) (calls * (roundMillis * 1e6 / ns)));
        break;
      }
      calls *= 4;
    }
    for (int i = 0; i < 3; i++) round(limiter, threads, calls, want); // warm-up rounds
    double[] perOp = new double[rounds];
    for (int i = 0; i < rounds; i++) {
      perOp[i] = (double) round(limiter, threads, calls, want) / ((double) calls * threads);
    }
    Arrays.sort(perOp);
    double median = rounds % 2 == 1 ? perOp[rounds / 2] : (perOp[rounds / 2 - 1] + perOp[rounds / 2]) / 2;
    System.out.printf("%s %d %.2f%n", name, threads, median);
    System.out.flush();
    return median;
  }

  public static void main(String[] args) throws Exception {
    int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 7;
    long roundMillis = args.length > 1 ? Long.parseLong(args[1]) : 200;
    for (int threads : new int[] {1, 2, 8}) {
      medianNsPerOp("admit", GuavaRateLimiterBench::admitLimiter, true, threads, rounds, roundMillis);
      medianNsPerOp("reject", GuavaRateLimiterBench::rejectLimiter, false, threads, rounds, roundMillis);
    }
    // The clock read Guava pays in every tryAcquire().
    long calls = 10_000_000;
    double[] perOp = new double[rounds];
    long sink = 0;
    for (int r = 0; r < rounds + 3; r++) {
      long t0 = System.nanoTime();
      for (long i = 0; i < calls; i++) sink += System.nanoTime();
      long ns = System.nanoTime() - t0;
      if (r >= 3) perOp[r - 3] = (double) ns / calls;
    }
    Arrays.sort(perOp);
    System.out.printf("nanotime 1 %.2f%n", perOp[rounds / 2]);
    if (sink == 42) System.out.println(sink);
  }
}
