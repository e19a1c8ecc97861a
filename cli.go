package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"modelgate/config"
)

// commands lists modelgate's subcommands for the usage text, each with a line of what it does.
const commands = `usage: modelgate [flags]             serve (see the flags below)
       modelgate check [flags]       validate a config file and print what it would enforce
       modelgate keys SUBCOMMAND     create, list or revoke keys through a running modelgate
       modelgate teams SUBCOMMAND    list, create, update or delete teams through a running modelgate
       modelgate healthcheck [flags] probe a running modelgate's /healthz (the container's probe)
       modelgate help [COMMAND]      this text, or a command's own

`

// mainUsage is the text of modelgate --help and modelgate help: the commands, then the flags
// of modelgate itself.
func mainUsage(fs *pflag.FlagSet) string {
	return commands + "flags:\n" + fs.FlagUsages()
}

// help prints the usage of modelgate or of one command to stdout, as --help does.
func help(args []string, stdout, stderr io.Writer) int {
	if len(args) > 1 {
		fmt.Fprintln(stderr, "modelgate help: name at most one command")
		return 2
	}
	topic := ""
	if len(args) == 1 {
		topic = args[0]
	}
	switch topic {
	case "", "help":
		fmt.Fprint(stdout, mainUsage(serveFlags(&options{}, stderr)))
	case "check":
		fs, _ := checkFlags(stderr)
		fmt.Fprint(stdout, checkUsage(fs))
	case "keys":
		fmt.Fprintln(stdout, adminUsage("keys", keysUsage))
	case "teams":
		fmt.Fprintln(stdout, adminUsage("teams", teamsUsage))
	case "healthcheck":
		fmt.Fprint(stdout, healthcheckUsage(healthcheckFlags(stderr)))
	default:
		fmt.Fprintf(stderr, "modelgate help: no command %q (the commands are check, keys, teams, healthcheck and help)\n", topic)
		return 2
	}
	return 0
}

type checkOptions struct {
	path     string
	simulate bool
}

func checkFlags(stderr io.Writer) (*pflag.FlagSet, *checkOptions) {
	var o checkOptions
	fs := pflag.NewFlagSet("modelgate check", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.path, "config", "config.yaml", "YAML config file to validate")
	fs.BoolVar(&o.simulate, "simulate", false, "check as modelgate --simulate loads it: an unset ${VAR} becomes the placeholder sim-VAR")
	return fs, &o
}

func checkUsage(fs *pflag.FlagSet) string {
	return "usage: modelgate check [--config FILE] [--simulate]\n\n" +
		"Reports every problem of the file at once, each at its line, or prints what the config\n" +
		"would enforce; exit status 0 when it is valid, 1 when it is not, 2 for a usage error.\n\nflags:\n" +
		fs.FlagUsages()
}

// check validates a config file and prints what it would enforce.
func check(args []string, stdout, stderr io.Writer) int {
	fs, o := checkFlags(stderr)
	fs.Usage = func() { fmt.Fprint(stdout, checkUsage(fs)) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "modelgate check:", err, "(see modelgate check --help)")
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "modelgate check: unexpected argument %q (name the file with --config)\n", fs.Arg(0))
		return 2
	}
	var cfg *config.Config
	var err error
	if o.simulate {
		cfg, err = loadSimulated(o.path, func(name string) {
			fmt.Fprintf(stderr, "note: environment variable %s is not set: checked with the placeholder %s, as --simulate runs it\n",
				name, config.SimulatePlaceholder(name))
		})
	} else {
		cfg, err = config.Load(o.path)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		if vars := unsetVars(err); len(vars) > 0 && !o.simulate {
			fmt.Fprintf(stderr, "hint: export %s, or run modelgate check --simulate to check with placeholders\n", strings.Join(vars, ", "))
		}
		return 1
	}
	fmt.Fprint(stdout, cfg.Summary())
	for _, w := range append(append(cfg.KeyWarnings(), cfg.SpendWarnings()...), cfg.ModelWarnings()...) {
		fmt.Fprintln(stderr, "warning:", w)
	}
	return 0
}

// unsetVars are the environment variables a load error names as unset.
func unsetVars(err error) []string {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var ce *config.Error
		if errors.As(e, &ce) && len(ce.Vars) > 0 {
			return ce.Vars
		}
	}
	return nil
}

// simulateEnv resolves ${VAR} as --simulate does: from the environment, else the placeholder
// sim-VAR, telling unset once for each variable (its name, never a value).
func simulateEnv(unset func(name string)) func(string) (string, bool) {
	told := map[string]bool{}
	return func(name string) (string, bool) {
		if v, ok := os.LookupEnv(name); ok {
			return v, true
		}
		if !told[name] {
			told[name] = true
			unset(name)
		}
		return config.SimulatePlaceholder(name), true
	}
}

// loadSimulated loads the config at path with simulateEnv's placeholders.
func loadSimulated(path string, unset func(name string)) (*config.Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return config.Parse(data, path, simulateEnv(unset))
}

func healthcheckFlags(stderr io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet("modelgate healthcheck", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.String("url", "http://127.0.0.1:8080/healthz", "health URL to probe")
	return fs
}

func healthcheckUsage(fs *pflag.FlagSet) string {
	return "usage: modelgate healthcheck [--url URL]\n\nExits 0 when the URL answers 200, else 1.\n\nflags:\n" + fs.FlagUsages()
}

// healthcheck probes a running modelgate's /healthz: the container image has no shell or
// curl, so the binary is its own probe.
func healthcheck(args []string, stdout, stderr io.Writer) int {
	fs := healthcheckFlags(stderr)
	fs.Usage = func() { fmt.Fprint(stdout, healthcheckUsage(fs)) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "modelgate healthcheck:", err)
		return 2
	}
	url, _ := fs.GetString("url")
	client := http.Client{Timeout: 3 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		fmt.Fprintln(stderr, "unhealthy:", err)
		return 1
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintln(stderr, "unhealthy: status", resp.StatusCode)
		return 1
	}
	return 0
}
