//go:build linux

package tests

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"modelgate/apitest"
)

// TestStoredResponsesDataPathFull: the binary's data_path on a small tmpfs, filled. Every
// stored response answered meanwhile stays readable (held in memory), the failures show in
// modelgate_store_write_failures_total{store="responses"} and /readyz says degraded (still
// 200); once the space is back, the held records are written: /readyz is no longer degraded,
// and after a restart every id is read from the disk.
func TestStoredResponsesDataPathFull(t *testing.T) {
	dir := apitest.SmallDisk(t, 8<<20)
	p := startPlatform(t)
	cfg := strings.Replace(keysConfig(p, ""), "data_path: data", "data_path: "+dir, 1)
	g := startGateway(t, gatewayOptions{ConfigYAML: cfg, Env: keysEnv(p)})
	client := sdkClient(g, alphaKey)
	first, err := client.Responses.New(ctx(t), storedParams("before the disk filled", ""))
	if err != nil {
		t.Fatal(err)
	}
	filler := apitest.FillDisk(t, dir)

	ids := []string{first.ID}
	for i := range 20 {
		r, err := client.Responses.New(ctx(t), storedParams(fmt.Sprintf("turn %d on a full disk", i), ids[len(ids)-1]))
		if err != nil {
			t.Fatalf("turn %d on a full disk: %v", i, err)
		}
		ids = append(ids, r.ID)
	}
	failures := func() float64 {
		return counterSum(scrape(t, g), "modelgate_store_write_failures_total", map[string]string{"store": "responses"})
	}
	deadline := time.Now().Add(20 * time.Second)
	for failures() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("modelgate_store_write_failures_total{store=\"responses\"} stayed 0 on a full disk")
		}
		time.Sleep(20 * time.Millisecond)
	}
	code, body := opsMust(t, http.MethodGet, g.URL+"/readyz", "", "")
	if code != 200 || !gjson.Get(body, "degraded").Bool() || !strings.Contains(gjson.Get(body, "reason").Str, "responses") {
		t.Errorf("/readyz on a full disk: %d %s", code, body)
	}
	for _, id := range ids {
		if _, err := client.Responses.Get(ctx(t), id, responses.ResponseGetParams{}); err != nil {
			t.Fatalf("GET %s on a full disk: %v", id, err)
		}
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		code, body = opsMust(t, http.MethodGet, g.URL+"/readyz", "", "")
		if code == 200 && !gjson.Get(body, "degraded").Exists() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz 30 s after the space returned: %d %s", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	g.Signal(t, syscall.SIGTERM)
	if code := g.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("modelgate exited with %d", code)
	}
	if out := g.Output.String(); strings.Contains(out, "lost with the process") {
		t.Errorf("records lost at shutdown: %s", out)
	}
	g = startGateway(t, gatewayOptions{ConfigYAML: cfg, Env: keysEnv(p)})
	client = sdkClient(g, alphaKey)
	for _, id := range ids {
		if _, err := client.Responses.Get(ctx(t), id, responses.ResponseGetParams{}); err != nil {
			t.Errorf("GET %s after the space returned and a restart: %v", id, err)
		}
	}
}
