package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// wrkResult is what one wrk run reported.
type wrkResult struct {
	requests int64
	rps      float64
	p50, p99 time.Duration
	non2xx   int64
	sockErrs int64 // connect, read, write and timeout errors
	raw      string
}

// luaScript makes wrk send body as a POST with the given bearer key and headers.
func luaScript(dir, name, key string, body []byte, headers map[string]string) (string, error) {
	var b strings.Builder
	b.WriteString("wrk.method = \"POST\"\n")
	fmt.Fprintf(&b, "wrk.body = %s\n", luaString(body))
	b.WriteString("wrk.headers[\"Content-Type\"] = \"application/json\"\n")
	if key != "" {
		fmt.Fprintf(&b, "wrk.headers[\"Authorization\"] = %s\n", luaString([]byte("Bearer "+key)))
	}
	for k, v := range headers {
		// The spaces matter: "[[[" would open a long string at the index bracket.
		fmt.Fprintf(&b, "wrk.headers[ %s ] = %s\n", luaString([]byte(k)), luaString([]byte(v)))
	}
	path := filepath.Join(dir, name+".lua")
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}

// luaString quotes s as a Lua long string, which needs no escaping.
func luaString(s []byte) string {
	eq := ""
	for bytes.Contains(s, []byte("]"+eq+"]")) {
		eq += "="
	}
	return "[" + eq + "[" + string(s) + "]" + eq + "]"
}

func runWrk(script, url string, threads, conns int, d time.Duration) (wrkResult, error) {
	cmd := exec.Command("wrk", "-t"+strconv.Itoa(threads), "-c"+strconv.Itoa(conns),
		"-d"+strconv.FormatFloat(d.Seconds(), 'f', -1, 64)+"s", "--latency", "-s", script, url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk: %v: %s", err, out)
	}
	return parseWrk(string(out))
}

var (
	reTotal   = regexp.MustCompile(`(\d+) requests in`)
	reRPS     = regexp.MustCompile(`Requests/sec:\s+([\d.]+)`)
	reNon2xx  = regexp.MustCompile(`Non-2xx or 3xx responses:\s+(\d+)`)
	reSockErr = regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
	rePct     = regexp.MustCompile(`(?m)^\s+(50|99)(?:\.000)?%\s+([\d.]+)(us|ms|s)\s*$`)
)

// parseWrk reads wrk's text report (run with --latency).
func parseWrk(out string) (wrkResult, error) {
	r := wrkResult{raw: out}
	m := reTotal.FindStringSubmatch(out)
	m2 := reRPS.FindStringSubmatch(out)
	if m == nil || m2 == nil {
		return r, fmt.Errorf("unexpected wrk output: %s", out)
	}
	r.requests, _ = strconv.ParseInt(m[1], 10, 64)
	r.rps, _ = strconv.ParseFloat(m2[1], 64)
	if m := reNon2xx.FindStringSubmatch(out); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		r.non2xx = n
	}
	if m := reSockErr.FindStringSubmatch(out); m != nil {
		for _, s := range m[1:] {
			n, _ := strconv.ParseInt(s, 10, 64)
			r.sockErrs += n
		}
	}
	for _, m := range rePct.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[m[3]]
		d := time.Duration(v * float64(unit))
		if m[1] == "50" {
			r.p50 = d
		} else {
			r.p99 = d
		}
	}
	return r, nil
}
