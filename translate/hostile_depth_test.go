package translate

import (
	"encoding/base64"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"
	"unicode/utf8"
)

// Every client body a dialect parses, and every JSON nested inside one (thinking
// signatures), goes through the one bounded validator; gjson's own recurses once per level
// and 16 MiB of '[' overflows the stack, a fatal error no recover catches.

func messagesBody(extra string) string {
	return `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]` + extra + `}`
}

func thinkingBody(sig string) string {
	return `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"` + sig + `"},{"type":"text","text":"ok"}]},` +
		`{"role":"user","content":"go on"}]}`
}

func signatureOf(json string) string {
	return signaturePrefix + base64.RawURLEncoding.EncodeToString([]byte(json))
}

func TestParseMessagesRejectsDeepBody(t *testing.T) {
	bodies := map[string]string{
		"deep_metadata": messagesBody(`,"metadata":` + nested(MaxEventDepth, true, "1")),
		"deep_tool_input": `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"c","name":"f","input":` +
			nested(MaxEventDepth, true, "1") + `}]}]}`,
		"only_brackets": strings.Repeat("[", MaxEventDepth+1),
	}
	for name, body := range bodies {
		for _, count := range []bool{false, true} {
			parse := ParseMessages
			if count {
				parse = ParseMessagesCount
			}
			_, err := parse([]byte(body))
			e, ok := err.(*Error)
			if !ok || e.HTTPStatus() != 400 || e.Code != "invalid_json" || !strings.Contains(e.Message, "128 levels") {
				t.Errorf("%s (count %v): error %v", name, count, err)
			}
		}
	}
}

// A signature carrying modelgate's prefix over anything it never issued is a 400 naming the
// block: it is the client's input, and dropping it silently would hide that the turn's
// reasoning never went upstream.
func TestParseMessagesRefusesMalformedSignature(t *testing.T) {
	good := makeSignature("rs_1", "ENC")
	if _, err := ParseMessages([]byte(thinkingBody(good))); err != nil {
		t.Fatalf("an issued signature: %v", err)
	}
	if _, err := ParseMessages([]byte(thinkingBody("EqQBCkYIBxgCKkAforeign"))); err != nil {
		t.Fatalf("a foreign signature is dropped, not refused: %v", err)
	}
	for name, sig := range map[string]string{
		"deep":        signatureOf(nested(MaxEventDepth+1, false, "")),
		"not_base64":  signaturePrefix + "!!!",
		"not_json":    signatureOf(`{"id":`),
		"id_a_number": signatureOf(`{"id":5,"enc":"x"}`),
		"no_id":       signatureOf(`{"enc":"x"}`),
	} {
		_, err := ParseMessages([]byte(thinkingBody(sig)))
		e, ok := err.(*Error)
		if !ok || e.HTTPStatus() != 400 || e.Param != "messages.1.content.0.signature" {
			t.Errorf("%s: error %v", name, err)
		}
	}
}

const depthChildEnv = "MODELGATE_TRANSLATE_DEPTH_CHILD"

// The crash inputs of issue 24, at full size, in a child process: on a validator that
// recursed without bound the child dies of a stack overflow (its stack is capped at 64 MiB
// so that takes a moment and little memory) and the test fails instead of the suite dying.
func TestHostileDepthDoesNotCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds inputs of tens of megabytes")
	}
	if os.Getenv(depthChildEnv) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHostileDepthDoesNotCrash$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), depthChildEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the child died on deep input: %v\n%.3000s", err, out)
		}
		return
	}
	debug.SetMaxStack(64 << 20)
	deep := []byte(strings.Repeat("[", 16<<20))
	if _, err := ParseMessages(deep); err == nil {
		t.Error("ParseMessages accepted 16 MiB of '['")
	}
	if _, err := ParseMessagesCount(deep); err == nil {
		t.Error("ParseMessagesCount accepted 16 MiB of '['")
	}
	sig := signatureOf(strings.Repeat("[", 20e6))
	if _, _, kind := parseSignature(sig); kind != signatureMalformed {
		t.Errorf("parseSignature: %v", kind)
	}
	if _, err := ParseMessages([]byte(thinkingBody(sig))); err == nil {
		t.Error("a signature of 20e6 '[' was accepted")
	}
	if _, _, err := ResponseToMessage(deep, baseMessagesMeta()); err == nil {
		t.Error("ResponseToMessage accepted 16 MiB of '['")
	}
	if got := string(appendToolInput(nil, string(deep))); got != "{}" {
		t.Errorf("tool arguments of 16 MiB of '[' became %.20q", got)
	}
}

// FuzzParseSignature: a signature modelgate made decodes to what it was made from; anything
// else is foreign or malformed, never a panic, never an empty id.
func FuzzParseSignature(f *testing.F) {
	f.Add("rs_1", "ENC", "")
	f.Add("", "", signaturePrefix+"e30")
	f.Add("x", "", signatureOf(nested(MaxEventDepth+1, false, "")))
	f.Fuzz(func(t *testing.T, id, enc, raw string) {
		if id != "" && utf8.ValidString(id) && utf8.ValidString(enc) { // JSON strings carry text
			gotID, gotEnc, kind := parseSignature(makeSignature(id, enc))
			if kind != signatureOurs || gotID != id || gotEnc != enc {
				t.Fatalf("round trip of %q %q: %q %q %v", id, enc, gotID, gotEnc, kind)
			}
		}
		gotID, _, kind := parseSignature(raw)
		switch {
		case kind == signatureOurs && gotID == "":
			t.Fatalf("%q decoded with an empty id", raw)
		case kind == signatureForeign && strings.HasPrefix(raw, signaturePrefix):
			t.Fatalf("%q has the prefix but is called foreign", raw)
		}
	})
}
