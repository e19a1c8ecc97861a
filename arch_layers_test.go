package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// layers are the tiers of docs/architecture.md, top first. A package may import packages of
// the tiers below its own; inside its own tier only what allowedImports lists (and Go
// refuses cycles). The tools tier (the simulator and test helpers) sits beside the lifecycle
// and reaches only the engines and leaves: nothing of the product's HTTP path depends on it.
var layers = []struct {
	name     string
	rank     int
	packages []string
}{
	{"entry", 0, []string{"modelgate"}},
	{"http", 1, []string{"proxy", "admin", "adminapi", "metrics"}},
	{"lifecycle", 2, []string{"jobs", "sidecar", "upstream", "relay", "accounting", "reqbody", "wsmode", "apierr", "storedapi", "modelsapi"}},
	{"tools", 2, []string{"platformsim", "apitest", "testclock", "redisconn/redistest", "store/storetest", "tracing/tracingtest",
		"bench/benchserve", "bench/cmd/benchup", "bench/cmd/floor", "bench/cmd/spendkill", "bench/cmd/mgbench", "bench/cmd/bodymem", "deploy", "tests", "examples/openai-go"}},
	{"engines", 3, []string{"translate", "ratelimit", "auth", "platform", "store", "billing", "alerts", "calibration", "breaker", "stored", "journal", "audit", "reqlog", "tracing", "redisconn"}},
	{"leaves", 4, []string{"config", "tokens", "periodic", "routing", "cors", "probes", "overhead"}},
}

// layerOf names the tier of a package given without the module prefix ("" for the root).
func layerOf(pkg string) (name string, rank int, ok bool) {
	if pkg == "" {
		pkg = "modelgate"
	}
	for _, l := range layers {
		if slices.Contains(l.packages, pkg) {
			return l.name, l.rank, true
		}
	}
	return "", 0, false
}

// layerViolation says what is wrong with from importing to, or "" when the tiers allow it.
func layerViolation(from, to string) string {
	fromLayer, fromRank, ok := layerOf(from)
	if !ok {
		return fmt.Sprintf("%s is in no tier: add it to layers and to docs/architecture.md", from)
	}
	toLayer, toRank, ok := layerOf(to)
	switch {
	case !ok:
		return fmt.Sprintf("%s imports %s, which is in no tier", from, to)
	case fromLayer == "entry":
		return ""
	case toRank < fromRank || (toRank == fromRank && toLayer != fromLayer):
		return fmt.Sprintf("%s (%s) imports %s (%s): an arrow upward or sideways", from, fromLayer, to, toLayer)
	}
	return ""
}

func TestLayerViolation(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{"proxy", "relay", true},
		{"relay", "accounting", true}, // inside a tier, as allowedImports lists
		{"relay", "proxy", false},     // upward
		{"accounting", "jobs", true},  // same tier: allowedImports decides (it refuses this one)
		{"translate", "relay", false}, // an engine reaching up into the lifecycle
		{"config", "tokens", true},
		{"platformsim", "proxy", false}, // a tool reaching into the HTTP tier
		{"platformsim", "jobs", false},  // beside the lifecycle, not above it
		{"", "platformsim", true},       // main wires everything
		{"newpkg", "config", false},     // unplaced
	} {
		if got := layerViolation(tc.from, tc.to); (got == "") != tc.ok {
			t.Errorf("%s -> %s: %q, want allowed=%v", tc.from, tc.to, got, tc.ok)
		}
	}
}

// TestLayers checks every modelgate package's imports against the tiers.
func TestLayers(t *testing.T) {
	for pkg := range allowedImports {
		if _, _, ok := layerOf(strings.TrimPrefix(strings.TrimPrefix(pkg, "modelgate"), "/")); !ok {
			t.Errorf("%s is in allowedImports but in no tier", pkg)
		}
	}
	eachPackage(t, func(importPath string, imports []string) {
		from := strings.TrimPrefix(strings.TrimPrefix(importPath, "modelgate"), "/")
		for _, imp := range imports {
			if to, ok := strings.CutPrefix(imp, "modelgate/"); ok {
				if v := layerViolation(from, to); v != "" {
					t.Error(v)
				}
			}
		}
	})
}
