package config

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// Issue 45: check must report every problem of a file in one run, each at its line, and
// nothing a failed value merely implies.
func TestParseReportsEveryProblemAtOnce(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want []string // the whole error, one line per problem, in this order
	}{
		{"typo_type_and_negative_limit",
			keyed + "    limts: {requests_per_minute: 5}\n    limits:\n      tokens_per_minute: lots\n      requests_per_minute: -1\n",
			[]string{
				"c.yaml: models: no models are listed, so with team keys every model call would be refused (limits.unlisted_models defaults to refuse when teams are configured): list the models teams may call, or set limits.unlisted_models: allow",
				`c.yaml:8: teams[0].limts: unknown key (did you mean "limits"?)`,
				`c.yaml:10: teams[0].limits.tokens_per_minute: want a whole number, got "lots"`,
				`c.yaml:11: teams[0].limits.requests_per_minute: must not be negative, got -1`,
			}},
		{"quoted_number_with_other_problems",
			"limits:\n  spend_per_day: \"1.00\"\n  concurrent_requests: -2\nserver:\n  max_body_byte: 5\n",
			[]string{
				`c.yaml:2: limits.spend_per_day: want a number, got the string "1.00": write it without quotes`,
				`c.yaml:3: limits.concurrent_requests: must not be negative, got -2`,
				`c.yaml:5: server.max_body_byte: unknown key (did you mean "max_body_bytes"?)`,
			}},
		// A key spelt wrong leaves the key it meant unset: no second complaint about that.
		{"typo_hides_its_own_missing_key",
			"models: [{id: a}]\nupstream: {api_key: k}\nteams:\n  - name: t\n    keys:\n      - name: k\n        kye: mg-a-long-enough-key\n",
			[]string{`c.yaml:7: teams[0].keys[0].kye: unknown key (did you mean "key"?)`}},
		// A value that failed to decode is not also called empty, nor its parent incomplete.
		{"failed_value_not_also_empty",
			"models: [{id: a}]\nupstream: {api_key: k}\nteams:\n  - name: t\n    keys:\n      - name: k\n        key: [a]\n",
			[]string{`c.yaml:7: teams[0].keys[0].key: want a single value, got a list`}},
		{"unset_variables_in_one_message",
			"upstream:\n  gateway_url: ${GW}\n  base_url: ${BASE}\n  api_key: ${GW}\nlimits: {requests_per_minute: -1}\n",
			[]string{
				`c.yaml:2: environment variables are not set: GW (lines 2, 4), BASE (line 3)`,
				`c.yaml:5: limits.requests_per_minute: must not be negative, got -1`,
			}},
		// The team's own problem is not its limit's: both are reported.
		{"team_problem_beside_a_failed_limit",
			"models: [{id: a}]\nteams:\n  - name: t\n    limits: {tokens_per_day: lots}\n    keys: [{name: k, key: mg-a}]\n",
			[]string{
				`c.yaml:3: teams[0]: no platform key for this team: set upstream.api_key or teams[0].upstream_api_key`,
				`c.yaml:4: teams[0].limits.tokens_per_day: want a whole number, got "lots"`,
			}},
		// ... but a complaint that names the key whose variable is unset is that same problem.
		{"complaint_naming_a_failed_key_left_out",
			"models: [{id: a}]\nupstream:\n  api_key: ${PLATFORM}\nteams:\n  - name: t\n    keys: [{name: k, key: mg-a}]\n",
			[]string{`c.yaml:3: upstream.api_key: environment variable PLATFORM is not set`}},
		{"unset_variable_used_once_keeps_its_path",
			"upstream:\n  api_key: ${PLATFORM}\n",
			[]string{`c.yaml:2: upstream.api_key: environment variable PLATFORM is not set`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml), "c.yaml", envMap(testEnv))
			if err == nil {
				t.Fatal("accepted")
			}
			if got := err.Error(); got != strings.Join(c.want, "\n") {
				t.Errorf("error:\n%s\nwant:\n%s", got, strings.Join(c.want, "\n"))
			}
		})
	}
}

func TestUnsetVariablesNamedForCaller(t *testing.T) {
	_, err := Parse([]byte("upstream:\n  api_key: ${A_KEY}\nadmin_keys: [${B_KEY}, ${A_KEY}]\n"), "c.yaml", envMap(testEnv))
	var ce *Error
	for _, e := range unwrapAll(err) {
		if errors.As(e, &ce) && len(ce.Vars) > 0 {
			break
		}
		ce = nil
	}
	if ce == nil || strings.Join(ce.Vars, ",") != "A_KEY,B_KEY" {
		t.Fatalf("error %v: want one naming A_KEY,B_KEY in Vars", err)
	}
}

