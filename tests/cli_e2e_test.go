package tests

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The real binary's help and check, as a new user meets them (issue 45).
func TestCommandLineFirstSteps(t *testing.T) {
	secrets := []string{"PLATFORM_API_KEY", "SEARCH_PLATFORM_KEY", "SEARCH_APP_KEY", "CHAT_APP_KEY", "MODELGATE_ADMIN_KEY"}
	var env []string // the environment without the example's secrets
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(secrets, name) {
			env = append(env, kv)
		}
	}
	cases := []struct {
		name   string
		args   []string
		code   int
		stdout string // contained in stdout
		stderr string // contained in stderr
	}{
		{"help_flag", []string{"--help"}, 0, "modelgate check [flags]", ""},
		{"help_command", []string{"help"}, 0, "modelgate keys SUBCOMMAND", ""},
		{"check_help", []string{"check", "--help"}, 0, "usage: modelgate check", ""},
		{"keys_help", []string{"keys", "--help"}, 0, "usage: modelgate keys create", ""},
		{"check_example_simulated", []string{"check", "--simulate", "--config", "../config.yaml"}, 0, "team search", "placeholder sim-SEARCH_APP_KEY"},
		{"check_example_names_secrets", []string{"check", "--config", "../config.yaml"}, 1, "",
			"environment variables are not set: PLATFORM_API_KEY (line"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(binPath, c.args...)
			cmd.Env = env
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != c.code || !strings.Contains(stdout.String(), c.stdout) || !strings.Contains(stderr.String(), c.stderr) {
				t.Fatalf("exit %d (want %d)\nstdout: %s\nstderr: %s", code, c.code, stdout.String(), stderr.String())
			}
		})
	}
}
