//go:build pprof

package main

// Built only with -tags pprof (for example MGBENCH_TAGS=pprof bash bench/run.sh): serves
// net/http/pprof on MODELGATE_PPROF_ADDR, a loopback address, so a benchmark run can be
// profiled. Release builds carry none of it.

import (
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
)

func init() {
	addr := os.Getenv("MODELGATE_PPROF_ADDR")
	if addr == "" {
		return
	}
	if host, _, err := net.SplitHostPort(addr); err != nil || !net.ParseIP(host).IsLoopback() {
		slog.Error("MODELGATE_PPROF_ADDR must be a loopback host:port", slog.String("addr", addr))
		return
	}
	go func() {
		if err := http.ListenAndServe(addr, nil); err != nil {
			slog.Error("pprof listener stopped", slog.String("error", err.Error()))
		}
	}()
}
