package apitest

import (
	"syscall"
	"testing"
	"time"
)

// ProcessCPU is the CPU time (user and system) the whole process has used so far. It counts
// every goroutine's work, a background writer's or batcher's included, which wall time on a
// shared machine measures badly.
func ProcessCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// CPUPerOp starts counting the process's CPU; the function it returns reports what was spent
// since, per operation of b, as the benchmark's cpu-ns/op. The benchmarks call it where their
// measured work (and any work it left behind, such as a flush) is done.
func CPUPerOp(b *testing.B) (report func()) {
	b.Helper()
	start := ProcessCPU(b)
	return func() {
		b.ReportMetric(float64(ProcessCPU(b)-start)/float64(b.N), "cpu-ns/op")
	}
}
