package main

import "strings"

// attributionCost prices recording who spent what (issue 28): the same routes through a
// modelgate that records tags (usage.tag_keys) with requests that name an end user and carry
// tags in their metadata and in x-modelgate-tags, against one that records no tags with
// requests that name nobody, alternating within each round.
//
// The two sides send the same bytes and get the same answers back. Both carry the metadata
// under its own name: modelgate forwards it either way and the platform echoes it in every
// response object, so a side without it would read smaller answers and the comparison would
// price the echo, not the recording; without usage.tag_keys, modelgate does not read it. The
// end user and the header go under names modelgate does not read on the "none" side
// ("uzer", forwarded as it is, and x-modelgate-tagz). What differs is modelgate's reading and
// recording of them: its parse, the history rows, the access log's fields.
func (b *bench) attributionCost() error {
	const meta = `"user":"end-user-4711","metadata":{"feature":"search","customer":"acme"},`
	decoyMeta := strings.Replace(meta, `"user"`, `"uzer"`, 1)
	with := func(fields string, body []byte) []byte { return append([]byte(`{`+fields), body[1:]...) }
	on := map[string]string{"x-modelgate-tags": "experiment=b"}
	off := map[string]string{"x-modelgate-tagz": "experiment=b"}
	pair := func(name, path string, body []byte) *pairCase {
		return &pairCase{name: name, path: path, offBody: with(decoyMeta, body), onBody: with(meta, body), offHeaders: off, onHeaders: on}
	}
	c := &pairComparison{title: "tags and end users recorded vs none", offLabel: "none", onLabel: "recorded", target: 0.97, swapRoles: true, cases: []*pairCase{
		pair("/v1/responses", "/v1/responses", respBody),
		pair("/v1/responses stream", "/v1/responses", respStreamBody),
		pair("/v1/chat/completions", "/v1/chat/completions", chatBody),
		pair("/v1/chat/completions stream", "/v1/chat/completions", chatStreamBody),
	}}
	if err := b.comparePair("attribution", "", "usage:\n  tag_keys: [feature, customer, experiment]\n", c); err != nil {
		return err
	}
	b.rep.pairs = append(b.rep.pairs, c)
	return nil
}
