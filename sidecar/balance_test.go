package sidecar

import (
	"strings"
	"testing"
)

func TestBalanceCacheKeyIsDigest(t *testing.T) {
	k := balanceCacheKey("sk-secret-value")
	if strings.Contains(k, "secret") || len(k) != 64 || k == balanceCacheKey("sk-secret-valuf") {
		t.Errorf("cache key %q", k)
	}
}
