package apitest

import (
	"strings"
	"testing"
)

func TestCanaryFresh(t *testing.T) {
	a, b := Canary(t), Canary(t)
	if a == b || !strings.HasPrefix(a, "sk-CANARY-") || len(a) != len("sk-CANARY-")+24 {
		t.Errorf("canaries %q and %q", a, b)
	}
}
