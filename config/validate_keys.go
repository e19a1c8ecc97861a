package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// keyDigest is how keys are compared for duplicates: the same digest auth will hold.
func keyDigest(k Key) ([32]byte, bool) {
	if k.Key != "" {
		return sha256.Sum256([]byte(k.Key)), true
	}
	var d [32]byte
	if len(k.KeySHA256) != 64 {
		return d, false
	}
	if _, err := hex.Decode(d[:], []byte(k.KeySHA256)); err != nil {
		return d, false
	}
	return d, true
}

func (v *validator) teams(c *Config, modelIDs map[string]bool) map[[32]byte]string {
	digests := map[[32]byte]string{}
	teamFirst := map[string]int{}
	for i, t := range c.Teams {
		tp := fmt.Sprintf("teams[%d]", i)
		if !nameRE.MatchString(t.Name) {
			v.fail(tp+".name", "%s, got %q", nameRule, t.Name)
		} else if j, dup := teamFirst[t.Name]; dup {
			v.fail(tp+".name", "duplicate team name %q (also teams[%d])", t.Name, j)
		} else {
			teamFirst[t.Name] = i
		}
		own := v.keyPool(tp+".upstream_api_key", t.UpstreamAPIKey, tp+".upstream_api_keys", t.UpstreamAPIKeys)
		if !own && c.Upstream.APIKey == "" && len(c.Upstream.UpstreamAPIKeys) == 0 {
			v.fail(tp, "no platform key for this team: set upstream.api_key or %s.upstream_api_key%s",
				tp, v.emptyHint(tp+".upstream_api_key")+v.emptyHint("upstream.api_key"))
		}
		for j, m := range t.Models {
			mp := fmt.Sprintf("%s.models[%d]", tp, j)
			if prob := modelIDProblem(m); prob != "" {
				v.fail(mp, "%s", prob)
			} else if len(c.Models) > 0 && !modelIDs[m] {
				v.fail(mp, "model %q is not listed under models", m)
			}
		}
		v.limits(tp+".limits", t.Limits)
		v.budgetAction(tp+".limits", t.Limits)
		v.noSocketCap(tp+".limits", t.Limits)
		v.either(tp+".mode", t.Mode, "enforce", "shadow")
		v.endUserLimits(tp+".end_user_limits", t.EndUserLimits)
		if len(t.Keys) == 0 {
			// Without this a config whose teams all lack keys would quietly run in passthrough
			// mode, forwarding any caller's token: fail closed instead.
			v.fail(tp+".keys", "a team needs at least one key")
		}
		v.keys(tp, t.Keys, digests)
		for j := range t.Keys {
			v.keyModels(c, i, j)
			v.keyTags(fmt.Sprintf("%s.keys[%d].tags", tp, j), t.Keys[j].Tags)
		}
	}
	return digests
}

func (v *validator) keys(tp string, keys []Key, digests map[[32]byte]string) {
	keyFirst := map[string]int{}
	for j, k := range keys {
		kp := fmt.Sprintf("%s.keys[%d]", tp, j)
		if !nameRE.MatchString(k.Name) {
			v.fail(kp+".name", "%s, got %q", nameRule, k.Name)
		} else if first, dup := keyFirst[k.Name]; dup {
			v.fail(kp+".name", "duplicate key name %q in this team (also %s.keys[%d])", k.Name, tp, first)
		} else {
			keyFirst[k.Name] = j
		}
		switch {
		case k.Key != "" && k.KeySHA256 != "":
			v.fail(kp, "set key or key_sha256, not both")
			continue
		case k.Key == "" && k.KeySHA256 == "":
			v.fail(kp+".key", "set key or key_sha256%s", v.emptyHint(kp+".key")+v.emptyHint(kp+".key_sha256"))
			continue
		case k.Key != "":
			if p := TokenProblem(k.Key); p != "" {
				v.fail(kp+".key", "%s", p)
				continue
			}
		default:
			if _, ok := keyDigest(k); !ok {
				got := fmt.Sprintf("%d characters", len(k.KeySHA256))
				if len(k.KeySHA256) == 64 {
					got = "a non-hex character"
				}
				v.fail(kp+".key_sha256", "want 64 hex digits (sha256 of the key), got %s", got)
				continue
			}
		}
		d, _ := keyDigest(k)
		if other, dup := digests[d]; dup {
			v.fail(kp, "same key as %s: every key must be distinct", other)
			continue
		}
		digests[d] = kp
		v.limits(kp+".limits", k.Limits)
		v.noBudgetAction(kp+".limits", k.Limits)
	}
}

func (v *validator) adminKeys(keys []string, teamDigests map[[32]byte]string) {
	seen := map[[32]byte]int{}
	for i, k := range keys {
		p := fmt.Sprintf("admin_keys[%d]", i)
		if prob := TokenProblem(k); prob != "" {
			if k == "" {
				prob += v.emptyHint(p)
			}
			v.fail(p, "%s", prob)
			continue
		}
		d := sha256.Sum256([]byte(k))
		if first, dup := seen[d]; dup {
			v.fail(p, "same key as admin_keys[%d]", first)
			continue
		}
		seen[d] = i
		// An admin key must never double as a data-plane key, or a team could reach admin routes.
		if other, dup := teamDigests[d]; dup {
			v.fail(p, "same key as %s: admin keys must differ from team keys", other)
		}
	}
}
