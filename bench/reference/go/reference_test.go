// Reference benchmarks for bench/compare.sh: golang.org/x/time/rate and github.com/juju/ratelimit, the Go limiters
// admit is measured against, built offline from Debian's packages (golang-golang-x-time-dev,
// golang-github-juju-ratelimit-dev) in GOPATH mode:
//
//	cd bench/reference/go && GO111MODULE=off GOPATH=/usr/share/gocode go test -run '^$' -bench . -benchtime 1s
//
// The cases mirror bench/rate_limiters_bench.cpp:
//   - admit path: a finite, huge rate (1e9/s) and a huge burst (1e12), so that every call is admitted;
//   - reject path: one token per hour, burst 1, the token spent before timing, so that every call is refused;
//   - "at": the time is supplied by the caller (x/time/rate AllowN(t, 1); juju through a Clock that returns a fixed
//     time, the only way its API takes a caller's time); "now": the limiter reads the clock (Allow(), TakeAvailable(1));
//   - g=1: one goroutine, a plain loop; g=2 and g=8: b.RunParallel with GOMAXPROCS set to g and parallelism 1, so
//     g OS threads hammer one limiter, as Google Benchmark's ->Threads(g) does. ns/op is then wall time divided by
//     the operations of all goroutines, as Google Benchmark reports with UseRealTime().
//
// Every benchmark checks that each call got the expected answer and fails otherwise, so that a misconfigured case
// cannot time the wrong path.
package reference

import (
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/juju/ratelimit"
	"golang.org/x/time/rate"
)

const (
	hugeRate  = 1e9  // tokens per second on the admit path
	hugeBurst = 1e12 // tokens in the bucket on the admit path
)

// fixedClock is a juju ratelimit.Clock that always returns the same time: the caller supplies it.
type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time        { return c.t }
func (c fixedClock) Sleep(d time.Duration) {}

var goroutineCounts = []int{1, 2, 8}

// run times op on g goroutines; op returns whether the call was admitted, want is the expected answer.
func run(b *testing.B, g int, want bool, op func() bool) {
	b.Helper()
	var wrong atomic.Int64
	if g == 1 {
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if op() != want {
				wrong.Add(1)
			}
		}
	} else {
		prev := runtime.GOMAXPROCS(g)
		defer runtime.GOMAXPROCS(prev)
		b.SetParallelism(1)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			var local int64
			for pb.Next() {
				if op() != want {
					local++
				}
			}
			wrong.Add(local)
		})
	}
	b.StopTimer()
	if n := wrong.Load(); n != 0 {
		b.Fatalf("%d of %d calls did not return %v", n, b.N, want)
	}
}

func forEachG(b *testing.B, body func(b *testing.B, g int)) {
	for _, g := range goroutineCounts {
		g := g
		b.Run("g="+strconv.Itoa(g), func(b *testing.B) { body(b, g) })
	}
}

func xtimeAdmit() *rate.Limiter { return rate.NewLimiter(rate.Limit(hugeRate), int(hugeBurst)) }

func xtimeReject(now time.Time) *rate.Limiter {
	lim := rate.NewLimiter(rate.Every(time.Hour), 1)
	lim.AllowN(now, 1)
	return lim
}

func BenchmarkXTimeAllowNAtAdmit(b *testing.B) {
	forEachG(b, func(b *testing.B, g int) {
		lim, now := xtimeAdmit(), time.Now()
		run(b, g, true, func() bool { return lim.AllowN(now, 1) })
	})
}

func BenchmarkXTimeAllowNAtReject(b *testing.B) {
	forEachG(b, func(b *testing.B, g int) {
		now := time.Now()
		lim := xtimeReject(now)
		run(b, g, false, func() bool { return lim.AllowN(now, 1) })
	})
}

func BenchmarkXTimeAllowNowAdmit(b *testing.B) {
	forEachG(b, func(b *testing.B, g int) {
		lim := xtimeAdmit()
		run(b, g, true, lim.Allow)
	})
}

func BenchmarkXTimeAllowNowReject(b *testing.B) {
	forEachG(b, func(b *testing.B, g int) {
		lim := xtimeReject(time.Now())
		run(b, g, false, lim.Allow)
	})
}

func jujuAdmit(clock ratelimit.Clock) *ratelimit.Bucket {
	return ratelimit.NewBucketWithRateAndClock(hugeRate, int64(hugeBurst), clock)
}

func jujuReject(clock ratelimit.Clock) *ratelimit.Bucket {
	tb := ratelimit.NewBucketWithClock(time.Hour, 1, clock)
	tb.TakeAvailable(1)
	return tb
}

func BenchmarkJujuTakeAvailableAtAdmit(b *testing.B) {
	forEachG(b, func(b *testing.B, g int) {
		tb := jujuAdmit(fixedClock{time.Now()})
		run(b, g, true, func() bool { return tb.TakeAvailable(1) == 1 })
	})
}

func BenchmarkJujuTakeAvailableAtReject(b *testing.B) {
	forEachG(b, func(b *testing.B, g int) {
		tb := jujuReject(fixedClock{time.Now()})
		run(b, g, false, func() bool { return tb.TakeAvailable(1) == 1 })
	})
}

func BenchmarkJujuTakeAvailableNowAdmit(b *testing.B) {
	forEachG(b, func(b *testing.B, g int) {
		tb := jujuAdmit(nil)
		run(b, g, true, func() bool { return tb.TakeAvailable(1) == 1 })
	})
}

func BenchmarkJujuTakeAvailableNowReject(b *testing.B) {
	forEachG(b, func(b *testing.B, g int) {
		tb := jujuReject(nil)
		run(b, g, false, func() bool { return tb.TakeAvailable(1) == 1 })
	})
}

// BenchmarkTimeNow is the clock read both limiters pay in their "now" forms.
func BenchmarkTimeNow(b *testing.B) {
	var sink int64
	for i := 0; i < b.N; i++ {
		sink += time.Now().UnixNano()
	}
	if sink == 42 {
		b.Log(sink)
	}
}
