// main() for the Google Benchmark programs whose cases take a std::mutex on the measured path: it starts and joins
// one thread before the first case, so that every case runs in a threaded process, as a service is. glibc's mutex
// skips the lock prefix of its atomic instructions in a process that has never started a thread: a std::mutex lock
// and unlock took 6.2 ns there against 17.8 ns once a thread had run (same machine), so a single-threaded case run
// alone (a filter, or ahead of the cases with threads) would otherwise be measured cheaper than it is in use.
#include <benchmark/benchmark.h>

#include <thread>

int main(int argc, char** argv) {
  std::thread([] {}).join();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
