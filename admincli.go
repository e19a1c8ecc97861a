package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// adminCLI is what the keys and teams commands share around their own flags and requests:
// the subcommand and its help, the --url and --json flags, the admin key read from the
// environment, the one admin call and how its answer is printed. Each command adds its own
// flags to fs and builds its request.
type adminCLI struct {
	group, usage   string // "keys" and keysUsage, "teams" and teamsUsage
	stdout, stderr io.Writer
	sub            string
	fs             *pflag.FlagSet
	base           *string
	asJSON         *bool
}

// adminUsage is an admin command's usage followed by the lines every one of them shares.
func adminUsage(group, usage string) string {
	return usage + "\nevery subcommand takes --url (default http://127.0.0.1:8080) and --json; the admin key is\n" +
		"read from $" + adminKeyEnv + "; modelgate " + group + " SUBCOMMAND --help lists its flags"
}

// newAdminCLI reads the subcommand from args and starts its flag set. done means the command
// has already answered (help asked for, or no subcommand given) and exits with code.
func newAdminCLI(group, usage string, args []string, stdout, stderr io.Writer) (a *adminCLI, code int, done bool) {
	usage = adminUsage(group, usage)
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprintln(stdout, usage)
		return nil, 0, true
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, usage)
		return nil, 2, true
	}
	a = &adminCLI{group: group, usage: usage, stdout: stdout, stderr: stderr, sub: args[0]}
	a.fs = pflag.NewFlagSet("modelgate "+group+" "+a.sub, pflag.ContinueOnError)
	a.fs.SetOutput(stderr)
	a.fs.Usage = func() { fmt.Fprintf(stdout, "%s\n\nflags of %s %s:\n%s", usage, group, a.sub, a.fs.FlagUsages()) }
	a.base = a.fs.String("url", "http://127.0.0.1:8080", "modelgate's base URL")
	a.asJSON = a.fs.Bool("json", false, "print the API's JSON answer")
	return a, 0, false
}

// parse reads the subcommand's flags (args without the subcommand). done means the command
// ends here with code: --help was asked for, or a flag was wrong.
func (a *adminCLI) parse(args []string) (code int, done bool) {
	if err := a.fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0, true
		}
		fmt.Fprintf(a.stderr, "modelgate %s %s: %v (see modelgate %s --help)\n", a.group, a.sub, err, a.group)
		return 2, true
	}
	return 0, false
}

// misuse reports a subcommand given the wrong arguments: exit 2, nothing sent.
func (a *adminCLI) misuse(format string, args ...any) int {
	fmt.Fprintf(a.stderr, "modelgate %s %s: %s\n", a.group, a.sub, fmt.Sprintf(format, args...))
	return 2
}

// unknown answers a subcommand the command does not have with its usage: exit 2.
func (a *adminCLI) unknown() int {
	fmt.Fprintln(a.stderr, a.usage)
	return 2
}

// call sends one admin request (payload nil for none) with the admin key from
// $MODELGATE_ADMIN_KEY and prints the answer: the API's JSON with --json, else through print.
// A failed call exits 1, a missing admin key 2.
func (a *adminCLI) call(method, path string, payload any, print func(sub string, body []byte, stdout, stderr io.Writer) int) int {
	adminKey := os.Getenv(adminKeyEnv)
	if adminKey == "" {
		fmt.Fprintf(a.stderr, "modelgate %s: set %s to an admin key\n", a.group, adminKeyEnv)
		return 2
	}
	status, answer, err := newAdminClient(*a.base, adminKey).do(method, path, payload)
	if err != nil {
		fmt.Fprintf(a.stderr, "modelgate %s: %v\n", a.group, err)
		return 1
	}
	if status/100 != 2 {
		fmt.Fprintf(a.stderr, "modelgate %s %s: %d %s\n", a.group, a.sub, status, apiMessage(answer))
		return 1
	}
	if *a.asJSON {
		_, _ = a.stdout.Write(answer)
		return 0
	}
	return print(a.sub, answer, a.stdout, a.stderr)
}
