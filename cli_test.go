package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

// Issue 45: every way of asking for help answers on stdout with exit 0.
func TestHelp(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // all in stdout
	}{
		{"flag", []string{"--help"}, []string{"modelgate check [flags]", "modelgate keys SUBCOMMAND", "modelgate healthcheck", "modelgate help", "--simulate", "--config string"}},
		{"short_flag", []string{"-h"}, []string{"modelgate check [flags]", "modelgate keys SUBCOMMAND"}},
		{"command", []string{"help"}, []string{"modelgate check [flags]", "modelgate keys SUBCOMMAND", "--listen string"}},
		{"help_check", []string{"help", "check"}, []string{"usage: modelgate check [--config FILE] [--simulate]", "--simulate"}},
		{"help_keys", []string{"help", "keys"}, []string{"usage: modelgate keys create", "modelgate keys revoke ID"}},
		{"help_healthcheck", []string{"help", "healthcheck"}, []string{"usage: modelgate healthcheck", "--url string"}},
		{"check_flag", []string{"check", "--help"}, []string{"usage: modelgate check", "--config string"}},
		{"check_short_flag", []string{"check", "-h"}, []string{"usage: modelgate check"}},
		{"keys_flag", []string{"keys", "--help"}, []string{"usage: modelgate keys create", "MODELGATE_ADMIN_KEY"}},
		{"keys_short_flag", []string{"keys", "-h"}, []string{"usage: modelgate keys create"}},
		{"keys_help", []string{"keys", "help"}, []string{"usage: modelgate keys create"}},
		{"keys_list_flag", []string{"keys", "list", "--help"}, []string{"usage: modelgate keys create", "flags of keys list:", "--team string"}},
		{"healthcheck_flag", []string{"healthcheck", "--help"}, []string{"usage: modelgate healthcheck"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d, want 0; stderr %q", code, stderr.String())
			}
			if stderr.Len() != 0 {
				t.Errorf("stderr %q, want nothing", stderr.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout.String())
				}
			}
		})
	}
}

func TestHelpMisuse(t *testing.T) {
	for _, args := range [][]string{{"help", "serve"}, {"help", "check", "keys"}, {"check", "--nope"}, {"check", "config.yaml"}, {"keys"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 2 || stderr.Len() == 0 {
			t.Errorf("%q: exit %d stderr %q, want 2 and a message", args, code, stderr.String())
		}
	}
}

// exampleSecrets are the variables the shipped config.yaml names.
var exampleSecrets = []string{"PLATFORM_API_KEY", "SEARCH_PLATFORM_KEY", "SEARCH_APP_KEY", "CHAT_APP_KEY", "MODELGATE_ADMIN_KEY"}

// unsetEnv unsets names for the test, restoring them after.
func unsetEnv(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		t.Setenv(n, "") // restores the old value at the end
		os.Unsetenv(n)
	}
}

func TestCheckShippedExampleWithoutSecrets(t *testing.T) {
	unsetEnv(t, exampleSecrets...)

	var stdout, stderr bytes.Buffer
	if code := run([]string{"check", "--simulate", "--config", "config.yaml"}, &stdout, &stderr); code != 0 {
		t.Fatalf("check --simulate: exit %d\n%s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "team search") {
		t.Errorf("summary %q", stdout.String())
	}
	for _, name := range exampleSecrets {
		want := "note: environment variable " + name + " is not set: checked with the placeholder sim-" + name
		if strings.Count(stderr.String(), want) != 1 {
			t.Errorf("stderr lacks one %q:\n%s", want, stderr.String())
		}
	}
	if strings.Contains(stderr.String(), "warning:") {
		t.Errorf("placeholders warned about:\n%s", stderr.String())
	}

	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"check", "--config", "config.yaml"}, &stdout, &stderr); code != 1 {
		t.Fatalf("check without the secrets: exit %d, want 1", code)
	}
	// One message names all five, each at the line that uses it (read from the file, which
	// others edit), then one hint.
	example, err := os.ReadFile("config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var named []string
	first := 0
	for _, name := range exampleSecrets {
		for i, l := range strings.Split(string(example), "\n") {
			if strings.Contains(l, "${"+name+"}") && !strings.HasPrefix(strings.TrimSpace(l), "#") {
				named = append(named, fmt.Sprintf("%s (line %d)", name, i+1))
				if first == 0 {
					first = i + 1
				}
				break
			}
		}
	}
	want := fmt.Sprintf("config.yaml:%d: environment variables are not set: %s\n", first, strings.Join(named, ", ")) +
		"hint: export PLATFORM_API_KEY, SEARCH_PLATFORM_KEY, SEARCH_APP_KEY, CHAT_APP_KEY, MODELGATE_ADMIN_KEY, or run modelgate check --simulate to check with placeholders\n"
	if len(named) != len(exampleSecrets) || stderr.String() != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", stderr.String(), want)
	}
}

// The file: a typo, a bad type, a negative limit and a quoted number, all at once.
func TestCheckReportsEveryProblemInOnePass(t *testing.T) {
	path := writeFile(t, "upstream:\n  gateway_url: http://gw\n  base_url: http://api\n  api_key: sk-x\nmodels: [{id: m}]\n"+
		"teams:\n  - name: search\n    limits:\n      requests_per_minut: 5\n      tokens_per_day: lots\n"+
		"      concurrent_requests: -1\n      spend_per_day: \"1.00\"\n    keys:\n      - name: k\n        key: mg-0123456789abcdef0123456789abcdef\n")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"check", "--config", path}, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	want := []string{
		path + `:9: teams[0].limits.requests_per_minut: unknown key (did you mean "requests_per_minute"?)`,
		path + `:10: teams[0].limits.tokens_per_day: want a whole number, got "lots"`,
		path + `:11: teams[0].limits.concurrent_requests: must not be negative, got -1`,
		path + `:12: teams[0].limits.spend_per_day: want a number, got the string "1.00": write it without quotes`,
	}
	if got := strings.TrimSpace(stderr.String()); got != strings.Join(want, "\n") {
		t.Errorf("stderr:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}
