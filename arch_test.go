package main

import (
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// allowedImports is the one-way flow of docs/architecture.md: for each package, the
// modelgate packages it may import. A package missing here fails the test, so a new one
// is placed in the flow (and in the guide) on purpose.
var allowedImports = map[string][]string{
	"modelgate":                     {"*"},
	"modelgate/tracing":             {"reqlog"},
	"modelgate/tracing/tracingtest": {},
	"modelgate/metrics":             {"reqlog", "auth", "config", "calibration", "breaker"},
	"modelgate/reqlog":              {},
	"modelgate/sidecar":             {"config", "platform", "store", "reqlog", "upstream"},
	"modelgate/proxy":               {"adminapi", "apierr", "cors", "modelsapi", "overhead", "probes", "storedapi", "accounting", "calibration", "jobs", "relay", "reqbody", "translate", "ratelimit", "redisconn", "auth", "platform", "store", "stored", "billing", "tracing", "tokens", "reqlog", "sidecar", "config", "upstream", "breaker", "routing", "wsmode", "alerts", "journal"},
	"modelgate/upstream":            {"accounting", "auth", "config", "platform", "ratelimit", "relay", "reqlog", "routing", "tracing", "translate"},
	"modelgate/adminapi":            {"alerts", "apierr", "billing", "breaker", "calibration", "config", "ratelimit", "reqlog"},
	"modelgate/admin":               {"audit", "auth", "billing", "ratelimit", "reqbody", "store", "config", "periodic"},
	"modelgate/audit":               {"store", "config"},
	"modelgate/accounting":          {"auth", "billing", "config", "journal", "ratelimit", "reqlog"},
	"modelgate/reqbody":             {"config"},
	"modelgate/storedapi":           {"apierr", "stored", "translate"},
	"modelgate/modelsapi":           {"apierr", "translate"},
	"modelgate/apierr":              {"auth", "billing", "platform", "ratelimit", "redisconn", "reqbody", "reqlog", "relay", "sidecar", "translate", "upstream"},
	"modelgate/wsmode":              {"translate", "relay"},
	"modelgate/jobs":                {"accounting", "ratelimit", "relay", "reqlog", "store", "stored"},
	"modelgate/relay":               {"accounting", "translate", "ratelimit", "platform", "reqlog", "tracing"},
	"modelgate/billing":             {"store", "config", "periodic"},
	"modelgate/alerts":              {"store", "config", "periodic"},
	"modelgate/calibration":         {"store", "periodic"},
	"modelgate/breaker":             {"store", "periodic"},
	"modelgate/stored":              {"store"},
	"modelgate/journal":             {"ratelimit"},
	"modelgate/translate":           {"tokens"},
	"modelgate/ratelimit":           {"redisconn", "config", "periodic"},
	"modelgate/redisconn":           {"config"},
	"modelgate/redisconn/redistest": {},
	"modelgate/store/storetest":     {"store", "redisconn/redistest"},
	"modelgate/apitest":             {},
	"modelgate/testclock":           {},
	"modelgate/auth":                {"config"},
	"modelgate/platform":            {"config"},
	"modelgate/store":               {"redisconn", "config"},
	"modelgate/config":              {},
	"modelgate/tokens":              {},
	"modelgate/routing":             {},
	"modelgate/cors":                {},
	"modelgate/probes":              {},
	"modelgate/overhead":            {},
	"modelgate/periodic":            {},
	"modelgate/platformsim":         {"tokens"},
	"modelgate/bench/cmd/benchup":   {"platformsim", "bench/benchserve"},
	"modelgate/bench/cmd/floor":     {"bench/benchserve"},
	"modelgate/bench/cmd/spendkill": {},
	"modelgate/bench/benchserve":    {},
	"modelgate/bench/cmd/mgbench":   {"translate", "bench/benchserve", "platformsim"},
	"modelgate/bench/cmd/bodymem":   {},
	"modelgate/deploy":              {},
	"modelgate/tests":               {},
	"modelgate/examples/openai-go":  {},
}

// impureForTranslate are the standard packages that would give translate I/O or a clock.
var impureForTranslate = []string{"net", "net/http", "os", "time", "io/fs", "math/rand", "math/rand/v2", "log", "log/slog"}

// eachPackage calls fn with the import path and the non-test imports of every package of
// the module (test data, hidden folders and node_modules skipped).
func eachPackage(t *testing.T, fn func(importPath string, imports []string)) {
	t.Helper()
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		name := d.Name()
		if path != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules") {
			return filepath.SkipDir
		}
		pkg, err := build.ImportDir(path, 0)
		if err != nil {
			if _, ok := err.(*build.NoGoError); ok {
				return nil
			}
			return err
		}
		importPath := "modelgate"
		if path != "." {
			importPath += "/" + filepath.ToSlash(path)
		}
		fn(importPath, pkg.Imports)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestImportFlow(t *testing.T) {
	eachPackage(t, func(importPath string, imports []string) {
		allowed, known := allowedImports[importPath]
		if !known {
			t.Errorf("%s is not placed in the import flow: add it to allowedImports and to docs/architecture.md", importPath)
			return
		}
		for _, imp := range imports {
			if importPath == "modelgate/translate" && slices.Contains(impureForTranslate, imp) {
				t.Errorf("translate imports %s: it must stay pure (no I/O, no clock)", imp)
			}
			dep, ok := strings.CutPrefix(imp, "modelgate/")
			if !ok || slices.Contains(allowed, "*") {
				continue
			}
			if !slices.Contains(allowed, dep) {
				t.Errorf("%s imports %s, against the flow in docs/architecture.md", importPath, imp)
			}
		}
	})
}
