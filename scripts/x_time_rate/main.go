// Prints what golang.org/x/time/rate answers in the scenarios of tests/token_bucket_x_time_rate_test.cpp, whose
// expected values come from this program's output (run against x/time/rate 0.3.0; the tests do not need Go):
//
//   GO111MODULE=off GOPATH=/usr/share/gocode go run scripts/x_time_rate/main.go   # Debian: golang-golang-x-time-dev
//
// Scenario names (A, B1..B4) are those of the test file.
package main

import (
	"fmt"
	"time"

	"golang.org/x/time/rate"
)

func main() {
	t0 := time.Unix(1000000, 0)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

	// (a) n == 0 while in debt
	{
		l := rate.NewLimiter(10, 5)
		r1 := l.ReserveN(t0, 5)
		r2 := l.ReserveN(t0, 3) // debt of 3 tokens: 300 ms
		fmt.Println("A r1", r1.OK(), ms(r1.DelayFrom(t0)), "r2", r2.OK(), ms(r2.DelayFrom(t0)))
		fmt.Println("A AllowN(t0,0)", l.AllowN(t0, 0), "tokens", l.TokensAt(t0))
		fmt.Println("A AllowN(t0+299ms,0)", l.AllowN(t0.Add(299*time.Millisecond), 0))
		r0 := l.ReserveN(t0.Add(100*time.Millisecond), 0)
		fmt.Println("A ReserveN(t0+100ms,0)", r0.OK(), ms(r0.DelayFrom(t0.Add(100*time.Millisecond))))
		fmt.Println("A AllowN(t0+300ms,0)", l.AllowN(t0.Add(300*time.Millisecond), 0))
		fmt.Println("A tokens at 300ms", l.TokensAt(t0.Add(300*time.Millisecond)))
	}
	// (b1) a reservation after a rate increase, cancelled; then the earlier one cancelled
	{
		l := rate.NewLimiter(10, 5)
		l.ReserveN(t0, 5)
		r2 := l.ReserveN(t0, 5)
		l.SetLimitAt(t0, 20)
		r3 := l.ReserveN(t0, 2)
		fmt.Println("B1 r2 delay", ms(r2.DelayFrom(t0)), "r3 delay", ms(r3.DelayFrom(t0)), "tokens", l.TokensAt(t0))
		r3.CancelAt(t0)
		fmt.Println("B1 after cancel r3 tokens", l.TokensAt(t0))
		r4 := l.ReserveN(t0, 1)
		fmt.Println("B1 r4 delay", ms(r4.DelayFrom(t0)))
		r4.CancelAt(t0)
		fmt.Println("B1 after cancel r4 tokens", l.TokensAt(t0))
		r2.CancelAt(t0)
		fmt.Println("B1 after cancel r2 tokens", l.TokensAt(t0))
	}
	// (b2) a reservation after a burst change, cancelled
	{
		l := rate.NewLimiter(10, 5)
		l.ReserveN(t0, 5)
		l.ReserveN(t0, 3)
		l.SetBurstAt(t0.Add(100*time.Millisecond), 2)
		r3 := l.ReserveN(t0.Add(100*time.Millisecond), 2)
		fmt.Println("B2 r3 delay", ms(r3.DelayFrom(t0.Add(100*time.Millisecond))), "tokens", l.TokensAt(t0.Add(100*time.Millisecond)))
		r3.CancelAt(t0.Add(100 * time.Millisecond))
		fmt.Println("B2 after cancel r3 tokens", l.TokensAt(t0.Add(100*time.Millisecond)))
	}
	// (b3) a cancel that is not the last, then a new reservation (acts earlier than the last event), cancelled
	{
		l := rate.NewLimiter(10, 5)
		l.ReserveN(t0, 5)
		r2 := l.ReserveN(t0, 4)
		r3 := l.ReserveN(t0, 2)
		r2.CancelAt(t0)
		fmt.Println("B3 after cancel r2 tokens", l.TokensAt(t0))
		r4 := l.ReserveN(t0, 1)
		fmt.Println("B3 r4 delay", ms(r4.DelayFrom(t0)))
		r4.CancelAt(t0)
		fmt.Println("B3 after cancel r4 tokens", l.TokensAt(t0))
		r3.CancelAt(t0)
		fmt.Println("B3 after cancel r3 tokens", l.TokensAt(t0))
	}
	// (b4) a rate decrease: the reservation made before it, cancelled with none after
	{
		l := rate.NewLimiter(10, 5)
		l.ReserveN(t0, 5)
		r2 := l.ReserveN(t0, 2)
		l.SetLimitAt(t0, 5)
		fmt.Println("B4 tokens", l.TokensAt(t0))
		r2.CancelAt(t0)
		fmt.Println("B4 after cancel r2 tokens", l.TokensAt(t0))
		r3 := l.ReserveN(t0, 1)
		fmt.Println("B4 r3 delay", ms(r3.DelayFrom(t0)))
	}
}
