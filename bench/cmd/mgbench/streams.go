package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// target is one HTTP endpoint the driver calls itself (outside wrk).
type target struct {
	name, url, key string
	body           []byte
	chat           bool // the answer is a Chat Completions stream
	messages       bool // the answer is an Anthropic Messages stream
}

func post(ctx context.Context, client *http.Client, t target) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(t.body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if t.key != "" {
		req.Header.Set("Authorization", "Bearer "+t.key)
	}
	return client.Do(req)
}

// openStreamsRSS opens n streams through t, waits until each has delivered its first event,
// and returns the peak RSS of pid while they are all open.
func openStreamsRSS(pid int, t target, n int) (base, peak int64, err error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, DisableCompression: true}}
	defer client.CloseIdleConnections()
	runtimeSettle()
	if base, err = rssBytes(pid); err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ready, failed atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, err := post(ctx, client, t)
			if err != nil {
				failed.Add(1)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				failed.Add(1)
				return
			}
			br := bufio.NewReader(resp.Body)
			if _, err := readEvent(br); err != nil {
				failed.Add(1)
				return
			}
			ready.Add(1)
			_, _ = io.Copy(io.Discard, br) // hold the stream open until cancelled
		})
	}
	deadline := time.Now().Add(60 * time.Second)
	for ready.Load()+failed.Load() < int64(n) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if f := failed.Load(); f > 0 || ready.Load() < int64(n) {
		cancel()
		wg.Wait()
		return 0, 0, fmt.Errorf("%s: only %d of %d streams opened (%d failed)", t.name, ready.Load(), n, f)
	}
	for range 10 {
		if r, err := rssBytes(pid); err == nil && r > peak {
			peak = r
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	return base, peak, nil
}

// runtimeSettle gives a freshly started process a moment to finish its start-up allocations.
func runtimeSettle() { time.Sleep(300 * time.Millisecond) }

// readEvent reads one SSE event (up to its blank line) and returns its bytes.
func readEvent(br *bufio.Reader) ([]byte, error) {
	var ev []byte
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return nil, err
		}
		if len(line) == 1 || (len(line) == 2 && line[0] == '\r') {
			if len(ev) == 0 {
				continue
			}
			return ev, nil
		}
		ev = append(ev, line...)
	}
}

// eventDelays runs k concurrent bench-ticks streams through t and returns, for each delta,
// the time from the upstream's stamp to the event's arrival here.
func eventDelays(t target, k int) ([]time.Duration, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: k, DisableCompression: true}}
	defer client.CloseIdleConnections()
	return gatherDelays(t.name, k, func() ([]time.Duration, error) {
		resp, err := post(context.Background(), client, t)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			return nil, fmt.Errorf("%s: status %d: %s", t.name, resp.StatusCode, b)
		}
		br := bufio.NewReaderSize(resp.Body, 64<<10)
		var mine []time.Duration
		for {
			ev, err := readEvent(br)
			now := time.Now()
			if err != nil {
				return mine, nil
			}
			if stamp, ok := tickStamp(ev, t); ok {
				mine = append(mine, now.Sub(time.Unix(0, stamp)))
			}
		}
	})
}

// gatherDelays runs stream k times at once and returns every delay they measured, or the
// first error one of them met.
func gatherDelays(name string, k int, stream func() ([]time.Duration, error)) ([]time.Duration, error) {
	var mu sync.Mutex
	var all []time.Duration
	errs := make(chan error, k)
	var wg sync.WaitGroup
	for range k {
		wg.Go(func() {
			mine, err := stream()
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("%s: no stamped events arrived", name)
	}
	return all, nil
}

// tickStamp finds the "T<nanos>;" stamp of a delta event. Only deltas count: the Responses
// stream's closing events repeat the text.
func tickStamp(ev []byte, t target) (int64, bool) {
	marker := []byte(`"delta":"T`)
	switch {
	case t.chat:
		marker = []byte(`"content":"T`)
	case t.messages:
		marker = []byte(`"text_delta","text":"T`)
	case !bytes.Contains(ev, []byte("response.output_text.delta")):
		return 0, false
	}
	i := bytes.Index(ev, marker)
	if i < 0 {
		return 0, false
	}
	rest := ev[i+len(marker):]
	j := bytes.IndexByte(rest, ';')
	if j < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(rest[:j]), 10, 64)
	return n, err == nil
}
