package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/apitest"
	"modelgate/platform"
	"modelgate/platformsim"
	"modelgate/testclock"
)

const simKey = "sk-sidecar-test-key"

// fakeKeys lends simKey under a fingerprint and notes what the routes asked of it.
type fakeKeys struct {
	mu      sync.Mutex
	pc      *platform.Client
	prefers []string
	leases  int
	done    []int // status of each ended lease (0: transport error)
}

func (k *fakeKeys) Send(ctx context.Context, prefer string, build func(ctx context.Context, key string) (*http.Request, error)) (*http.Response, error) {
	k.mu.Lock()
	k.prefers = append(k.prefers, prefer)
	k.mu.Unlock()
	req, err := build(ctx, simKey)
	if err != nil {
		return nil, err
	}
	return k.pc.Do(req)
}

func (k *fakeKeys) Lease(ctx context.Context) (context.Context, Lease) {
	k.mu.Lock()
	k.leases++
	k.mu.Unlock()
	return ctx, fakeLease{k}
}

func (k *fakeKeys) Quoted(b []byte) bool { return bytes.Contains(b, []byte(simKey)) }

func (k *fakeKeys) Caller() string { return simKey }

type fakeLease struct{ k *fakeKeys }

func (fakeLease) Key() string         { return simKey }
func (fakeLease) Fingerprint() string { return "f1f2f3f4" }
func (l fakeLease) Done(resp *http.Response, err error) {
	l.k.mu.Lock()
	defer l.k.mu.Unlock()
	status := 0
	if err == nil {
		status = resp.StatusCode
	}
	l.k.done = append(l.k.done, status)
}

// routesEnv serves the routes on a gin engine whose gate hands every request a Call for
// the team named in the X-Team header, over one fake key in front of the simulator.
func routesEnv(t *testing.T) (*httptest.Server, *fakeKeys, *platformsim.Sim) {
	t.Helper()
	sim := platformsim.New(platformsim.Options{APIKeys: []string{simKey}})
	simSrv := httptest.NewServer(sim)
	t.Cleanup(simSrv.Close)
	t.Cleanup(sim.Close)
	pc, err := platform.New(simSrv.URL, simSrv.URL, http.DefaultTransport)
	if err != nil {
		t.Fatal(err)
	}
	keys := &fakeKeys{pc: pc}
	r := New(Deps{Platform: pc, Owners: MemoryOwners(testclock.New().Now)})
	e := gin.New()
	r.Register(e.Group("/api/open/v2", func(c *gin.Context) {
		WithCall(c, &Call{RequestID: "req_test", Team: c.GetHeader("X-Team"), Shared: true, Keys: keys,
			Settings: Settings{RequestTimeout: 10 * time.Second, MaxUploadBytes: 1 << 20}})
	}))
	front := httptest.NewServer(e)
	t.Cleanup(front.Close)
	return front, keys, sim
}

func send(t *testing.T, req *http.Request, team string) (int, []byte) {
	t.Helper()
	req.Header.Set("X-Team", team)
	status, _, b := apitest.Send(t, http.DefaultClient, req)
	return status, b
}

// TestRoutesLeaseAndOwner: an upload goes with one lent key, ended once with the platform's
// answer, and records the lease's key as the asset's; reading the asset back asks Keys for
// that key, and another team is told the asset does not exist without a call.
func TestRoutesLeaseAndOwner(t *testing.T) {
	front, keys, _ := routesEnv(t)
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", "a.bin")
	_, _ = fw.Write(bytes.Repeat([]byte("x"), 100))
	_ = mw.Close()
	req, _ := http.NewRequest("POST", front.URL+AssetsPath, &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	status, b := send(t, req, "alpha")
	var env struct {
		Code int `json:"code"`
		Data struct {
			AssetID string `json:"asset_id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &env); status != http.StatusOK || err != nil || env.Code != 0 || env.Data.AssetID == "" {
		t.Fatalf("upload: %d %s", status, b)
	}
	if keys.leases != 1 || len(keys.done) != 1 || keys.done[0] != http.StatusOK || len(keys.prefers) != 0 {
		t.Fatalf("upload used keys: %d leases, done %v, sends %v", keys.leases, keys.done, keys.prefers)
	}

	req, _ = http.NewRequest("GET", front.URL+AssetsPath+"/"+env.Data.AssetID, nil)
	if status, b := send(t, req, "beta"); status != http.StatusNotFound || string(b) != `{"code":1,"msg":"asset not found"}` || len(keys.prefers) != 0 {
		t.Fatalf("other team: %d %s, sends %v", status, b, keys.prefers)
	}
	req, _ = http.NewRequest("GET", front.URL+AssetsPath+"/"+env.Data.AssetID, nil)
	if status, b := send(t, req, "alpha"); status != http.StatusOK || len(keys.prefers) != 1 || keys.prefers[0] != "f1f2f3f4" {
		t.Fatalf("own team: %d %s, sends %v", status, b, keys.prefers)
	}
}
