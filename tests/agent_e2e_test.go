package tests

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// agentTimeout bounds one run of the agent; an answer from the simulated platform takes a
// second or two.
const agentTimeout = 90 * time.Second

// claudeCLI finds the Claude Code binary: MODELGATE_CLAUDE_CLI, or tests/agent's locked
// install, which MODELGATE_AGENT_E2E=1 creates with npm ci (about 400 MB, hence opt-in).
func claudeCLI(t *testing.T) string {
	t.Helper()
	// The npm package ships the native binary as an optional dependency per platform.
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	bin, dir, found := lockedInstall(t, "MODELGATE_CLAUDE_CLI", "agent",
		"node_modules", "@anthropic-ai", "claude-code-"+runtime.GOOS+"-"+arch, "claude")
	if found {
		return bin
	}
	if os.Getenv("MODELGATE_AGENT_E2E") != "1" {
		t.Skip("the Claude Code agent test is opt-in: set MODELGATE_AGENT_E2E=1 (installs tests/agent, about 400 MB) or MODELGATE_CLAUDE_CLI")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatal("MODELGATE_AGENT_E2E=1 needs npm to install tests/agent")
	}
	npmCI(t, npm, dir, 10*time.Minute)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no Claude Code binary for %s/%s after npm ci: %v", runtime.GOOS, runtime.GOARCH, err)
	}
	return bin
}

// lockedInstall finds a CLI a test drives: the path envVar names, or rel inside the test
// folder dir's locked npm install (dir made absolute, for npm ci) when it is there; found
// is false when neither is, and path is then where npm ci will put it.
func lockedInstall(t *testing.T, envVar, dir string, rel ...string) (path, abs string, found bool) {
	t.Helper()
	if p := os.Getenv(envVar); p != "" {
		return p, "", true
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(append([]string{abs}, rel...)...)
	_, err = os.Stat(path)
	return path, abs, err == nil
}

// runAgent runs one non-interactive agent turn against g and returns its JSON result.
func runAgent(t *testing.T, cli string, g *gateway, prompt string, args ...string) gjson.Result {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), agentTimeout)
	defer cancel()
	cmd := exec.CommandContext(c, cli, append([]string{"-p", prompt, "--output-format", "json"}, args...)...)
	home := t.TempDir()
	cmd.Dir = home
	// A clean environment: only what the agent needs to reach modelgate and nothing else.
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TERM=dumb",
		"ANTHROPIC_BASE_URL=" + g.URL, "ANTHROPIC_API_KEY=" + alphaKey,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1",
	}
	return runJSONResult(t, c, cmd, "the agent")
}

// runJSONResult runs cmd, one headless turn of a coding CLI bounded by c, and returns the
// JSON result it prints; what names the CLI in a failure, which shows both its outputs.
func runJSONResult(t *testing.T, c context.Context, cmd *exec.Cmd, what string) gjson.Result {
	t.Helper()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if c.Err() != nil {
		t.Fatalf("%s did not finish within %v:\n%s\n%s", what, agentTimeout, stdout.String(), stderr.String())
	}
	out := stdout.String()
	if i := strings.IndexByte(out, '{'); i >= 0 {
		out = out[i:] // warnings may precede the result
	}
	if err != nil || !json.Valid([]byte(out)) {
		t.Fatalf("%s failed (%v):\n%s\n%s", what, err, stdout.String(), stderr.String())
	}
	return gjson.Parse(out)
}

// TestClaudeCodeAgent drives a real Claude-style coding agent, installed from the npm
// registry, against modelgate and the simulated platform: a plain answer, then a turn where
// the agent runs a tool and sends its result back.
func TestClaudeCodeAgent(t *testing.T) {
	cli := claudeCLI(t)
	p := startPlatform(t)
	g := startGateway(t, gatewayOptions{ConfigYAML: messagesConfig(p), Env: messagesEnv(p)})

	res := runAgent(t, cli, g, "Say hello", "--model", "sim-chat")
	if res.Get("is_error").Bool() || !strings.HasPrefix(res.Get("result").Str, "Hello from sim-chat. You said:") {
		t.Fatalf("plain turn: %s", res.Raw)
	}

	mark := len(p.Sim.Requests())
	res = runAgent(t, cli, g, "Read the file", "--model", "sim-tools", "--tools", "Read")
	if res.Get("is_error").Bool() || res.Get("num_turns").Int() != 2 || !strings.Contains(res.Get("result").Str, "The tool returned:") {
		t.Fatalf("tool turn: %s", res.Raw)
	}
	calls := upstreamCalls(p, mark)
	if len(calls) != 2 {
		t.Fatalf("the platform saw %d generations, want 2", len(calls))
	}
	second := gjson.ParseBytes(calls[1].Body)
	if outs := findItems(second, func(it gjson.Result) bool { return it.Get("type").Str == "function_call_output" }); len(outs) != 1 {
		t.Errorf("the tool result did not reach the platform: %s", second.Get("input").Raw)
	}
	if !strings.Contains(g.Output.String(), "route=/v1/messages") || strings.Contains(g.Output.String(), "status=400") {
		t.Errorf("modelgate refused a request of the agent:\n%s", g.Output.String())
	}
	g.assertNoSecret(t, p.Key)
}
