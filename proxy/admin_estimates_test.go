package proxy

import (
	"encoding/json"
	"testing"

	"modelgate/calibration"
)

// GET /admin/usage lists each calibrated model's ratio, spread and samples, and an empty
// list when nothing is calibrated.
func TestAdminUsageEstimates(t *testing.T) {
	tb := calibration.New(nil, nil, nil)
	for range 4 {
		tb.Observe("alpha", "gpt-4o-mini", 100, 100)
		tb.Observe("alpha", "gpt-4o-mini", 100, 200)
	}
	tb.Observe("alpha", "sim-chat", 100, 150)
	for _, tc := range []struct {
		name string
		src  *calibration.Table
		want []calibration.ModelFactor
	}{
		{"none", calibration.New(nil, nil, nil), []calibration.ModelFactor{}},
		{"calibrated", tb, []calibration.ModelFactor{
			{Model: "gpt-4o-mini", Factor: calibration.Factor{Ratio: (12.0 + 4) / 12, Spread: 0.5 / 1.5, Samples: 8}},
			{Model: "sim-chat", Factor: calibration.Factor{Ratio: (1.5 + 4) / 5, Samples: 1}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := startEnv(t, envOptions{calibration: tc.src})
			status, _, b := env.do(t, "GET", "/admin/usage", keyAdmin, nil)
			if status != 200 {
				t.Fatalf("%d %s", status, b)
			}
			var u struct {
				Estimates []calibration.ModelFactor `json:"estimates"`
			}
			var raw map[string]json.RawMessage
			if err := json.Unmarshal(b, &raw); err != nil || raw["estimates"] == nil {
				t.Fatalf("no estimates in %s", b)
			}
			if err := json.Unmarshal(b, &u); err != nil || len(u.Estimates) != len(tc.want) {
				t.Fatalf("estimates = %s, want %+v", raw["estimates"], tc.want)
			}
			for i, w := range tc.want {
				g := u.Estimates[i]
				if g.Model != w.Model || g.Samples != w.Samples || !nearly(g.Ratio, w.Ratio) || !nearly(g.Spread, w.Spread) {
					t.Errorf("estimates[%d] = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func nearly(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
