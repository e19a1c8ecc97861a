// Package tests holds modelgate's end-to-end tests: they build the real binary, start it
// against a simulated platform on loopback, and drive it with real clients.
package tests

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"modelgate/apitest"
	"modelgate/platformsim"
)

// binPath is the modelgate binary built once for the whole package.
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "modelgate-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "modelgate")
	// The tags the Dockerfile builds with, so these tests run the code that ships.
	args := []string{"build", "-tags", "nomsgpack", "-o", binPath}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "..")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building modelgate:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// noteSources looks at every Go source and module file of the module. The binary is built
// by a separate go command, which go test's result cache cannot see; files the test process
// itself looks at while tests run (not in TestMain, before go test listens) are part of the
// cache key, so a change anywhere in the product makes the next go test ./tests run again
// instead of reporting an old pass.
var notedSources sync.Once

func noteSources(root string) {
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil
		case d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root:
			return filepath.SkipDir
		case !d.IsDir() && (strings.HasSuffix(path, ".go") || d.Name() == "go.mod" || d.Name() == "go.sum"):
			_, _ = os.Stat(path)
		}
		return nil
	})
}

// platform is a simulated platform served on loopback for one test.
type platform struct {
	Sim *platformsim.Sim
	URL string
	Key string // the platform key it accepts: a canary that must never leak
}

func startPlatform(t testing.TB) *platform {
	t.Helper()
	key := canary(t)
	sim := platformsim.New(platformsim.Options{APIKeys: []string{key}})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return &platform{Sim: sim, URL: srv.URL, Key: key}
}

// canary is a fresh platform key that must never leak.
func canary(t testing.TB) string { return apitest.Canary(t) }

// gateway is one running modelgate process.
type gateway struct {
	cmd        *exec.Cmd
	URL        string // http://127.0.0.1:port
	ConfigPath string
	Output     *apitest.SyncBuffer // everything the process printed (logs)
	exited     chan struct{}
	exitErr    error
}

// gatewayOptions start a modelgate process.
type gatewayOptions struct {
	ConfigYAML string            // written to a temp file and passed with --config
	Env        map[string]string // extra environment (secrets for ${VAR}s)
	Args       []string          // extra flags
}

func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startGateway runs the modelgate binary and waits until /healthz answers.
func startGateway(t testing.TB, o gatewayOptions) *gateway {
	t.Helper()
	notedSources.Do(func() { noteSources("..") })
	waitPastMidnight(t, time.Minute)
	addr := freePort(t)
	g := &gateway{URL: "http://" + addr, Output: &apitest.SyncBuffer{}, exited: make(chan struct{})}
	args := []string{"--listen", addr}
	if o.ConfigYAML != "" {
		g.ConfigPath = apitest.TempFile(t, "config.yaml", []byte(o.ConfigYAML))
		args = append(args, "--config", g.ConfigPath)
	}
	args = append(args, o.Args...)
	g.cmd = exec.Command(binPath, args...)
	g.cmd.Dir = t.TempDir() // no stray config.yaml; data files land in the temp dir
	g.cmd.Env = append(os.Environ(), "GORACE=halt_on_error=1")
	for k, v := range o.Env {
		g.cmd.Env = append(g.cmd.Env, k+"="+v)
	}
	g.cmd.Stdout, g.cmd.Stderr = g.Output, g.Output
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		g.exitErr = g.cmd.Wait()
		close(g.exited)
	}()
	t.Cleanup(func() {
		_ = g.cmd.Process.Signal(syscall.SIGKILL)
		<-g.exited
		if t.Failed() {
			t.Logf("modelgate output:\n%s", g.Output.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-g.exited:
			t.Fatalf("modelgate exited early: %v\n%s", g.exitErr, g.Output.String())
		default:
		}
		resp, err := http.Get(g.URL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return g
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("modelgate did not become healthy\n%s", g.Output.String())
	return nil
}

// Signal sends sig to the process.
func (g *gateway) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := g.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// Wait waits for the process to exit and returns its exit code.
func (g *gateway) Wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-g.exited:
	case <-time.After(timeout):
		t.Fatalf("modelgate did not exit within %v", timeout)
	}
	if g.exitErr == nil {
		return 0
	}
	if ee, ok := g.exitErr.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	t.Fatalf("wait: %v", g.exitErr)
	return -1
}

// assertNoSecret fails if secret appears in the process output.
func (g *gateway) assertNoSecret(t testing.TB, secret string) {
	t.Helper()
	if strings.Contains(g.Output.String(), secret) {
		t.Errorf("a secret appeared in modelgate's output")
	}
}

// keysConfig is a keys-mode config whose upstream is p; teams alpha and beta.
func keysConfig(p *platform, extra string) string {
	return gatewayYAML{
		models: chatAlias + `  - id: sim-chat
  - id: sim-tools
  - id: sim-json
  - id: sim-long
  - id: sim-slow
  - id: sim-reasoning
  - id: sim-failed
  - id: sim-incomplete
  - id: sim-refusal
  - id: sim-error-event
`,
		teams: `  - name: alpha
    keys:
      - name: alpha-1
        key: ${ALPHA_KEY}
      - name: alpha-2
        key: ${ALPHA2_KEY}
  - name: beta
    models: [sim-chat]
    keys:
      - name: beta-1
        key: ${BETA_KEY}
`,
		more: adminKeys + extra,
	}.render(p)
}

// startKeysGateway starts a simulated platform and a modelgate in front of it, configured
// by keysConfig(p, extra) with keysEnv's keys: the setup most end-to-end tests share.
func startKeysGateway(t *testing.T, extra string) (*platform, *gateway) {
	t.Helper()
	p := startPlatform(t)
	return p, startGateway(t, gatewayOptions{ConfigYAML: keysConfig(p, extra), Env: keysEnv(p)})
}

// Keys used with keysConfig.
const (
	alphaKey  = "mg-e2e-alpha"
	alpha2Key = "mg-e2e-alpha-2" // a second key of team alpha
	betaKey   = "mg-e2e-beta"
	adminKey  = "mg-e2e-admin"
)

func keysEnv(p *platform) map[string]string {
	return map[string]string{"PLATFORM_API_KEY": p.Key, "ALPHA_KEY": alphaKey, "ALPHA2_KEY": alpha2Key, "BETA_KEY": betaKey, "ADMIN_KEY": adminKey}
}

// ctx returns a context bounded for one test step.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// waitPastMidnight waits for the next UTC day when less than margin of this one is left.
// The binary's budgets and usage keep real UTC days (its clock cannot be moved from the
// outside), and tests read a day's totals back: one that straddled midnight would find them
// split between two days. Time that must pass, not a condition: at most margin, once a day.
func waitPastMidnight(t testing.TB, margin time.Duration) {
	t.Helper()
	now := time.Now().UTC()
	midnight := now.Truncate(24 * time.Hour).Add(24 * time.Hour)
	if left := midnight.Sub(now); left < margin {
		t.Logf("waiting %v for the UTC day to turn", left.Round(time.Millisecond))
		time.Sleep(left + 100*time.Millisecond)
	}
}
