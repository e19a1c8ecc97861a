package main

import (
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"sync"
	"time"
)

// uploadRSS posts a multipart asset of size bytes, generated as it is sent, and samples pid's
// RSS throughout. It returns the RSS before and the highest seen during the upload.
func uploadRSS(pid int, url, key string, size int64) (base, peak int64, err error) {
	runtimeSettle()
	if base, err = rssBytes(pid); err != nil {
		return 0, 0, err
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := writeForm(mw, size)
		pw.CloseWithError(err)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, pr)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+key)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	peak = base
	wg.Go(func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			if r, err := rssBytes(pid); err == nil && r > peak {
				peak = r
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	})
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("upload: status %d: %s", resp.StatusCode, body)
		}
	}
	close(stop)
	wg.Wait()
	return base, peak, err
}

func writeForm(mw *multipart.Writer, size int64) error {
	for _, f := range [][2]string{{"media_type", "file"}, {"purpose", "temp_input"}} {
		if err := mw.WriteField(f[0], f[1]); err != nil {
			return err
		}
	}
	fw, err := mw.CreateFormFile("file", "bench.bin")
	if err != nil {
		return err
	}
	chunk := make([]byte, 64<<10)
	for i := range chunk {
		chunk[i] = byte('a' + i%26)
	}
	for left := size; left > 0; {
		n := min(left, int64(len(chunk)))
		if _, err := fw.Write(chunk[:n]); err != nil {
			return err
		}
		left -= n
	}
	return mw.Close()
}
