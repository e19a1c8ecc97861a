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
	chat           bool          // the answer is a Chat Completions stream
	messages       bool          // the answer is an Anthropic Messages stream
	gemini         bool          // the answer is a Gemini SSE stream
	mode           *upstreamMode // set when url is the upstream itself: the driver speaks its mode
}

// newClient is a client for up to conns concurrent requests to t.
func newClient(t target, conns int) *http.Client {
	if t.mode != nil {
		return &http.Client{Transport: t.mode.directTransport(conns)}
	}
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, DisableCompression: true}}
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
	return staggeredDelays(t, k, 0)
}

// staggeredDelays is eventDelays with the k streams' starts spread evenly over spread, so
// their ticks do not all fall due at the same moment.
func staggeredDelays(t target, k int, spread time.Duration) ([]time.Duration, error) {
	client := newClient(t, k)
	defer client.CloseIdleConnections()
	var started atomic.Int64
	return gatherDelays(t.name, k, func() ([]time.Duration, error) {
		if spread > 0 {
			time.Sleep(spread * time.Duration(started.Add(1)-1) / time.Duration(k))
		}
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
	case t.gemini:
		marker = []byte(`"parts":[{"text":"T`)
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
