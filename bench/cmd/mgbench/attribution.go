package main

// attributionCost prices recording who spent what (issue 28): the same routes through a
// modelgate that records tags (usage.tag_keys) with requests that name an end user and carry
// tags in their metadata and in x-modelgate-tags, against one that records no tags with
// requests that name nobody and carry none, alternating within each round.
func (b *bench) attributionCost() error {
	const meta = `"user":"end-user-4711","metadata":{"feature":"search","customer":"acme"},`
	tagged := func(body []byte) []byte { return append([]byte(`{`+meta), body[1:]...) }
	headers := map[string]string{"x-modelgate-tags": "experiment=b"}
	c := &pairComparison{title: "tags and end users recorded vs none", offLabel: "none", onLabel: "recorded", target: 0.97, cases: []*pairCase{
		{name: "/v1/responses", path: "/v1/responses", offBody: respBody, onBody: tagged(respBody), onHeaders: headers},
		{name: "/v1/responses stream", path: "/v1/responses", offBody: respStreamBody, onBody: tagged(respStreamBody), onHeaders: headers},
		{name: "/v1/chat/completions", path: "/v1/chat/completions", offBody: chatBody, onBody: tagged(chatBody), onHeaders: headers},
		{name: "/v1/chat/completions stream", path: "/v1/chat/completions", offBody: chatStreamBody, onBody: tagged(chatStreamBody), onHeaders: headers},
	}}
	if err := b.comparePair("attribution", "", "usage:\n  tag_keys: [feature, customer, experiment]\n", c); err != nil {
		return err
	}
	b.rep.pairs = append(b.rep.pairs, c)
	return nil
}
