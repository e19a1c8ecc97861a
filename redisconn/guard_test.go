package redisconn

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"modelgate/config"
	"modelgate/redisconn/redistest"
	"modelgate/testclock"
)

type replyErr struct{}

func (replyErr) Error() string { return "NOSCRIPT No matching script" }
func (replyErr) RedisError()   {}

func TestJudge(t *testing.T) {
	cases := []struct {
		err  error
		want outcome
	}{
		{nil, answered},
		{redis.Nil, answered},
		{replyErr{}, answered},
		{fmt.Errorf("wrapped: %w", replyErr{}), answered},
		{context.Canceled, unknown},
		{context.DeadlineExceeded, noAnswer},
		{redis.ErrPoolTimeout, noAnswer},
		{errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), noAnswer},
	}
	for _, tc := range cases {
		if got := judge(tc.err); got != tc.want {
			t.Errorf("judge(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

// TestGuardBreaker walks the breaker through its states with commands that fail or answer
// as the step says: open after OpenAfter unanswered commands in a row (an answer between
// them starts the count again), fail at once while open, one probe after ProbeAfter, closed
// by the probe's answer, reopened by its failure.
func TestGuardBreaker(t *testing.T) {
	clk := testclock.At(time.Unix(1_000_000, 0))
	g := NewGuard(clk.Now, nil)
	sent := 0
	run := func(err error) error {
		return g.do(context.Background(), func(context.Context) error { sent++; return err }, func(error) {})
	}
	type step struct {
		name     string
		advance  time.Duration
		err      error // what the store does when the command is sent
		wantSent bool
		wantOpen bool
	}
	var steps []step
	for i := 1; i < OpenAfter; i++ {
		steps = append(steps, step{fmt.Sprintf("no answer %d: still closed", i), 0, context.DeadlineExceeded, true, false})
	}
	steps = append(steps,
		step{"an answer starts the count again", 0, nil, true, false},
		step{"closed answers", 0, nil, true, false},
		step{"a missing key is an answer", 0, redis.Nil, true, false},
		step{"an error reply is an answer", 0, replyErr{}, true, false})
	for i := 1; i < OpenAfter; i++ {
		steps = append(steps, step{fmt.Sprintf("no answer %d", i), 0, context.DeadlineExceeded, true, false})
	}
	steps = append(steps, []step{
		{"the last no answer in a row opens", 0, context.DeadlineExceeded, true, true},
		{"open: not sent", 0, nil, false, true},
		{"still cooling down", ProbeAfter - time.Millisecond, nil, false, true},
		{"probe fails: open again", time.Millisecond, redis.ErrPoolTimeout, true, true},
		{"reopened: not sent", ProbeAfter / 2, nil, false, true},
		{"probe whose caller left: nothing learnt", ProbeAfter / 2, context.Canceled, true, true},
		{"the next command probes: answered, closed", 0, nil, true, false},
		{"closed again", 0, nil, true, false},
	}...)
	for _, st := range steps {
		clk.Advance(st.advance)
		before := sent
		err := run(st.err)
		if got := sent > before; got != st.wantSent {
			t.Fatalf("%s: sent = %v, want %v", st.name, got, st.wantSent)
		}
		if !st.wantSent && !errors.Is(err, ErrUnavailable) {
			t.Fatalf("%s: err = %v, want ErrUnavailable", st.name, err)
		}
		if g.Open() != st.wantOpen {
			t.Fatalf("%s: open = %v, want %v", st.name, g.Open(), st.wantOpen)
		}
	}
}

// TestGuardOneProbe: while the probe is out, every other command fails at once.
func TestGuardOneProbe(t *testing.T) {
	clk := testclock.At(time.Unix(1_000_000, 0))
	g := NewGuard(clk.Now, nil)
	for range OpenAfter {
		_ = g.do(context.Background(), func(context.Context) error { return context.DeadlineExceeded }, func(error) {})
	}
	if !g.Open() {
		t.Fatal("not open")
	}
	clk.Advance(ProbeAfter)
	inProbe, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		done <- g.do(context.Background(), func(context.Context) error {
			close(inProbe)
			<-release
			return nil
		}, func(error) {})
	}()
	<-inProbe
	for i := 0; i < 5; i++ {
		if err := g.do(context.Background(), func(context.Context) error { t.Error("a second probe was sent"); return nil }, func(error) {}); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("during the probe: err = %v", err)
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if g.Open() {
		t.Fatal("the probe's answer did not close the breaker")
	}
}

// TestBudgetSpentByUnansweredOnly: answered commands leave the budget whole; a command
// without an answer spends what it waited, and a spent budget sends nothing more.
func TestBudgetSpentByUnansweredOnly(t *testing.T) {
	g := NewGuard(nil, nil)
	ctx := WithBudget(context.Background(), 200*time.Millisecond)
	if inner := WithBudget(ctx, time.Hour); budgetOf(inner).left() != time.Hour || budgetOf(ctx).left() != 200*time.Millisecond {
		t.Fatal("a request inside another does not get a budget of its own")
	}
	for i := 0; i < 3; i++ {
		if err := g.do(ctx, func(context.Context) error { return nil }, func(error) {}); err != nil {
			t.Fatal(err)
		}
	}
	if left := budgetOf(ctx).left(); left != 200*time.Millisecond {
		t.Fatalf("answered commands spent the budget: %v left", left)
	}
	// The command is bounded by what is left: it waits for its context, which the budget
	// ends, and spends the wait.
	err := g.do(ctx, func(ctx context.Context) error {
		dl, ok := ctx.Deadline()
		if !ok || time.Until(dl) > 200*time.Millisecond {
			t.Errorf("command not bounded by the budget: deadline %v, %v", dl, ok)
		}
		<-ctx.Done()
		return ctx.Err()
	}, func(error) {})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if left := budgetOf(ctx).left(); left > 0 {
		t.Fatalf("%v left after a command that waited it out", left)
	}
	if g.Open() {
		t.Fatal("one command without an answer opened the breaker")
	}
	// The budget alone refuses, and KeepBudget carries it to a context of its own.
	kept := KeepBudget(context.Background(), ctx)
	if err := g.do(kept, func(context.Context) error { t.Error("sent on a spent budget"); return nil }, func(error) {}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("spent budget: err = %v", err)
	}
}

// TestGuardHungRedis stops a real redis-server with SIGSTOP: the first command of a request
// waits at most the request's budget and the rest of its commands fail at once; after
// OpenAfter such requests the breaker is open and every command of both clients sharing the
// guard fails at once; once the server runs again, the probe after ProbeAfter closes it.
func TestGuardHungRedis(t *testing.T) {
	srv := redistest.Start(t)
	clk := testclock.At(time.Unix(1_000_000, 0))
	g := NewGuard(clk.Now, nil)
	const timeout = 2 * time.Second // per command: the budget must cut it short
	rl := config.Ratelimit{Store: "redis://" + srv.Addr + "/0"}
	limiterSide, err := New(rl, timeout, g)
	if err != nil {
		t.Fatal(err)
	}
	defer limiterSide.Close()
	recordSide, err := New(rl, timeout, g)
	if err != nil {
		t.Fatal(err)
	}
	defer recordSide.Close()
	bg := context.Background()
	for _, c := range []*Client{limiterSide, recordSide} {
		if err := c.Set(bg, "k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}

	srv.Pause()
	const budget = 300 * time.Millisecond
	for i := range OpenAfter {
		if g.Open() {
			t.Fatalf("open after %d commands without an answer", i)
		}
		ctx := WithBudget(bg, budget)
		start := time.Now()
		first := limiterSide.Get(ctx, "k").Err()
		again := recordSide.Get(ctx, "k").Err() // the same request's next command
		took := time.Since(start)
		if first == nil || errors.Is(first, ErrUnavailable) || !errors.Is(again, ErrUnavailable) {
			t.Fatalf("request %d on the hung server: %v then %v, want a timeout then a refusal", i+1, first, again)
		}
		// The budget's deadline ends the wait; the slack is for a loaded machine's
		// scheduling, far below the 4 s the two commands' own timeouts would have taken.
		if took > budget+time.Second {
			t.Fatalf("request %d took %v, budget %v", i+1, took, budget)
		}
	}
	if !g.Open() {
		t.Fatalf("the breaker did not open after %d commands without an answer", OpenAfter)
	}
	for _, c := range []*Client{limiterSide, recordSide} {
		t0 := time.Now()
		err := c.Get(bg, "k").Err() // no budget: the breaker alone answers
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("while open: err = %v", err)
		}
		pipe := c.Pipeline()
		get := pipe.Get(bg, "k")
		if _, err := pipe.Exec(bg); !errors.Is(err, ErrUnavailable) || !errors.Is(get.Err(), ErrUnavailable) {
			t.Fatalf("pipeline while open: %v, %v", err, get.Err())
		}
		if d := time.Since(t0); d > 100*time.Millisecond {
			t.Fatalf("refusals while open took %v", d)
		}
	}

	srv.Resume()
	clk.Advance(ProbeAfter)
	// The limiter side's connection timed out and was dropped: the probe dials a new one,
	// whose handshake goes through the same hook and must not be refused as a second probe.
	if v, err := limiterSide.Get(bg, "k").Result(); err != nil || v != "v" {
		t.Fatalf("probe after the server resumed: %q, %v", v, err)
	}
	if g.Open() {
		t.Fatal("the probe's answer did not close the breaker")
	}
	if err := recordSide.Get(bg, "k").Err(); err != nil {
		t.Fatal(err)
	}
}
