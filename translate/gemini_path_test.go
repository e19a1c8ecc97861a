package translate

import (
	"strings"
	"testing"
)

func TestParseGeminiPath(t *testing.T) {
	for _, c := range []struct {
		path  string
		want  GeminiPath
		ok    bool
		known bool
	}{
		{"/v1beta/models/gemini-x:generateContent", GeminiPath{"/v1beta", "models/gemini-x", "generateContent"}, true, true},
		{"/v1/models/m:countTokens", GeminiPath{"/v1", "models/m", "countTokens"}, true, true},
		{"/v1beta/tunedModels/x:streamGenerateContent", GeminiPath{"/v1beta", "tunedModels/x", "streamGenerateContent"}, true, true},
		{"/v1beta/models/a:b:generateContent", GeminiPath{"/v1beta", "models/a:b", "generateContent"}, true, true},
		{"/v1beta/models/x:embedContent", GeminiPath{"/v1beta", "models/x", "embedContent"}, true, false},
		{"/v1beta/models/x", GeminiPath{}, false, false},
		{"/v2/models/x:generateContent", GeminiPath{}, false, false},
	} {
		got, ok := ParseGeminiPath(c.path)
		if got != c.want || ok != c.ok || got.Known() != c.known {
			t.Errorf("ParseGeminiPath(%q) = %+v, %v (known %v); want %+v, %v (known %v)", c.path, got, ok, got.Known(), c.want, ok, c.known)
		}
	}
}

// A path splits at its last ':' into a model and an action, whatever it holds, and only the
// three actions are known (so the routes' labels are a fixed set).
func FuzzParseGeminiPath(f *testing.F) {
	for _, s := range []string{"/v1beta/models/gemini-x:generateContent", "/v1/models/m:countTokens", "/v1beta/tunedModels/x:streamGenerateContent",
		"/v1beta/models/a:b:generateContent", "/v1beta/models/x", "/v1/models/:", "/v1beta/models/x:generateContent/extra"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		p, ok := ParseGeminiPath(path)
		if !ok {
			return
		}
		if strings.Contains(p.Action, ":") || path != p.Version+"/"+p.Model+":"+p.Action {
			t.Fatalf("%q split into %+v", path, p)
		}
		if p.Known() && p.Action != GeminiActionGenerate && p.Action != GeminiActionStream && p.Action != GeminiActionCount {
			t.Fatalf("%q: %q is known", path, p.Action)
		}
	})
}
