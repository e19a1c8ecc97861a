package tests

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// Bounds for the node steps: a fresh npm ci downloads one package; the tests take seconds.
const (
	npmCITimeout    = 3 * time.Minute
	nodeTestTimeout = 90 * time.Second
)

// geminiRefusedMark is in the prompt of every call gemini.test.mjs expects refused.
const geminiRefusedMark = "gemini-refused-canary"

// TestNodeClient runs tests/node/*.test.mjs, written with the official npm clients (openai, @anthropic-ai/sdk, @google/genai), against
// the real binary. Only a missing node skips it: a broken install or a failing client is a failure.
func TestNodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH: the openai npm client tests (tests/node) did not run")
	}
	dir, err := filepath.Abs("node")
	if err != nil {
		t.Fatal(err)
	}
	ensureNodeModules(t, dir)
	files, err := filepath.Glob(filepath.Join(dir, "*.test.mjs"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no node tests found in %s (%v)", dir, err)
	}

	p := startPlatform(t)
	// keysConfig plus a team whose small daily budget one answer spends (messages.test.mjs).
	cfg := strings.Replace(keysConfig(p, ""), "admin_keys:", spentTeam+"admin_keys:", 1)
	env := keysEnv(p)
	env["SPENT_KEY"] = spentKey
	// JSON logs: checkNodeSockets reads the WebSocket turns' lines.
	g := startGateway(t, gatewayOptions{ConfigYAML: cfg, Env: env, Args: []string{"--log-format", "json"}})

	c, cancel := context.WithTimeout(context.Background(), nodeTestTimeout)
	defer cancel()
	// Files are listed explicitly: node's default discovery differs between versions.
	cmd := exec.CommandContext(c, node, append([]string{"--test", "--test-reporter=spec"}, files...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MODELGATE_URL="+g.URL, "MODELGATE_KEY="+alphaKey, "MODELGATE_KEY_ALPHA2="+alpha2Key, "MODELGATE_KEY_BETA="+betaKey, "MODELGATE_SPENT_KEY="+spentKey, "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if c.Err() != nil {
		t.Fatalf("node --test did not finish within %v:\n%s", nodeTestTimeout, out)
	}
	if err != nil {
		t.Fatalf("node --test failed (%v):\n%s", err, out)
	}
	t.Logf("node --test:\n%s", out)
	if n := len(upstreamCalls(p, 0)); n == 0 {
		t.Error("the node tests passed without reaching the platform")
	}
	if !sawConversation(p, "sim-chat", "node one", "node two", "node three") {
		t.Error("stored.test.mjs: the platform never received the third turn with both earlier ones")
	}
	// gemini.test.mjs marks the prompts of the calls modelgate must refuse (an unknown key, a
	// model outside the key's list): none may have reached the platform.
	for _, c := range upstreamCalls(p, 0) {
		if strings.Contains(string(c.Body), geminiRefusedMark) {
			t.Errorf("a refused Gemini call reached the platform: %.300s", c.Body)
		}
	}
	if !sawGeminiSignature(p) {
		t.Error("gemini.test.mjs: the chat's second turn reached the platform without the first turn's reasoning item (its thought signature)")
	}
	checkNodeSockets(t, p, g)
	checkNodeLanes(t, p, g)
	g.assertNoSecret(t, p.Key)
}

// sawGeminiSignature reports whether the platform received gemini.test.mjs's second chat turn
// with the reasoning item the first answer's thought signature carried back.
func sawGeminiSignature(p *platform) bool {
	for _, c := range upstreamCalls(p, 0) {
		body := gjson.ParseBytes(c.Body)
		users := findItems(body, isUserMessage)
		if len(users) == 0 || itemText(users[len(users)-1]) != "Second thought" {
			continue
		}
		reasoning := findItems(body, func(it gjson.Result) bool {
			return it.Get("type").Str == "reasoning" && it.Get("encrypted_content").Str != ""
		})
		return len(reasoning) == 1
	}
	return false
}

// ensureNodeModules installs the locked packages when one that package.json names is
// missing, so `go test ./...` works on a fresh clone (and on a checkout installed before a
// package was added).
func ensureNodeModules(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var manifest struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(b, &manifest); err != nil || len(manifest.Dependencies) == 0 {
		t.Fatalf("%s/package.json names no dependencies (%v)", dir, err)
	}
	missing := false
	for pkg := range manifest.Dependencies {
		_, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json"))
		if errors.Is(err, os.ErrNotExist) {
			missing = true
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if !missing {
		return
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("node is installed but npm is not, and %s/node_modules lacks a package: install npm or run `npm ci` there", dir)
	}
	npmCI(t, npm, dir, npmCITimeout)
}

// npmCI installs dir's locked node_modules with npm ci, failing t when that fails or takes
// longer than timeout.
func npmCI(t *testing.T, npm, dir string, timeout time.Duration) {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(c, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if c.Err() != nil {
		t.Fatalf("npm ci in %s did not finish within %v:\n%s", dir, timeout, out)
	}
	if err != nil {
		t.Fatalf("npm ci in %s failed (%v):\n%s", dir, err, out)
	}
}