func unwrapAll(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func TestQuotedNumbersRefused(t *testing.T) {
	env := envMap(map[string]string{"RPM": "60"})
	cases := []struct {
		name, yaml string
		want       string // "" for accepted
	}{
		{"double_quoted_float", "limits:\n  spend_per_day: \"1.00\"\n", `c.yaml:2: limits.spend_per_day: want a number, got the string "1.00"`},
		{"single_quoted_int", "limits:\n  requests_per_minute: '60'\n", `c.yaml:2: limits.requests_per_minute: want a number, got the string "60"`},
		{"tagged_str", "limits:\n  tokens_per_day: !!str 100\n", `limits.tokens_per_day: want a number, got the string "100"`},
		{"block_scalar", "limits:\n  tokens_per_day: |\n    100\n", `limits.tokens_per_day: want a number`},
		{"pointer_int", "upstream:\n  max_retries: \"3\"\n", `upstream.max_retries: want a number, got the string "3"`},
		{"price", "models:\n  - id: a\n    price: {input: '0.15', output: 1}\n", `c.yaml:3: models[0].price.input: want a number`},
		{"plain_number", "limits:\n  spend_per_day: 1.00\n  requests_per_minute: 60\n", ""},
		{"variable_plain", "limits:\n  requests_per_minute: ${RPM}\n", ""},
		{"variable_quoted", "limits:\n  requests_per_minute: \"${RPM}\"\n", ""},
		{"quoted_string_field", "listen: \"127.0.0.1:9\"\n", ""},
		{"quoted_duration", "upstream:\n  dial_timeout: \"5s\"\n", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml), "c.yaml", env)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}

func TestUnknownKeysAlwaysSuggest(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"top_typo", "upstreem:\n  api_key: k\n", `c.yaml:1: upstreem: unknown key (did you mean "upstream"?)`},
		{"top_swap", "modles: []\n", `modles: unknown key (did you mean "models"?)`},
		{"nested_case", "server:\n  Max_Body_Bytes: 5\n", `server.Max_Body_Bytes: unknown key (did you mean "max_body_bytes"?)`},
		{"deep", "upstream:\n  breaker:\n    failure: 3\n", `c.yaml:3: upstream.breaker.failure: unknown key (did you mean "failures"?)`},
		{"in_list_item", "models:\n  - id: a\n    prise: {input: 1}\n", `models[0].prise: unknown key (did you mean "price"?)`},
		{"in_flow_mapping", "models:\n  - id: a\n    price: {inptu: 1}\n", `models[0].price.inptu: unknown key (did you mean "input"?)`},
		{"far_lists_the_keys", "upstream:\n  breaker:\n    zzzzzzzz: 3\n", `upstream.breaker.zzzzzzzz: unknown key (did you mean "cooldown"? the keys here are cooldown, failures, window)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml), "c.yaml", envMap(testEnv))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}

// yaml.v3 names the line a broken block began on; the loader must name the broken line.
func TestSyntaxErrorAtItsLine(t *testing.T) {
	example, err := os.ReadFile("../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(example), "\n")
	// The shipped example with a team limit indented one space too far (not the first of its
	// block, which would set the block's indentation): yaml.v3 names a line far above.
	bad := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "      concurrent_requests:") {
			lines[i], bad = " "+l, i+1
			break
		}
	}
	if bad < 0 {
		t.Fatal("the example has no team limit to break")
	}
	cases := []struct {
		name, yaml string
		line       int
	}{
		{"example_indented_too_far", strings.Join(lines, ""), bad},
		{"key_dedented_in_mapping", "a:\n  b: 1\n  c: 2\n d: 3\n", 4},
		{"key_indented_under_list_item", "teams:\n  - name: x\n    keys:\n      - name: k\n        key: v\n       limits: {}\n", 6},
		{"list_then_key", "a:\n  - x\n  y: 2\n", 3},
		{"mapping_value_in_scalar", "a:\n  b: 1\n  c: 2\n   d: 3\n", 4},
		{"tab", "a:\n  b: 1\n\tc: 2\n", 3},
		{"crlf", "a:\r\n  b: 1\r\n  c: 2\r\n d: 3\r\n", 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml), "c.yaml", envMap(testEnv))
			var ce *Error
			if !errors.As(err, &ce) || !strings.Contains(ce.Msg, "YAML syntax") {
				t.Fatalf("error %v: want a YAML syntax error", err)
			}
			if ce.Line != c.line {
				t.Errorf("line %d, want %d (%v)", ce.Line, c.line, err)
			}
		})
	}
}

// Past maxSearchBytes the search is skipped (each step parses the file again): the line is
// yaml.v3's own, here the block's, not the broken line at the end.
func TestSyntaxErrorLineSearchBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("teams:\n")
	for b.Len() <= maxSearchBytes {
		b.WriteString("  - name: t\n    keys:\n      - {name: k, key: v}\n")
	}
	b.WriteString("  - name: x\n    a: 1\n   b: 2\n")
	_, err := Parse([]byte(b.String()), "c.yaml", nil)
	var ce *Error
	if !errors.As(err, &ce) || !strings.Contains(ce.Msg, "YAML syntax") {
		t.Fatalf("error %v: want a YAML syntax error", err)
	}
	if last := strings.Count(b.String(), "\n"); ce.Line >= last-1 {
		t.Errorf("line %d of %d: the search ran on a file over its bound", ce.Line, last)
	}
}

// FuzzProblemLine: whatever the text, the line found for a syntax error is one of its lines
// (counted as yaml.v3 counts them when the text has other line breaks than "\n").
func FuzzProblemLine(f *testing.F) {
	f.Add([]byte("a:\n  b: 1\n d: 3\n"))
	f.Add([]byte("a:\n  c: [1,\n  d: 2\n"))
	f.Add([]byte("a:\n  b: 'x\n  c: 2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := Parse(data, "f.yaml", nil)
		var ce *Error
		if err == nil || !errors.As(err, &ce) || !strings.HasPrefix(ce.Msg, "YAML syntax") {
			return
		}
		n := len(lineEnds(data))
		if !onlyNewlines(data) {
			n = len(data) // every byte may be a line break
		}
		if ce.Line < 0 || ce.Line > n+1 {
			t.Fatalf("line %d of a %d-line text", ce.Line, n)
		}
	})
}
