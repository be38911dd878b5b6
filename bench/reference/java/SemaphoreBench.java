// Reference benchmark for bench/compare.sh: java.util.concurrent.Semaphore (the JDK's, default-jdk-headless), the
// Java semaphore admit::semaphore is measured against. The cases mirror bench/semaphore_bench.cpp.
//
// JMH is not packaged in Debian 12, so this is a plain harness like GuavaRateLimiterBench: per case, calibration and
// warm-up rounds (the JIT compiles the loop), then timed rounds of a fixed number of operations; the median ns/op of
// the timed rounds is printed.
//
//   javac -d OUT SemaphoreBench.java
//   java -cp OUT SemaphoreBench [rounds] [round-millis] [handoff-rounds] [uncontended]
//
// With a fourth argument "uncontended", only the uncontended case runs (bench/compare.sh interleaves it with the other
// implementations' to compare them at one load).
// Output, one line per case:
//   uncontended 1 <median ns/op>      new Semaphore(1): tryAcquire() then release() on one thread; every tryAcquire
//                                     must succeed (tryAcquire() barges on a fair semaphore too: the same code path)
//   contended-nonfair 2 <median ns/op> <parallelism>   two threads loop acquire() then release() on new Semaphore(1),
//                                     the default; ns/op is the wall time of the round divided by the operations of
//                                     both threads; parallelism is their CPU time over the wall time (2.0: both ran
//                                     all the time)
//   contended-fair 2 <median ns/op> <parallelism>      the same on new Semaphore(1, true) (FIFO, as admit and tokio)
//   handoff-nonfair <p50> <p90> <p99> <max> <mean>   hand-off latency in ns, see handoff()
//   handoff-fair <p50> <p90> <p99> <max> <mean>
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.Arrays;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

public final class SemaphoreBench {
  private SemaphoreBench() {}

  private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();
  /** CPU time the threads of the contended rounds spent in their loops, summed over the timed rounds. */
  private static final AtomicLong cpuNanos = new AtomicLong();

  private interface Round {
    /** Runs `calls` operations (per thread); returns the wall time in ns. */
    long run(long calls) throws Exception;
  }

  private static long uncontended(Semaphore s, long calls) {
    long failed = 0;
    long t0 = System.nanoTime();
    for (long i = 0; i < calls; i++) {
      if (s.tryAcquire()) {
        s.release();
      } else {
        failed++;
      }
    }
    long elapsed = System.nanoTime() - t0;
    if (failed != 0) throw new IllegalStateException(failed + " tryAcquire() calls failed");
    return elapsed;
  }

