package main

import (
	"bytes"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// cliCase is one run of an admin CLI command (keys, teams) against a fake admin API.
type cliCase struct {
	name     string
	args     []string
	code     int
	call     string // the request the CLI must have sent
	out, err string
}

// runCLICases runs each case as `modelgate <command> <args> --url <srv>` and checks its exit
// code, the one admin call it made (none when call is empty), and what it wrote.
func runCLICases(t *testing.T, command string, srv *httptest.Server, calls *[]string, cases []cliCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			*calls = nil
			var stdout, stderr bytes.Buffer
			code := run(append([]string{command}, append(c.args, "--url", srv.URL)...), &stdout, &stderr)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, c.code, stderr.String())
			}
			got := *calls
			if c.call == "" && len(got) != 0 || c.call != "" && (len(got) != 1 || !strings.HasPrefix(got[0], c.call)) {
				t.Errorf("calls %q, want %q", got, c.call)
			}
			if !strings.Contains(stdout.String(), c.out) || !strings.Contains(stderr.String(), c.err) {
				t.Errorf("stdout %q stderr %q, want %q / %q", stdout.String(), stderr.String(), c.out, c.err)
			}
		})
	}
}

// checkNeedsAdminKey: with the admin key's variable empty, `<command> list` refuses to run
// (exit 2) and names the variable.
func checkNeedsAdminKey(t *testing.T, command string, srv *httptest.Server) {
	t.Helper()
	t.Setenv(adminKeyEnv, "")
	var stderr bytes.Buffer
	if code := run([]string{command, "list", "--url", srv.URL}, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), adminKeyEnv) {
		t.Errorf("without the admin key: exit %d, %s", code, stderr.String())
	}
}
