package main

import (
	"errors"
	"math"
	"testing"
)

// TestPairedRatios checks that a process's own speed cancels out of each two rounds in
// which the processes held opposite sides, and that an odd last round is left out.
func TestPairedRatios(t *testing.T) {
	const cost, fast = 0.98, 1.07 // what the setting costs; how much faster one process is
	cases := []struct {
		name string
		in   []float64
		want []float64
	}{
		{"none", nil, []float64{}},
		{"one round", []float64{cost * fast}, []float64{}},
		{"swapped", []float64{cost * fast, cost / fast, cost * fast, cost / fast}, []float64{cost, cost}},
		{"odd last round left out", []float64{cost * fast, cost / fast, 0.5}, []float64{cost}},
		{"no process effect", []float64{0.9, 1.0}, []float64{math.Sqrt(0.9)}},
	}
	for _, c := range cases {
		got := pairedRatios(c.in)
		if len(got) != len(c.want) {
			t.Errorf("%s: pairedRatios(%v) = %v; want %v", c.name, c.in, got, c.want)
			continue
		}
		for i := range got {
			if math.Abs(got[i]-c.want[i]) > 1e-12 {
				t.Errorf("%s: pairedRatios(%v) = %v; want %v", c.name, c.in, got, c.want)
			}
		}
	}
}

func TestRetryFailed(t *testing.T) {
	failed := &failedRun{name: "floor", path: "/v1/responses", res: wrkResult{requests: 7935, sockErrs: 10}}
	other := errors.New("wrk did not start")
	good := run1{res: wrkResult{requests: 9000}}
	cases := []struct {
		name      string
		results   []error // what each measurement returns, in order; nil is a good run
		wantErr   error
		wantCalls int
	}{
		{"good at once", []error{nil}, nil, 1},
		{"failed then good", []error{failed, nil}, nil, 2},
		{"failed every time", []error{failed, failed, failed, nil}, failed, 1 + failedTries},
		{"another error is not retried", []error{other, nil}, other, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			calls, notes := 0, 0
			r, err := retryFailed(func() (run1, error) {
				e := c.results[calls]
				calls++
				if e != nil {
					return run1{}, e
				}
				return good, nil
			}, func(*failedRun) { notes++ })
			if err != c.wantErr || calls != c.wantCalls || notes != min(calls-1, failedTries) {
				t.Fatalf("err %v, %d calls, %d notes; want %v, %d calls", err, calls, notes, c.wantErr, c.wantCalls)
			}
			if err == nil && r.res.requests != good.res.requests {
				t.Fatalf("kept %+v, want the good run", r)
			}
		})
	}
}