  private static long contended(Semaphore s, int threads, long calls) throws Exception {
    final CyclicBarrier start = new CyclicBarrier(threads + 1);
    final CyclicBarrier stop = new CyclicBarrier(threads + 1);
    Thread[] workers = new Thread[threads];
    for (int t = 0; t < threads; t++) {
      workers[t] = new Thread(() -> {
        try {
          start.await();
          long cpu0 = THREADS.getCurrentThreadCpuTime();
          for (long i = 0; i < calls; i++) {
            s.acquire();
            s.release();
          }
          cpuNanos.addAndGet(THREADS.getCurrentThreadCpuTime() - cpu0);
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
    return elapsed;
  }

  private static void measure(String name, int threads, Round round, int rounds, long roundMillis) throws Exception {
    // Calibrate: grow the call count until one round lasts ~roundMillis (this also warms the JIT up).
    long calls = 1000;
    while (true) {
      long ns = round.run(calls);
      if (ns >= roundMillis * 1_000_000L / 4) {
        calls = Math.max(1, (long) (calls * (roundMillis * 1e6 / ns)));
        break;
      }
      calls *= 4;
    }
    for (int i = 0; i < 3; i++) round.run(calls); // warm-up rounds
    double[] perOp = new double[rounds];
    long wall = 0;
    cpuNanos.set(0);
    for (int i = 0; i < rounds; i++) {
      long ns = round.run(calls);
      wall += ns;
      perOp[i] = (double) ns / ((double) calls * threads);
    }
    Arrays.sort(perOp);
    double median = rounds % 2 == 1 ? perOp[rounds / 2] : (perOp[rounds / 2 - 1] + perOp[rounds / 2]) / 2;
    if (threads > 1) {
      // Parallelism: the loop threads' CPU time over the wall time (2.0: both ran all the time; 1.0: they took turns).
      System.out.printf("%s %d %.2f %.2f%n", name, threads, median, (double) cpuNanos.get() / wall);
    } else {
      System.out.printf("%s %d %.2f%n", name, threads, median);
    }
    System.out.flush();
  }

  // Hand-off latency: a waiter thread blocks in acquire(); once it is parked (hasQueuedThreads(), then 200 us), this
  // thread reads System.nanoTime() and calls release(); the waiter reads System.nanoTime() as soon as acquire()
  // returns, gives the permit back and reports. Both threads block (LockSupport.park) on the signals around the timed
  // part, as the C++ and Go harnesses do: a releaser that spun instead would keep its core busy and push the waiter's
  // wake-up onto the other, idle, core.
  private static volatile long go;
  private static volatile long done;
  private static volatile long releasedAt;

  private static void handoff(String name, boolean fair, int rounds) throws Exception {
    final Semaphore s = new Semaphore(1, fair);
    final long[] latency = new long[rounds];
    final AtomicLong failed = new AtomicLong();
    go = 0;
    done = 0;
    final Thread main = Thread.currentThread();
    Thread waiter = new Thread(() -> {
      for (long round = 1; round <= rounds; round++) {
        while (go < round) LockSupport.park();
        try {
          s.acquire();
        } catch (InterruptedException e) {
          failed.incrementAndGet();
        }
        long woke = System.nanoTime();
        latency[(int) round - 1] = woke - releasedAt;
        s.release();
        done = round;
        LockSupport.unpark(main);
      }
    });
    waiter.start();
    for (long round = 1; round <= rounds; round++) {
      if (!s.tryAcquire()) failed.incrementAndGet();
      go = round;
      LockSupport.unpark(waiter);
      while (!s.hasQueuedThreads()) Thread.onSpinWait();
      LockSupport.parkNanos(200_000);
      releasedAt = System.nanoTime();
      s.release();
      while (done < round) LockSupport.park();
    }
    waiter.join();
    if (failed.get() != 0) throw new IllegalStateException("a hand-off round did not get its permit");
    // The first rounds run in the interpreter: drop a tenth of them as warm-up.
    long[] timed = Arrays.copyOfRange(latency, rounds / 10, rounds);
    Arrays.sort(timed);
    double sum = 0;
    for (long v : timed) sum += v;
    System.out.printf("%s %d %d %d %d %.0f%n", name, pct(timed, 0.50), pct(timed, 0.90), pct(timed, 0.99),
        pct(timed, 1.0), sum / timed.length);
    System.out.flush();
  }

  private static long pct(long[] sorted, double p) {
    return sorted[(int) (p * (sorted.length - 1) + 0.5)];
  }

  public static void main(String[] args) throws Exception {
    int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 7;
    long roundMillis = args.length > 1 ? Long.parseLong(args[1]) : 200;
    int handoffRounds = args.length > 2 ? Integer.parseInt(args[2]) : 2000;
    final Semaphore single = new Semaphore(1);
    measure("uncontended", 1, calls -> uncontended(single, calls), rounds, roundMillis);
    if (args.length > 3 && args[3].equals("uncontended")) return;
    final Semaphore nonfair = new Semaphore(1);
    measure("contended-nonfair", 2, calls -> contended(nonfair, 2, calls), rounds, roundMillis);
    final Semaphore fair = new Semaphore(1, true);
    measure("contended-fair", 2, calls -> contended(fair, 2, calls), rounds, roundMillis);
    handoff("handoff-nonfair", false, handoffRounds + handoffRounds / 9);
    handoff("handoff-fair", true, handoffRounds + handoffRounds / 9);
  }
}
