package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// exampleTimeout bounds one recipe: each makes one or two calls to the simulated platform.
const exampleTimeout = 90 * time.Second

// simulateAnswer is what the simulated platform answers to the recipes' prompt for the
// example config's gpt-4o-mini (upstream some-platform-model).
const simulateAnswer = "Hello from some-platform-model. You said: Say hello to modelgate."

// TestExamples runs every recipe in examples/ against the real binary started the way the
// README starts it (--simulate with the repository's config.yaml), so a recipe that rots
// fails the build. Only a missing node or curl skips those recipes, and never in CI.
func TestExamples(t *testing.T) {
	cfg, err := os.ReadFile("../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// JSON logs: the Codex subtests read which transport served their turns.
	g := startGateway(t, gatewayOptions{ConfigYAML: string(cfg), Args: []string{"--simulate", "--log-format", "json"}})
	const key = "sim-SEARCH_APP_KEY" // the placeholder --simulate gives the example's search key
	openaiEnv := []string{"OPENAI_BASE_URL=" + g.URL + "/v1", "OPENAI_API_KEY=" + key,
		"ANTHROPIC_BASE_URL=" + g.URL, "ANTHROPIC_API_KEY=" + key}
	examples, err := filepath.Abs("../examples")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("openai-go", func(t *testing.T) {
		goBin, err := exec.LookPath("go")
		if err != nil {
			t.Fatal(err)
		}
		runExample(t, exec.Command(goBin, "run", "./examples/openai-go"), "..", openaiEnv, simulateAnswer, "[stop]")
	})
	t.Run("curl", func(t *testing.T) {
		requireTool(t, "curl")
		runExample(t, exec.Command("bash", filepath.Join(examples, "curl", "chat.sh")), examples, openaiEnv,
			`"object":"chat.completion.chunk"`, "data: [DONE]", "event: response.completed")
	})

	nodeDir := filepath.Join(examples, "node")
	node := requireTool(t, "node")
	ensureNodeModules(t, nodeDir)
	for _, c := range []struct {
		script string
		want   []string
	}{
		{"openai-chat.mjs", []string{simulateAnswer, "[usage]"}},
		{"openai-responses.mjs", []string{simulateAnswer, "[completed]"}},
		{"responses-websocket.mjs", []string{simulateAnswer, "[completed]",
			"Hello from some-platform-model. You said: And once more, on the same connection."}},
		{"responses-websocket-lanes.mjs", []string{"[research] [completed] " + simulateAnswer,
			"[research] [completed] Hello from some-platform-model. You said: And once more, on the same lane.",
			"[summary] [completed] Hello from some-platform-model. You said: Say hello from the second lane."}},
		{"ai-sdk.mjs", []string{"[responses] " + simulateAnswer, "[chat] " + simulateAnswer}},
		{"langchain.mjs", []string{simulateAnswer}},
		{"agents.mjs", []string{"[final] " + simulateAnswer}},
		{"anthropic.mjs", []string{simulateAnswer, "[end_turn]"}},
	} {
		t.Run(strings.TrimSuffix(c.script, ".mjs"), func(t *testing.T) {
			runExample(t, exec.Command(node, c.script), nodeDir, openaiEnv, c.want...)
		})
	}

	geminiDir := filepath.Join(examples, "gemini")
	geminiEnv := recipeEnv(t, filepath.Join(geminiDir, "env.sh"), "http://127.0.0.1:8080", g.URL)
	t.Run("gemini-genai", func(t *testing.T) {
		ensureNodeModules(t, geminiDir)
		runExample(t, exec.Command(node, "genai.mjs"), geminiDir, geminiEnv, simulateAnswer, "[STOP]", "[countTokens]")
	})
	t.Run("gemini-cli", func(t *testing.T) {
		cli := geminiCLI(t)
		settings, err := os.ReadFile(filepath.Join(geminiDir, "settings.json"))
		if err != nil {
			t.Fatal(err)
		}
		home := t.TempDir()
		if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), settings, 0o600); err != nil {
			t.Fatal(err)
		}
		env := append(slices.Clip(geminiEnv), "HOME="+home, "TERM=dumb", "NO_COLOR=1")
		cmd := exec.Command(node, cli, "--skip-trust", "-p", "Say hello to modelgate.", "--output-format", "json")
		// The CLI puts its session context before the prompt, which the simulated model echoes.
		runExample(t, cmd, t.TempDir(), env, `"response": "Hello from some-platform-model. You said:`, `Say hello to modelgate."`)
	})

	t.Run("claude-code", func(t *testing.T) {
		env := recipeEnv(t, filepath.Join(examples, "claude-code", "env.sh"), "http://127.0.0.1:8080", g.URL)
		home := t.TempDir()
		env = append(env, "HOME="+home, "TERM=dumb",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1")
		cmd := exec.Command(claudeCLI(t), "-p", "Say hello to modelgate.", "--output-format", "json")
		// The agent adds its own reminders to the prompt, which the simulated model echoes.
		runExample(t, cmd, home, env, `"is_error":false`, "Hello from some-platform-model. You said:", "Say hello to modelgate.")
	})
	// Codex over HTTP, then over the WebSocket mode. Codex retries a failed socket turn over
	// HTTP without a word, so each run is checked in the access log, not by its answer alone.
	codex := filepath.Join(nodeDir, "node_modules", ".bin", "codex")
	t.Run("codex-cli", func(t *testing.T) {
		turns := runCodex(t, g, codex, filepath.Join(examples, "codex", "config.toml"), key, false)
		if n := countTurns(turns, ""); n == 0 || n != len(turns) {
			t.Errorf("codex over HTTP: %d of its %d turns were plain POSTs", n, len(turns))
		}
	})
	t.Run("codex-cli-websocket", func(t *testing.T) {
		turns := runCodex(t, g, codex, filepath.Join(examples, "codex", "config-websocket.toml"), key, true)
		if n := countTurns(turns, "websocket"); n == 0 || n != len(turns) {
			t.Errorf("codex with supports_websockets: %d of its %d turns came over the WebSocket", n, len(turns))
		}
	})
}

