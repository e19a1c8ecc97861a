package auth

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

const canary = "sk-CANARY-5ecret"

func TestSecretNeverPrints(t *testing.T) {
	s := Secret(canary)
	p := &Principal{Team: "search", KeyName: "prod", PlatformKey: s}
	type wrapper struct {
		P *Principal
		S Secret
	}
	outputs := map[string]string{}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%10s", "%d", "%+s", "%#s"} {
		outputs["secret_"+verb] = fmt.Sprintf(verb, s)
		outputs["principal_"+verb] = fmt.Sprintf(verb, *p)
		outputs["wrapper_"+verb] = fmt.Sprintf(verb, wrapper{P: p, S: s})
	}
	outputs["sprint"] = fmt.Sprint(s, p.PlatformKey)
	outputs["println"] = fmt.Sprintln(s)
	outputs["error_wrap"] = fmt.Errorf("calling upstream with %v: %w", s, fmt.Errorf("%s", s)).Error()
	js, err := json.Marshal(wrapper{P: p, S: s})
	if err != nil {
		t.Fatal(err)
	}
	outputs["json"] = string(js)

	for _, h := range []struct {
		name string
		new  func(*bytes.Buffer) slog.Handler
	}{
		{"text", func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) }},
		{"json", func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) }},
	} {
		var buf bytes.Buffer
		log := slog.New(h.new(&buf))
		log.Info("req", "key", s, "principal", p, "value", *p, "any", any(s), slog.Group("g", "k", s))
		log.Info("wrapped", "w", wrapper{P: p, S: s})
		outputs["slog_"+h.name] = buf.String()
	}

	for name, out := range outputs {
		t.Run(name, func(t *testing.T) {
			if strings.Contains(out, canary) || strings.Contains(out, fmt.Sprintf("%x", canary)) {
				t.Errorf("secret printed: %s", out)
			}
			if !strings.Contains(out, "REDACTED") {
				t.Errorf("want REDACTED in %q", out)
			}
		})
	}
	if s.Reveal() != canary {
		t.Error("Reveal must return the value")
	}
}
