package tests

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// geminiCLI finds the Gemini CLI's entry script: MODELGATE_GEMINI_CLI, or tests/gemini-cli's
// locked install (about 100 MB), which .ci/run creates with npm ci and MODELGATE_AGENT_E2E=1
// has the test create. Under CI a missing CLI is a failure: the test must not pass by not
// running.
func geminiCLI(t *testing.T) string {
	t.Helper()
	script, dir, found := lockedInstall(t, "MODELGATE_GEMINI_CLI", "gemini-cli",
		"node_modules", "@google", "gemini-cli", "bundle", "gemini.js")
	if found {
		return script
	}
	switch {
	case os.Getenv("MODELGATE_AGENT_E2E") == "1":
		npm, err := exec.LookPath("npm")
		if err != nil {
			t.Fatal("MODELGATE_AGENT_E2E=1 needs npm to install tests/gemini-cli")
		}
		npmCI(t, npm, dir, 10*time.Minute)
		if _, err := os.Stat(script); err != nil {
			t.Fatalf("no Gemini CLI after npm ci in %s: %v", dir, err)
		}
		return script
	case os.Getenv("CI") != "":
		t.Fatalf("the Gemini CLI is not installed (%s) and CI is set: run npm ci in tests/gemini-cli", script)
	}
	t.Skip("the Gemini CLI test needs tests/gemini-cli installed: npm ci there, or set MODELGATE_AGENT_E2E=1 or MODELGATE_GEMINI_CLI")
	return ""
}

// geminiSettings is the CLI's ~/.gemini/settings.json for a run against modelgate: the API
// key sign-in (without it a non-interactive run stops to ask how to sign in), no usage
// statistics, telemetry or update checks (nothing leaves the machine), and extra settings
// merged in (tools.core narrows the CLI's tools).
func geminiSettings(extra map[string]any) []byte {
	s := map[string]any{
		"security":  map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
		"privacy":   map[string]any{"usageStatisticsEnabled": false},
		"telemetry": map[string]any{"enabled": false},
		"general":   map[string]any{"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
	}
	for k, v := range extra {
		s[k] = v
	}
	b, _ := json.MarshalIndent(s, "", "  ")
	return b
}

// runGeminiCLI runs `gemini -p prompt --output-format json` in workspace, with a fresh HOME
// holding settings, against g, and returns its JSON result.
func runGeminiCLI(t *testing.T, node, cli string, g *gateway, workspace string, settings []byte, prompt string, args ...string) gjson.Result {
	t.Helper()
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), settings, 0o600); err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(context.Background(), agentTimeout)
	defer cancel()
	// --skip-trust: a headless run refuses an untrusted folder, and a temp dir is one.
	cmd := exec.CommandContext(c, node, append([]string{cli, "--skip-trust", "-p", prompt, "--output-format", "json"}, args...)...)
	cmd.Dir = workspace
	// A clean environment: only what the CLI needs to reach modelgate and nothing else.
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TERM=dumb", "NO_COLOR=1",
		"GOOGLE_GEMINI_BASE_URL=" + g.URL, "GEMINI_API_KEY=" + alphaKey,
	}
	return runJSONResult(t, c, cmd, "the Gemini CLI")
}

// TestGeminiCLI drives the Gemini CLI, installed from the npm registry, against the real
// binary and the simulated platform through GOOGLE_GEMINI_BASE_URL: a plain answer, then a
// turn where the model calls the CLI's read_file, the CLI reads the file and sends the
// functionResponse back, and the model answers with what it read.
func TestGeminiCLI(t *testing.T) {
	node := requireTool(t, "node")
	cli := geminiCLI(t)
	p := startPlatform(t)
	g := startGateway(t, gatewayOptions{ConfigYAML: keysConfig(p, ""), Env: keysEnv(p)})
	workspace := t.TempDir()

	mark := len(p.Sim.Requests())
	res := runGeminiCLI(t, node, cli, g, workspace, geminiSettings(nil), "Say hello", "-m", "sim-chat")
	if got := res.Get("response").Str; !strings.HasPrefix(got, "Hello from sim-chat. You said: ") || !strings.HasSuffix(got, " Say hello") {
		t.Fatalf("plain turn: %s", res.Raw)
	}
	plain := upstreamCalls(p, mark)
	if len(plain) != 1 {
		t.Fatalf("the plain turn made %d platform calls, want 1", len(plain))
	}
	// The CLI's request as translate/testdata/gemini/cli_request.json shows it: its long system
	// instruction, its own functions and a reasoning summary for its thoughts.
	sent := gjson.ParseBytes(plain[0].Body)
	if sys := sent.Get("input.0"); sys.Get("role").Str != "system" || len(itemText(sys)) < 10_000 {
		t.Errorf("the CLI's system instruction did not lead the platform's input: %.300s", sys.Raw)
	}
	names := sent.Get(`tools.#(type=="function")#.name`).Array()
	if len(names) < 5 || !strings.Contains(sent.Get("tools").Raw, `"name":"read_file"`) {
		t.Errorf("the platform got %d of the CLI's functions: %v", len(names), names)
	}
	if sent.Get("reasoning.summary").Str != "auto" || !sent.Get("stream").Bool() {
		t.Errorf("the CLI's streamed turn with includeThoughts became reasoning %s, stream %s", sent.Get("reasoning").Raw, sent.Get("stream").Raw)
	}

	// sim-tools calls the first tool it is given with arguments made from its schema: with
	// read_file the only tool, it asks for the file "sim file_path", which the workspace holds.
	const content = "gemini-cli read this line"
	if err := os.WriteFile(filepath.Join(workspace, "sim file_path"), []byte(content+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mark = len(p.Sim.Requests())
	tools := geminiSettings(map[string]any{"tools": map[string]any{"core": []string{"read_file"}}})
	res = runGeminiCLI(t, node, cli, g, workspace, tools, "Read the file", "-m", "sim-tools")
	if got := res.Get("response").Str; !strings.HasPrefix(got, "Hello from sim-tools. The tool returned: ") || !strings.Contains(got, content) {
		t.Fatalf("tool turn: %s", res.Raw)
	}
	if st := res.Get("stats.tools"); st.Get("totalCalls").Int() != 1 || st.Get("totalSuccess").Int() != 1 || !st.Get("byName.read_file").Exists() {
		t.Errorf("the CLI's tool stats: %s", st.Raw)
	}
	calls := upstreamCalls(p, mark)
	if len(calls) != 2 {
		t.Fatalf("the tool turn made %d platform calls, want 2", len(calls))
	}
	second := gjson.ParseBytes(calls[1].Body)
	outs := findItems(second, func(it gjson.Result) bool { return it.Get("type").Str == "function_call_output" })
	if len(outs) != 1 || !strings.Contains(outs[0].Get("output").Str, content) {
		t.Errorf("the file's content did not reach the platform as the call's output: %s", second.Get("input").Raw)
	}

	logs := g.Output.String()
	if !strings.Contains(logs, "streamGenerateContent") || strings.Contains(logs, "status=400") {
		t.Errorf("modelgate refused a request of the CLI, or served none:\n%s", logs)
	}
	g.assertNoSecret(t, p.Key)
	g.assertNoSecret(t, alphaKey)
}
