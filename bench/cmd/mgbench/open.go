package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// openWave is how many streams may be opening at once (sent, first event not yet read): the
// listen backlog (somaxconn) is 4,096 here, and a burst of 10,000 connects overflows it.
const openWave = 500

// openDeadline is how long opening n streams may take: a fixed part for the processes to
// warm, and a part per stream, since the opens queue behind openWave.
func openDeadline(n int) time.Duration { return 30*time.Second + time.Duration(n)*10*time.Millisecond }

// heldStreams are streams the driver holds open until close.
type heldStreams struct {
	cancel        context.CancelFunc
	wg            sync.WaitGroup
	ready, failed atomic.Int64
	errMu         sync.Mutex
	firstErr      error
}

// openStreams opens n streams of t, at most openWave opening at once, and returns once every
// one has delivered its first event, or failed, or the deadline passed. Each held stream
// then reads and discards the rest, or, with stall, reads nothing more: a client that has
// stopped reading. It is an error unless all n opened; the streams stay held either way
// until close.
func openStreams(client *http.Client, t target, n int, stall bool) (*heldStreams, error) {
	ctx, cancel := context.WithCancel(context.Background())
	h := &heldStreams{cancel: cancel}
	sem := make(chan struct{}, openWave)
	go func() {
		for range n {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			h.wg.Go(func() { h.hold(ctx, client, t, sem, stall) })
		}
	}()
	deadline := time.Now().Add(openDeadline(n))
	for h.ready.Load()+h.failed.Load() < int64(n) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if r, f := h.ready.Load(), h.failed.Load(); r < int64(n) {
		err := fmt.Errorf("%s: only %d of %d streams opened in %s (%d failed)", t.name, r, n, openDeadline(n), f)
		if first := h.firstError(); first != nil {
			err = fmt.Errorf("%w; first failure: %v", err, first)
		}
		return h, err
	}
	return h, nil
}

// hold opens one stream, frees its opening slot at the first event, and keeps it open.
func (h *heldStreams) hold(ctx context.Context, client *http.Client, t target, sem chan struct{}, stall bool) {
	opened := false
	defer func() {
		if !opened {
			<-sem
		}
	}()
	resp, err := post(ctx, client, t)
	if err != nil {
		h.fail(err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		h.fail(fmt.Errorf("status %d: %s", resp.StatusCode, b))
		return
	}
	br := bufio.NewReader(resp.Body)
	if _, err := readEvent(br); err != nil {
		h.fail(err)
		return
	}
	opened = true
	<-sem
	h.ready.Add(1)
	if stall {
		<-ctx.Done()
		return
	}
	_, _ = io.Copy(io.Discard, br) // hold the stream open until cancelled
}

func (h *heldStreams) fail(err error) {
	h.errMu.Lock()
	if h.firstErr == nil {
		h.firstErr = err
	}
	h.errMu.Unlock()
	h.failed.Add(1)
}

func (h *heldStreams) firstError() error {
	h.errMu.Lock()
	defer h.errMu.Unlock()
	return h.firstErr
}

// close ends every held stream and waits for their goroutines.
func (h *heldStreams) close() {
	h.cancel()
	h.wg.Wait()
}

// openStreamsRSS opens n streams through t, waits until each has delivered its first event,
// and returns the RSS of pid before and its peak while they are all open.
func openStreamsRSS(pid int, t target, n int) (base, peak int64, err error) {
	client := newClient(t, n)
	defer client.CloseIdleConnections()
	runtimeSettle()
	if base, err = rssBytes(pid); err != nil {
		return 0, 0, err
	}
	h, err := openStreams(client, t, n, false)
	defer h.close()
	if err != nil {
		return 0, 0, err
	}
	for range 10 {
		if r, err := rssBytes(pid); err == nil && r > peak {
			peak = r
		}
		time.Sleep(100 * time.Millisecond)
	}
	return base, peak, nil
}
