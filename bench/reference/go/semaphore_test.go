// Reference benchmarks for bench/compare.sh: golang.org/x/sync/semaphore (Debian's golang-golang-x-sync-dev), the Go
// semaphore admit::semaphore is measured against, built offline in GOPATH mode like reference_test.go:
//
//	cd bench/reference/go && GO111MODULE=off GOPATH=/usr/share/gocode go test -run '^$' -bench Semaphore
//
// The cases mirror bench/semaphore_bench.cpp (every semaphore has 1 permit):
//   - SemaphoreUncontended: one goroutine, TryAcquire(1) then Release(1); every TryAcquire must succeed.
//   - SemaphoreContended/g=2: b.RunParallel with GOMAXPROCS 2 and parallelism 1, two goroutines on two OS threads
//     loop Acquire(ctx, 1) then Release(1); ns/op is the wall time divided by the operations of both.
//   - SemaphoreHandoff: hand-off latency. A waiter goroutine blocks in Acquire; once it is parked (it announced itself,
//     then 200 us pass), the benchmark goroutine reads time.Now() and calls Release(1), then blocks until the waiter
//     reports; the waiter reads time.Now() as soon as Acquire returns. A fixed number of rounds, whatever b.N
//     (SEMAPHORE_HANDOFF_ROUNDS, default 2000: a round lasts a sleep, so b.N would stay small); reports p50-ns,
//     p90-ns, p99-ns and max-ns, and ns/op as the mean. GOMAXPROCS is left at its default (the number of CPUs); the runtime
//     readies the waiter on the releaser's P, so it runs once the releaser blocks (or another P steals it).
package reference

import (
	"context"
	"os"
	"runtime"
	"sort"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"
)

func BenchmarkSemaphoreUncontended(b *testing.B) {
	s := semaphore.NewWeighted(1)
	failed := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if !s.TryAcquire(1) {
			failed++
			continue
		}
		s.Release(1)
	}
	b.StopTimer()
	if failed != 0 {
		b.Fatalf("%d of %d TryAcquire calls failed", failed, b.N)
	}
}

func BenchmarkSemaphoreContended(b *testing.B) {
	b.Run("g=2", func(b *testing.B) {
		prev := runtime.GOMAXPROCS(2)
		defer runtime.GOMAXPROCS(prev)
		s := semaphore.NewWeighted(1)
		ctx := context.Background()
		b.SetParallelism(1)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := s.Acquire(ctx, 1); err != nil {
					panic(err)
				}
				s.Release(1)
			}
		})
	})
}

func BenchmarkSemaphoreHandoff(b *testing.B) {
	s := semaphore.NewWeighted(1)
	ctx := context.Background()
	start := make(chan struct{})
	armed := make(chan struct{})
	done := make(chan time.Time)
	var released time.Time // written before Release, read by the waiter after Acquire (ordered by the semaphore's mutex)
	go func() {
		for range start {
			armed <- struct{}{}
			if err := s.Acquire(ctx, 1); err != nil {
				panic(err)
			}
			woke := time.Now()
			s.Release(1)
			done <- woke
		}
	}()
	rounds := 2000
	if v, err := strconv.Atoi(os.Getenv("SEMAPHORE_HANDOFF_ROUNDS")); err == nil && v >= 10 {
		rounds = v
	}
	latency := make([]float64, 0, rounds)
	b.ResetTimer()
	for i := 0; i < rounds; i++ {
		if !s.TryAcquire(1) {
			b.Fatal("the waiter did not give the permit back")
		}
		start <- struct{}{}
		<-armed
		time.Sleep(200 * time.Microsecond)
		released = time.Now()
		s.Release(1)
		woke := <-done
		latency = append(latency, float64(woke.Sub(released).Nanoseconds()))
	}
	b.StopTimer()
	close(start)
	sort.Float64s(latency)
	pct := func(p float64) float64 { return latency[int(p*float64(len(latency)-1)+0.5)] }
	sum := 0.0
	for _, v := range latency {
		sum += v
	}
	b.ReportMetric(sum/float64(len(latency)), "ns/op")
	b.ReportMetric(pct(0.50), "p50-ns")
	b.ReportMetric(pct(0.90), "p90-ns")
	b.ReportMetric(pct(0.99), "p99-ns")
	b.ReportMetric(pct(1.0), "max-ns")
}
