// Command spendkill is the load of bench/cmd/spendkill/run.sh: n chat calls with c workers,
// each naming an end user of its own, so the spend ledger holds n end users' totals (issue
// 41). It prints how many were answered 200.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:18080", "")
	n := flag.Int("n", 40000, "")
	c := flag.Int("c", 32, "")
	prefix := flag.String("prefix", "u", "")
	flag.Parse()
	var next, ok, bad atomic.Int64
	var wg sync.WaitGroup
	tr := &http.Transport{MaxIdleConnsPerHost: *c}
	cl := &http.Client{Transport: tr}
	start := time.Now()
	for range *c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(*n) {
					return
				}
				body := fmt.Sprintf(`{"model":"gpt-4o-mini","max_tokens":16,"user":"%s%06d","messages":[{"role":"user","content":"hi"}]}`, *prefix, i)
				req, _ := http.NewRequest("POST", *url+"/v1/chat/completions", bytes.NewReader([]byte(body)))
				req.Header.Set("Authorization", "Bearer sim-SEARCH_APP_KEY")
				req.Header.Set("Content-Type", "application/json")
				resp, err := cl.Do(req)
				if err != nil {
					bad.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					ok.Add(1)
				} else {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	fmt.Fprintf(os.Stderr, "%d ok, %d failed in %v\n", ok.Load(), bad.Load(), time.Since(start))
}