// runCodex runs `codex exec` with a config recipe pointed at g and returns the access-log
// lines of the Responses turns it made. With socket, it waits for the line of Codex's
// WebSocket connection too: that line is written once the connection has closed, after
// every turn it served was logged.
func runCodex(t *testing.T, g *gateway, codex, recipe, key string, socket bool) []map[string]any {
	t.Helper()
	home := t.TempDir()
	snippet, err := os.ReadFile(recipe)
	if err != nil {
		t.Fatal(err)
	}
	// The recipe names the default address; the test's gateway has a port of its own.
	toml := strings.Replace(string(snippet), "http://127.0.0.1:8080/v1", g.URL+"/v1", 1)
	if toml == string(snippet) {
		t.Fatalf("%s no longer points at http://127.0.0.1:8080/v1", recipe)
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	mark := len(accessLog(t, g))
	cmd := exec.Command(codex, "exec", "--skip-git-repo-check", "Say hello to modelgate.")
	runExample(t, cmd, t.TempDir(), []string{"CODEX_HOME=" + home, "MODELGATE_API_KEY=" + key}, simulateAnswer)
	// A turn's line follows its answer: wait, bounded, for the lines to be written.
	var turns []map[string]any
	deadline := time.Now().Add(10 * time.Second)
	for {
		turns = turns[:0]
		connections := 0
		for _, line := range accessLog(t, g)[mark:] {
			switch {
			case line["method"] == "POST" && line["route"] == "/v1/responses":
				turns = append(turns, line)
			case line["route"] == "/v1/responses (websocket)" && line["status"] == 101.0:
				connections++
			}
		}
		// A turn over plain HTTP from a socket recipe is Codex's fallback: no need to wait.
		if len(turns) > 0 && (!socket || connections > 0 || countTurns(turns, "") > 0) {
			return turns
		}
		if time.Now().After(deadline) {
			t.Fatalf("codex's turns were not logged within 10s (%d turns, %d WebSocket connections)", len(turns), connections)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// countTurns counts the access-log lines whose transport is transport ("" for HTTP).
func countTurns(lines []map[string]any, transport string) int {
	n := 0
	for _, line := range lines {
		if got, _ := line["transport"].(string); got == transport {
			n++
		}
	}
	return n
}

// recipeEnv reads the `export NAME=value` lines of a shell recipe, with the default address
// from replaced by to.
func recipeEnv(t *testing.T, path, from, to string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, line := range strings.Split(string(b), "\n") {
		assign, ok := strings.CutPrefix(strings.TrimSpace(line), "export ")
		if !ok {
			continue
		}
		assign, _, _ = strings.Cut(assign, "#")
		env = append(env, strings.ReplaceAll(strings.TrimSpace(assign), from, to))
	}
	if !slices.ContainsFunc(env, func(e string) bool { return strings.HasSuffix(e, "_BASE_URL="+to) }) {
		t.Fatalf("%s sets no base URL %s", path, from)
	}
	return env
}

// requireTool finds a command, skipping the test without it locally and failing in CI.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not on PATH and CI is set", name)
		}
		t.Skipf("%s is not on PATH: those recipes did not run", name)
	}
	return p
}

// runExample runs one recipe and checks that it succeeded and printed every wanted string.
func runExample(t *testing.T, cmd *exec.Cmd, dir string, env []string, want ...string) {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), exampleTimeout)
	defer cancel()
	run := exec.CommandContext(c, cmd.Path, cmd.Args[1:]...)
	run.Dir = dir
	run.Env = append(os.Environ(), env...)
	out, err := run.CombinedOutput()
	if c.Err() != nil {
		t.Fatalf("%s did not finish within %v:\n%s", cmd.Args, exampleTimeout, out)
	}
	if err != nil {
		t.Fatalf("%s failed (%v):\n%s", cmd.Args, err, out)
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Errorf("%s printed no %q:\n%s", cmd.Args, w, out)
		}
	}
}
